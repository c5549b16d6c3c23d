"""The benchmark harness runs end to end in quick mode and prints its table (times are never asserted)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SHARED, shared_path

from benchmarks.run import SECTIONS, build_parser, make_context
from benchmarks.table import Row, render_table

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.shared
@pytest.mark.slow
def test_quick_run_prints_the_table():
    """`python -m benchmarks.run --quick` exits 0 and prints the header and at least one row per section;
    sections whose code raises NotImplementedError print 'skip' rows instead of failing."""
    shared_path("bench", "chat_9k.json")
    env = dict(os.environ, RENDER_SERVICE_SHARED=str(SHARED), HF_HUB_OFFLINE="1", PEER_URL="")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "section" in out and "measurement" in out and "target" in out
    lines = out.splitlines()
    for section in ("floor", "render", "multiturn", "stream", "body", "http", "gil", "peer"):
        assert any(line.startswith(section) for line in lines), section
    assert "HF encode chat_9k" in out and "≤ 3 ms" in out


def test_unknown_section_is_refused():
    """An unknown --only section stops with a message listing the valid ones."""
    from benchmarks.run import main

    with pytest.raises(SystemExit, match="unknown section"):
        main(["--only", "nope"])


def test_quick_flag_shrinks_the_defaults():
    """--quick picks few repeats, short stream positions, one worker count and short HTTP runs."""
    ctx = make_context(build_parser().parse_args(["--quick"]))
    assert ctx.repeat == 3 and ctx.workers == [1] and ctx.stream_positions == [10, 100, 300] and ctx.quick
    full = make_context(build_parser().parse_args([]))
    assert not full.quick and full.stream_positions == [10, 1000, 4000, 8000] and full.workers == [1, 2]
    assert full.body_prompts == [1000, 100_000] and set(SECTIONS) >= {"floor", "peer"}


def test_verdicts_and_table_layout():
    """Rows compare against '<=' / '>=' targets; skipped rows say why; the table has one line per row."""
    rows = [Row("a", "x", 2.0, "ms", ("<=", 3.0)), Row("a", "y", 4.0, "ms", ("<=", 3.0)),
            Row("b", "z", 1.8, "x", (">=", 1.7)), Row("b", "w", None, "ms", None, "skipped: not built"),
            Row("c", "v", 5.0)]
    assert [r.verdict for r in rows] == ["ok", "MISS", "ok", "skip", "-"]
    table = render_table(rows).splitlines()
    assert len(table) == 2 + len(rows) and "skipped: not built" in table[-2] and "≥ 1.7 x" in table[4]


def test_parsers_flat_benchmark_runs_for_every_parser(capsys):
    """benchmarks/parsers_flat.py prints one row per registered parser (times are not asserted)."""
    import sys

    import parsers
    from benchmarks import parsers_flat

    argv, sys.argv = sys.argv, ["parsers_flat", "--chunks", "20"]
    try:
        parsers_flat.main()
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 2 + len(parsers.REASONING_PARSERS) + len(parsers.TOOL_PARSERS)


def test_server_cpu_since_a_snapshot_survives_a_thread_ending():
    """A thread that used CPU and ends between the two reads drops out of the interval instead
    of subtracting its whole lifetime (the per-thread sum of the living threads went negative)."""
    import threading

    from benchmarks import light

    ready, stop = threading.Event(), threading.Event()

    def spin() -> None:
        # 0.3 s of this thread's CPU: far more than the other threads of a test process (servers of
        # other tests, the reads themselves) use between the two reads below, even under load
        deadline = time.thread_time() + 0.3
        while time.thread_time() < deadline:
            pass
        ready.set()
        stop.wait(30)

    worker = threading.Thread(target=spin)
    worker.start()
    assert ready.wait(30)
    pids = [os.getpid()]
    plain, snapshot = light.proc_cpu_ns_s(pids), light.thread_cpu_ns(pids)
    stop.set()
    worker.join(30)
    # join() returns when the Python thread is done; the kernel's task can linger a moment after
    gone = time.monotonic() + 30
    while Path(f"/proc/{os.getpid()}/task/{worker.native_id}").exists() and time.monotonic() < gone:
        time.sleep(0.01)
    assert light.proc_cpu_ns_s(pids) - plain < 0  # the flaw cpu_since avoids
    assert light.cpu_since(snapshot, pids) >= 0


def test_light_connection_reads_each_answer_whole():
    """The light client reads a small answer (head and body in one segment) and a 3 MB one (its
    head arriving with the body's first bytes, the rest in uneven pieces) on one keep-alive socket,
    each exactly, and then the next answer."""
    import socket
    import threading

    from benchmarks import light

    big = os.urandom(3_000_000)
    answers = [(200, b'{"ok":1}'), (200, big), (404, b'{"error":"x"}')]
    srv = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{srv.getsockname()[1]}"

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            for status, body in answers:
                while b"\r\n\r\n" not in conn.recv(1 << 20):  # one small request each
                    pass
                wire = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
                cuts = [0, len(wire) - len(body) + 1000, *range(700_001, len(wire), 700_001), len(wire)]
                for a, b in zip(cuts, cuts[1:]):
                    conn.sendall(wire[a:b])
                    time.sleep(0.001)

    thread = threading.Thread(target=serve)
    thread.start()
    conn = light.Connection(url)
    try:
        got = [conn.send(light.raw_request(url, "/x", {})) for _ in answers]
    finally:
        conn.close()
        thread.join(30)
        srv.close()
    assert [(status, bytes(body)) for status, body in got] == answers
