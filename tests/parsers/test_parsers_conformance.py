"""The conformance runner (python -m parsers.conformance) and the shared conformance cases."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import shared_path

from parsers import conformance
from parsers.cases import chunks, load
from parsers.types import ParseResult, ToolCall


def test_shared_cases_of_implemented_parsers_all_pass():
    """Every parser case and parser bug case of an implemented parser passes, batch and streaming."""
    files = [shared_path("cases", "parser_cases.jsonl"), shared_path("cases", "bug_cases.jsonl")]
    cases = conformance.apply_overrides([c for f in files for c in load(f)])
    passed, failed, lines = conformance.run(cases, only_implemented=True)
    assert lines == [] and failed == 0
    assert passed >= 49


MEASURED = Path(__file__).parent / "cases" / "vllm033_measured.jsonl"


def test_cases_measured_from_vllm_classes_pass():
    """Cases whose expectations ``tools/record_parser_cases_with_vllm.py`` recorded from vLLM
    0.33's parser classes (batch), checked in batch and one token per chunk."""
    cases = load(MEASURED)
    passed, failed, lines = conformance.run(cases)
    assert (failed, lines) == (0, [])
    assert passed == 2 * len(cases) and len(cases) >= 40


def _write(tmp_path, rows):
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return str(path)


def _case(case_id, parser, output, expected, modes=("batch", "streaming")):
    return {
        "id": case_id,
        "parser_kind": "tool",
        "parser": parser,
        "model": "n/a",
        "model_output": output,
        "request": None,
        "expected": expected,
        "notes": "",
        "modes": list(modes),
    }


def test_cli_reports_failures_and_counts_per_case_and_mode(tmp_path, capsys):
    """Failures print id, mode, field, expected and got; unimplemented parsers count as failed
    unless --only-implemented; the last line is exactly 'N passed, M failed'."""
    call = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
    path = _write(
        tmp_path,
        [
            _case(
                "good",
                "hermes",
                call,
                {"content": None, "tool_calls": [{"name": "f", "arguments": '{"a":1}'}]},
            ),
            _case(
                "wrong",
                "hermes",
                call,
                {"content": None, "tool_calls": [{"name": "g", "arguments": None}]},
                modes=("batch",),
            ),
            _case("todo", "no_such_format", "x", {"content": "x"}, modes=("batch",)),
        ],
    )
    assert conformance.main([path]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "2 passed, 2 failed"
    assert "wrong [batch] tool_calls[0].name: expected 'g' got 'f'" in out
    assert any(line.startswith("todo [batch] parser not implemented") for line in out)
    assert conformance.main([path, "--only-implemented", "--parser", "hermes"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "2 passed, 1 failed"


def test_overrides_name_existing_cases_and_give_reasons():
    """Each expectation override targets a real case id and says why we differ."""
    files = [shared_path("cases", "parser_cases.jsonl"), shared_path("cases", "bug_cases.jsonl")]
    ids = {c.id for f in files for c in load(f)}
    table = json.loads(conformance.OVERRIDES.read_text(encoding="utf-8"))
    for case_id, entry in table.items():
        assert case_id in ids
        assert len(entry["reason"]) > 40 and set(entry) <= {"expected", "checks", "reason"}


def test_compare_rules():
    """Arguments compare by json.loads equality, else exactly; null name/arguments and nulls the
    notes call 'not asserted' are skipped."""
    got = ParseResult(content="markup", tool_calls=(ToolCall(name="f", arguments='{"a": 1}'),))
    expected = {"content": None, "tool_calls": [{"name": None, "arguments": '{"a":1}'}]}
    assert conformance.compare(expected, got, "content not asserted here") == []
    assert conformance.compare(expected, got, "")[0][0] == "content"
    assert not conformance.same_arguments("{bad", '{"a": 1}')
    assert conformance.same_arguments("{bad", "{bad")


def test_token_chunks_keep_markers_whole():
    """Streaming chunks follow the case model's tokenizer: markers are single chunks and the
    chunks join to the output; unknown models get 1-3 character chunks."""
    shared_path("models", "Qwen--Qwen3-0.6B")
    text = "é数<think>ab</think>\n<tool_call>{}</tool_call>"
    pieces = chunks(text, "Qwen/Qwen3-32B")
    assert "".join(pieces) == text and "<think>" in pieces and "<tool_call>" in pieces
    assert chunks("abcdefg", "mock tokenizer") == ["a", "bc", "def", "g"]
