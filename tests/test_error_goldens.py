"""Error answers equal vLLM 0.33's: every malformed request of ``tools/error_golden_cases.py``
(recorded from ``vllm launch render`` by ``tools/record_error_goldens.py`` into
``tests/goldens/errors_qwen3.json``) is replayed against our server over real HTTP and the whole
error body (status, ``type``, ``param``, ``message``, ``code``) must be vLLM's.

Exceptions, each in the README ("Deliberate differences" and "Error bodies"): ``DELIBERATE`` rows
(ours answers otherwise on purpose), ``STRUCTURAL`` rows (vLLM's message is a pydantic dump of
wire types ours does not have: the same status, another body; the test fails when one starts to
match, so that it moves out of the list) and rows where vLLM itself fails (status 0: it dropped
the connection, or a 5xx): ours must answer a 4xx there.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from conftest import REPO, model_dir

sys.path.insert(0, str(REPO / "tools"))
from error_golden_cases import FOLDER, MODEL, RAW  # noqa: E402

ROWS: list[dict[str, Any]] = json.loads((REPO / "tests" / "goldens" / "errors_qwen3.json").read_text("utf-8"))

#: README "Deliberate differences": the answer differs on purpose (same 4xx, our own body, or a 400
#: where vLLM's render passes the request on).
DELIBERATE = {
    # logprobs above --max-logprobs are a 400 at render (vLLM's engine refuses them later)
    "logprobs_without_top_logprobs_range",
    # NaN is not JSON: ours refuses the body, vLLM's parser reads it and its SamplingParams refuses it
    "chat_body_nan",
    # content an object: ours refuses it (vLLM's iterable content type reads a dict as no parts)
    "message_content_dict",
}

#: Not yet matched, the status too: a content part that is a bare string or has no ``type`` is
#: text to ours (vLLM refuses both with a dump of its part types). Asserted as they are now.
OPEN_STATUS = {"part_no_type": 200, "part_part_string": 200}

#: vLLM's answer is a pydantic dump of a union of wire types ours validates with its own checks
#: (the chat message roles and content parts; the OpenAI SDK's Responses input
#: items, tools, tool choices and text formats): the same status, another body.
STRUCTURAL = {
    "messages_int_item", "message_no_role", "message_role_int", "message_content_int",
    "part_unknown_type", "part_text_missing", "part_text_int", "part_image_url_int", "part_image_url_no_url",
    "resp_input_item_bogus", "resp_input_message_no_role", "resp_tools_no_name", "resp_tool_choice_bogus",
    "tok_messages_no_role",
}

#: 200 answers whose body is compared whole (the render answers carry a fresh request id).
WHOLE_200 = ("/tokenize", "/detokenize")


def _send(client: Any, row: dict[str, Any]) -> Any:
    if "raw" in row:
        return client.post(row["path"], content=RAW(row["raw"].encode()),
                           headers={"content-type": "application/json"})
    return client.post(row["path"], json=row["body"])


@pytest.fixture(scope="module")
def client(serve):  # type: ignore[no-untyped-def]
    return serve(model=model_dir(FOLDER), served_model_name=(MODEL,), reasoning_parser="qwen3",
                 tool_call_parser="hermes", enable_auto_tool_choice=True)


def test_every_case_is_recorded() -> None:
    from error_golden_cases import CASES

    assert [r["name"] for r in ROWS] == [name for _, name, _, _ in CASES]
    listed = DELIBERATE | STRUCTURAL | set(OPEN_STATUS)
    assert listed <= {r["name"] for r in ROWS}, listed - {r["name"] for r in ROWS}


@pytest.mark.xdist_group(FOLDER)
@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_error_body_equals_vllm(client, row: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    r = _send(client, row)
    assert r.status_code < 500, r.text  # never a 5xx
    if row["status"] == 0 or row["status"] >= 500:  # vLLM itself fails on this body
        assert 400 <= r.status_code < 500, r.text
        return
    if row["name"] in DELIBERATE:
        return
    if row["name"] in OPEN_STATUS:
        assert r.status_code == OPEN_STATUS[row["name"]], r.text
        return
    assert r.status_code == row["status"], r.text
    if row["status"] == 200:
        if row["path"] in WHOLE_200:
            assert r.json() == row["response"]
        return
    if row["name"] in STRUCTURAL:
        assert r.json() != row["response"], "now equal to vLLM's: take it out of STRUCTURAL (and the README)"
        return
    assert r.json() == row["response"]
