"""A light HTTP/1.1 load client and the server's CPU per request, for the worker-scaling rows.

On a 2-core machine the client shares the CPU with the server, so a heavy client (httpx, ~0.3 ms of
Python per request) cannot saturate 2 worker processes and hides their scaling. This client sends
pre-serialised request bytes over keep-alive sockets (one per thread, ``TCP_NODELAY``) and reads a
response by its ``Content-Length``: a few tens of µs of client CPU per request. Alongside the wall
throughput it reports the server's CPU per request, read from ``/proc/PID/stat`` (``utime + stime``
of every server process) before and after the run, and the client's own CPU per request.
"""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import orjson

_TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) used so far by ``pids`` (gone processes count 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
    return total / _TICK


def proc_cpu_ns_s(pids: list[int]) -> float:
    """CPU seconds used so far by every thread of ``pids``, at nanosecond resolution
    (``/proc/PID/task/TID/schedstat``; ``stat`` counts 10 ms ticks, too coarse for a few hundred
    sub-millisecond requests). Threads that already exited are not counted."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total / 1e9


def thread_cpu_ns(pids: list[int]) -> dict[tuple[int, str], int]:
    """CPU ns used so far by each thread of ``pids`` (``/proc/PID/task/TID/schedstat``), by
    (pid, tid): the snapshot :func:`cpu_since` subtracts."""
    found: dict[tuple[int, str], int] = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                found[(pid, task.name)] = int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return found


def cpu_since(before: dict[tuple[int, str], int], pids: list[int]) -> float:
    """CPU seconds the threads of ``pids`` used since the snapshot ``before``
    (:func:`thread_cpu_ns`), thread by thread: a thread started since counts from zero, and one
    that exited since drops out of both sides (with a plain sum of the living threads, as
    :func:`proc_cpu_ns_s`, a thread ending in the interval would subtract its whole lifetime)."""
    after = thread_cpu_ns(pids)
    return sum(ns - before.get(key, 0) for key, ns in after.items()) / 1e9


def raw_request(url: str, path: str, body: dict[str, Any]) -> bytes:
    """The bytes of one keep-alive ``POST path`` with a JSON body."""
    host = urlparse(url).netloc
    payload = orjson.dumps(body)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode("ascii") + payload


class Connection:
    """One keep-alive socket; :meth:`send` returns (status, body bytes)."""

    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        self.sock = socket.create_connection((parsed.hostname, parsed.port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, request: bytes) -> tuple[int, bytes | bytearray]:
        """Send ``request`` and read one response (``Content-Length`` framed).

        The body is read into one buffer of its length (``recv_into``), so a large answer (a
        multimodal render: megabytes) costs one allocation and one copy out of the kernel, not
        a re-joined buffer per 64 KiB read."""
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = 0
        for line in lines[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        status = int(lines[0].split()[1])
        if len(rest) >= length:
            self.buf = rest[length:]
            return status, rest[:length]
        body = bytearray(length)
        body[: len(rest)] = rest
        view, got = memoryview(body), len(rest)
        while got < length:
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionError("server closed the connection")
            got += n
        self.buf = b""
        return status, body

    def _more(self) -> None:
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def tcp_sockets() -> list[tuple[int, int, str, str]]:
    """(local port, remote port, state hex, inode) of every TCP socket (/proc/net/tcp{,6})."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            out.append((int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16), f[3], f[9]))
    return out


def _server_socket_inode(server_port: int, client_port: int) -> str | None:
    """Inode of the server side of the loopback TCP connection from ``client_port``."""
    for local, remote, _, inode in tcp_sockets():
        if (local, remote) == (server_port, client_port):
            return inode
    return None


def holder(inodes: set[str], pids: list[int]) -> int | None:
    """The first of ``pids`` with an open fd on one of the sockets ``inodes`` (``socket:[N]``)."""
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return pid
            except OSError:
                continue
    return None


def _owner(conn: Connection, pids: list[int]) -> int | None:
    """The server process holding ``conn``'s accepted socket."""
    server_port = conn.sock.getpeername()[1]
    inode = _server_socket_inode(server_port, conn.sock.getsockname()[1])
    return holder({f"socket:[{inode}]"}, pids)


def balanced_connections(
    url: str, count: int, workers: int, pids: list[int], tries: int = 400
) -> list[Connection]:
    """``count`` keep-alive connections spread evenly over ``workers`` processes.

    uvicorn's workers share one listening socket and a keep-alive connection stays with the process
    that accepted it, so a few connections opened at once often all land on one worker (the other
    idles). Connections are opened (and answered once, so they are accepted) until every worker
    holds ``count / workers``; surplus ones are closed.
    """
    probe = f"GET /health HTTP/1.1\r\nHost: {urlparse(url).netloc}\r\n\r\n".encode("ascii")
    per: dict[int, list[Connection]] = {}
    surplus: list[Connection] = []
    quota = -(-count // max(1, workers))
    for _ in range(tries):
        if sum(len(v) for v in per.values()) >= count:
            break
        conn = Connection(url)
        conn.send(probe)
        owner = _owner(conn, pids) if workers > 1 else 0
        if owner is not None and len(per.setdefault(owner, [])) < quota:
            per[owner].append(conn)
        else:
            surplus.append(conn)
    for conn in surplus:
        conn.close()
    return [c for v in per.values() for c in v][:count]


@dataclass
class Run:
    """One throughput run: wall rate, latency, CPU per request on each side, first error."""

    rate: float
    latency_ms: float
    server_cpu_ms: float
    client_cpu_ms: float
    server_cpu_share: float
    error: str


def throughput(
    url: str,
    path: str,
    bodies: list[dict[str, Any]],
    concurrency: int,
    duration: float,
    pids: list[int],
    workers: int = 1,
) -> Run:
    """Drive ``concurrency`` keep-alive connections, spread evenly over the ``workers`` server
    processes, for ``duration`` s (after one warm-up request per connection);
    ``server_cpu_share`` = server CPU s / wall s (2.0 = two cores busy)."""
    requests = [raw_request(url, path, b) for b in bodies]
    lat: list[float] = []
    errors: list[str] = []
    conns = balanced_connections(url, concurrency, workers, pids)
    concurrency = len(conns)
    for k, conn in enumerate(conns):
        conn.send(requests[k % len(requests)])
    stop_at = [0.0]

    def client(k: int) -> None:
        conn, i = conns[k], k
        while time.perf_counter() < stop_at[0]:
            t0 = time.perf_counter()
            try:
                status, data = conn.send(requests[i % len(requests)])
            except OSError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                return
            if status != 200:
                errors.append(f"{status} {data[:160]!r}")
                return
            lat.append(time.perf_counter() - t0)
            i += concurrency

    threads = [threading.Thread(target=client, args=(k,)) for k in range(concurrency)]
    cpu0, mine0, t_start = proc_cpu_s(pids), time.process_time(), time.perf_counter()
    stop_at[0] = t_start + duration
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t_start
    server, mine = proc_cpu_s(pids) - cpu0, time.process_time() - mine0
    for conn in conns:
        conn.close()
    n = max(1, len(lat))
    return Run(
        len(lat) / elapsed,
        statistics.median(lat) * 1e3 if lat else 0.0,
        server / n * 1e3,
        mine / n * 1e3,
        server / elapsed,
        errors[0] if errors else "",
    )


def chained_ms(
    url: str, path: str, make_body: Callable[[int, Any], dict[str, Any]], count: int, pids: list[int]
) -> tuple[float, float]:
    """(median wall ms, server CPU ms per request) of ``count`` requests sent one after another on
    one connection; ``make_body(i, previous JSON answer)`` builds each (a stream's next chunk)."""
    conn = Connection(url)
    walls: list[float] = []
    previous: Any = None
    cpu0 = proc_cpu_s(pids)
    try:
        for i in range(count):
            request = raw_request(url, path, make_body(i, previous))
            t0 = time.perf_counter()
            status, data = conn.send(request)
            walls.append(time.perf_counter() - t0)
            if status != 200:
                raise RuntimeError(f"server answered {status}: {data[:160]!r}")
            previous = orjson.loads(data)
    finally:
        conn.close()
    return statistics.median(walls) * 1e3, (proc_cpu_s(pids) - cpu0) / max(1, count) * 1e3
