"""Record the requests the schema fuzz tests draw into ``tests/goldens/fuzz_requests.msgpack.xz``.

    python tools/record_fuzz_requests.py [pytest options, e.g. -n 0]

Runs the fuzz tests of ``tests/test_ops_schemathesis.py`` with ``RENDER_FUZZ_RECORD`` set: every
one draws its requests live (schemathesis and hypothesis, derandomized under the ``ci`` profile),
sends them to both servers with the usual checks, and writes what it sent with the corpus key
(``corpus_key``: schema, test module, example count, library versions) and the local constants
they were drawn with (the code's literals, ``code_constants``). The files are merged into
the corpus (msgpack, xz-compressed); the fuzz tests then send the recorded requests while the key
is unchanged. Re-run it after changing a route, a request model, that test module or a library
in the key; it refuses to write a corpus from runs that disagree on the key or left an operation
out. Needs ../shared (the fuzzed servers serve Qwen3-0.6B), like the tests.
"""

from __future__ import annotations

import lzma
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import msgpack

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "goldens" / "fuzz_requests.msgpack.xz"


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "RENDER_FUZZ_RECORD": folder, "HYPOTHESIS_PROFILE": "ci"}
        env.pop("RENDER_FUZZ_EXAMPLES", None)
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "tests/test_ops_schemathesis.py", "-k", "test_no_server_errors", *argv],
                             cwd=REPO, env=env, check=False)
        if run.returncode:
            print("the fuzz tests failed: nothing recorded", file=sys.stderr)
            return run.returncode
        files = sorted(Path(folder).glob("*.msgpack"))
        recorded = [msgpack.unpackb(f.read_bytes(), raw=False) for f in files]
    keys = {entry["key"] for entry in recorded}
    constants = {msgpack.packb(entry["constants"]) for entry in recorded}
    if len(keys) != 1 or len(constants) != 1:
        print(f"the fuzz tests recorded {len(keys)} keys and {len(constants)} constant sets: nothing recorded",
              file=sys.stderr)
        return 1
    sys.path.insert(0, str(REPO / "tests"))
    from test_ops_schemathesis import OPERATIONS  # noqa: E402 - the test module's list, after the run

    requests = {entry["operation"]: entry["requests"] for entry in recorded}
    missing = {f"{method} {path}" for method, path in OPERATIONS} - set(requests)
    if missing:
        print(f"no requests recorded for {sorted(missing)}: nothing recorded", file=sys.stderr)
        return 1
    packed = msgpack.packb({"key": keys.pop(), "requests": dict(sorted(requests.items())),
                            "constants": recorded[0]["constants"]})
    CORPUS.write_bytes(lzma.compress(packed, preset=9 | lzma.PRESET_EXTREME))
    total = sum(len(r) for r in requests.values())
    print(f"{CORPUS.relative_to(REPO)}: {total} requests of {len(requests)} operations, "
          f"{CORPUS.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
