"""Per-chunk cost and state size of every registered parser over a long plain-text stream.

For each name in ``parsers.REASONING_PARSERS`` and ``parsers.TOOL_PARSERS``: feed N chunks of
plain text (reasoning for reasoning parsers, content for tool parsers; the state is serialised
and parsed with orjson between chunks, as the service does), and print the median time of a
chunk in the first and the last 10 % of the stream, their ratio, and the state size at both ends.
A flat parser has a ratio near 1 and the same state size at both ends. The names whose format
the model describes (``parsers.TEMPLATE_PARSERS``: ``hf``, ``beam``) are built from the example
``response_template`` of ``parsers.formats.response_template.EXAMPLE_CONFIG``.

    python -m benchmarks.parsers_flat [--chunks 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import orjson

import parsers
from parsers.formats.response_template import EXAMPLE_CONFIG
from parsers.types import ParseContext

CHUNK = "lorem ipsum é数 "
TOOLS = ({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},)


def measure(kind: str, name: str, chunks: int) -> tuple[float, float, int, int]:
    """(median µs first 10 %, median µs last 10 %, state bytes first, state bytes last)."""
    config = EXAMPLE_CONFIG if name in parsers.TEMPLATE_PARSERS else None
    parser = parsers.get_parser(
        name if kind == "reasoning" else None, name if kind == "tool" else None, tokenizer_config=config
    )
    state = parser.start(ParseContext(tools=TOOLS), None)
    times: list[float] = []
    sizes: list[int] = []
    for _ in range(chunks):
        blob = orjson.dumps(state)
        t0 = time.perf_counter()
        state, _ = parser.feed(orjson.loads(blob), CHUNK)
        times.append(time.perf_counter() - t0)
        sizes.append(len(blob))
    tenth = max(1, chunks // 10)
    first = statistics.median(times[:tenth]) * 1e6
    last = statistics.median(times[-tenth:]) * 1e6
    return first, last, sizes[tenth], sizes[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=20000)
    args = ap.parse_args()
    print(
        f"{'kind':<10}{'parser':<26}{'µs first':>10}{'µs last':>10}{'ratio':>8}"
        f"{'state B first':>15}{'last':>7}"
    )
    worst = 0.0
    for kind, names in (("reasoning", parsers.REASONING_PARSERS), ("tool", parsers.TOOL_PARSERS)):
        for name in names:
            first, last, s0, s1 = measure(kind, name, args.chunks)
            worst = max(worst, last / first)
            print(f"{kind:<10}{name:<26}{first:>10.1f}{last:>10.1f}{last / first:>8.2f}{s0:>15}{s1:>7}")
    print(f"worst last/first ratio: {worst:.2f}")


if __name__ == "__main__":
    main()
