"""Stop strings (hold-back, batch == stream) and stop-token dropping, at unit and derender level."""

from __future__ import annotations

from conftest import examples
from derender_helpers import QWEN3, bundle, cuts, split, stream_body
from hypothesis import given, settings
from hypothesis import strategies as st

from render_service import derender
from render_service.derender import stop_strings
from render_service.settings import Settings

SETTINGS = settings(max_examples=examples(150), deadline=None)


def run_stream(pieces, stops, include=False):
    """Feed pieces through the stop matcher; return (sent pieces, match)."""
    held, sent = "", []
    for piece in pieces:
        emit, held, match = stop_strings.step(held, piece, stops, include)
        sent.append(emit)
        if match:
            sent.append(match.text)
            return sent, match
    sent.append(stop_strings.flush(held))
    return sent, None


def reference(text, stops, include):
    """Whole-text reference: earliest-ending match, ties by list order."""
    best = None
    for s in stops:
        at = text.find(s)
        if at >= 0 and (best is None or at + len(s) < best[0] + len(best[1])):
            best = (at, s)
    if best is None:
        return text, None
    at, s = best
    return text[: at + len(s) if include else at], s


@SETTINGS
@given(
    text=st.text(alphabet="abcé日 ", max_size=40),
    stops=st.lists(st.text(alphabet="abcé日 ", min_size=1, max_size=4), max_size=3),
    sizes=cuts,
    include=st.booleans(),
)
def test_stop_strings_any_split_equals_whole(text, stops, sizes, include):
    """For any text, stop list and split, the streamed output equals the whole-text cut and the
    reported stop string is the earliest-ending match."""
    pieces = ["".join(text[sum(sizes[:i]) : sum(sizes[: i + 1])]) for i in range(len(sizes))]
    pieces.append(text[sum(sizes) :])
    sent, match = run_stream(pieces, stops, include)
    want_text, want_stop = reference(text, stops, include)
    assert "".join(sent) == want_text
    assert (match.stop if match else None) == want_stop


def test_br13_hold_back_multi_piece_stop():
    """BR13: pieces DEF, G, HI, J of stop 'DEFGHIJ' are never sent; stop_reason is the string."""
    sent, match = run_stream(["DEF", "G", "HI", "J", "KLM"], ["DEFGHIJ"])
    assert "".join(sent) == "" and match.stop == "DEFGHIJ"


def chat_stream(b, s, ids, chat_request, first_extra=None):
    """Stream ids one per chunk through chat derender; returns the list of responses."""
    state, responses = None, []
    for i, t in enumerate(ids):
        fin = "stop" if i == len(ids) - 1 else None
        body = stream_body([t], state, finish=fin, request_id="r1")
        if state is None:
            body["chat_request"] = chat_request
            body.update(first_extra or {})
        r = derender.derender_chat(b, s, body)
        state = r["stream_state"]
        responses.append(r)
    return responses


def content_of(responses):
    return "".join((c["delta"]["content"] or "") for r in responses for c in r["chunk"]["choices"])


def test_br14_stop_split_across_tokens_streaming():
    """BR14: 'beta gamma' split across tokens stops the stream: content 'alpha ',
    finish_reason stop, stop_reason the string, stop_generation true, nothing after."""
    b = bundle(QWEN3)
    s = Settings(model=b.root)
    ids = b.tokenizer.encode("alpha beta gamma delta", add_special_tokens=False)
    rs = chat_stream(b, s, ids, {"messages": [], "stop": ["beta gamma"]})
    assert content_of(rs) == "alpha "
    final = [r for r in rs if r["stop_generation"]]
    assert len(final) == 1
    choice = final[0]["chunk"]["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == "beta gamma"
    after = rs[rs.index(final[0]) + 1 :]
    assert after and all(r["chunk"]["choices"] == [] for r in after)


def test_br14_batch_and_include_stop_str():
    """Batch derender cuts at the stop string; include_stop_str_in_output keeps it."""
    b = bundle(QWEN3)
    s = Settings(model=b.root)
    ids = b.tokenizer.encode("alpha beta gamma delta", add_special_tokens=False)
    for include, want in ((False, "alpha "), (True, "alpha beta gamma")):
        body = {
            "generate_response": {
                "request_id": "r",
                "choices": [{"index": 0, "token_ids": ids, "finish_reason": "length"}],
            },
            "chat_request": {"messages": [], "stop": "beta gamma", "include_stop_str_in_output": include},
        }
        choice = derender.derender_chat(b, s, body)["choices"][0]
        assert choice["message"]["content"] == want
        assert (choice["finish_reason"], choice["stop_reason"]) == ("stop", "beta gamma")


def test_min_tokens_exempts_early_text():
    """A stop string inside the first min_tokens tokens does not stop the output."""
    b = bundle(QWEN3)
    s = Settings(model=b.root)
    ids = b.tokenizer.encode("stop now and stop later", add_special_tokens=False)
    body = {
        "generate_response": {
            "request_id": "r",
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": "length"}],
        },
        "completion_request": {"stop": ["stop"], "min_tokens": 2},
    }
    choice = derender.derender_completion(
        b, s, {**body, "generate_responses": [body.pop("generate_response")]}
    )["choices"][0]
    assert choice["text"] == "stop now and " and choice["stop_reason"] == "stop"


@settings(max_examples=examples(40), deadline=None)
@given(sizes=cuts, min_tokens=st.integers(0, 6), include=st.booleans())
def test_stream_equals_batch_with_stops(sizes, min_tokens, include):
    """Completions: streaming (any chunking, state serialised between calls) equals batch for
    stop strings, min_tokens and include_stop_str_in_output."""
    b = bundle(QWEN3)
    s = Settings(model=b.root)
    ids = b.tokenizer.encode("one two 日本 three two one", add_special_tokens=False) + [151645]
    req = {
        "stop": ["two", "本 th"],
        "min_tokens": min_tokens,
        "include_stop_str_in_output": include,
        "skip_special_tokens": False,
    }
    batch = derender.derender_completion(
        b,
        s,
        {
            "generate_responses": [{"request_id": "r", "choices": [{"index": 0, "token_ids": ids}]}],
            "completion_request": req,
        },
    )["choices"][0]
    state, text, finish = None, "", None
    chunks = list(split(ids, sizes))
    for i, chunk in enumerate(chunks):
        body = stream_body(chunk, state, finish="stop" if i == len(chunks) - 1 else None)
        if state is None:
            body["completion_request"] = req
        r = derender.derender_completion(b, s, body)
        state = r["stream_state"]
        for c in r["chunk"]["choices"]:
            text += c["text"]
            finish = c["finish_reason"] or finish
    assert text == batch["text"] and finish == batch["finish_reason"]


def test_eos_dropped_from_text_but_counted():
    """The primary EOS ending the output is left out of the text (even with
    skip_special_tokens false) but still counted in usage."""
    b = bundle(QWEN3)
    s = Settings(model=b.root)
    ids = b.tokenizer.encode("hi", add_special_tokens=False) + [b.tokenizer.eos_token_id]
    body = {
        "generate_response": {"request_id": "r", "choices": [{"index": 0, "token_ids": ids}]},
        "chat_request": {"messages": [], "skip_special_tokens": False},
    }
    out = derender.derender_chat(b, s, body)
    assert out["choices"][0]["message"]["content"] == "hi"
    assert out["usage"]["completion_tokens"] == len(ids)


def test_request_stop_token_id_reported():
    """A request stop_token_id ending the output is dropped and reported as stop_reason."""
    b = bundle(QWEN3)
    s = Settings(model=b.root)
    stop_id = b.tokenizer.encode("!", add_special_tokens=False)[0]
    ids = b.tokenizer.encode("hi", add_special_tokens=False) + [stop_id]
    body = {
        "generate_response": {"request_id": "r", "choices": [{"index": 0, "token_ids": ids}]},
        "chat_request": {"messages": [], "stop_token_ids": [stop_id]},
    }
    choice = derender.derender_chat(b, s, body)["choices"][0]
    assert choice["message"]["content"] == "hi" and choice["stop_reason"] == stop_id


def test_finish_only_chunk_flushes_holdback_and_parser():
    """Text held back as a possible stop-string start (and the parser's held partial marker) is
    released by a finish-only chunk (no token ids), with finish_reason set."""
    b = bundle(QWEN3)
    s = Settings(model=b.root, reasoning_parser="qwen3")
    ids = b.tokenizer.encode("</think>answer xy", add_special_tokens=False)
    chat = {"messages": [], "stop": ["xyz"]}
    first = {**stream_body(ids, None), "chat_request": chat}
    r1 = derender.derender_chat(b, s, first)
    assert r1["chunk"]["choices"][0]["delta"]["content"] == "answer "
    r2 = derender.derender_chat(b, s, stream_body([], r1["stream_state"], finish="length"))
    choice = r2["chunk"]["choices"][0]
    assert (choice["delta"]["content"], choice["finish_reason"]) == ("xy", "length")
    assert not r2["stop_generation"]
