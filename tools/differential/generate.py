"""Seeded hypothesis strategies: chat/completions requests and model outputs.

``draw(strategy, n, seed)`` collects ``n`` examples deterministically (hypothesis ``@seed``, no
example database), so two runs with the same seed send the same inputs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis import strategies as st


def draw(strategy: st.SearchStrategy[Any], n: int, seed: int) -> list[Any]:
    """``n`` examples of ``strategy``, the same for the same ``seed``."""
    out: list[Any] = []
    if n <= 0:  # e.g. ``--outputs 0``: render only
        return out

    @hseed(seed)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(x: Any) -> None:
        out.append(x)

    collect()
    return out[:n]


# --- requests --------------------------------------------------------------------------------

WORDS = ["hello", "What is the weather in Paris?", "日本語のテキスト", "emoji 😶‍🌫️ here", "  spaced  ",
         "line\nbreak", "", "<think>x</think>", "tab\there", "Ünïcödé", "{\"json\": 1}", "a" * 40]
text = st.sampled_from(WORDS)
TOOL_POOL = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "number"}}}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web.",
                                      "strict": True, "parameters": {
                                          "type": "object", "properties": {
                                              "query": {"type": "string"},
                                              "limit": {"type": "integer"}},
                                          "required": ["query"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "noargs", "description": "No arguments."}},
]
parts = st.lists(st.builds(lambda t: {"type": "text", "text": t}, text), min_size=0, max_size=3)
content = st.one_of(text, parts)


@st.composite
def tool_call(draw: Any, i: int) -> dict[str, Any]:
    fn = draw(st.sampled_from(["get_weather", "add", "search"]))
    args = draw(st.sampled_from(['{"city": "Paris"}', '{"a": 1, "b": 2.5}', "{}", "not json",
                                 '{"query": "日本", "limit": 3}']))
    call: dict[str, Any] = {"id": draw(st.sampled_from([f"call_{i}abc", f"A{i}b2C3d4"])),
                            "function": {"name": fn, "arguments": args}}
    if draw(st.booleans()) or draw(st.booleans()):
        call["type"] = "function"
    return call


@st.composite
def messages(draw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(content)})
    for turn in range(draw(st.integers(0, 2))):
        out.append({"role": "user", "content": draw(content)})
        kind = draw(st.sampled_from(["text", "null", "calls", "reasoning"]))
        if kind == "calls":
            calls = [draw(tool_call(turn * 2 + k)) for k in range(draw(st.integers(1, 2)))]
            out.append({"role": "assistant", "content": draw(st.sampled_from([None, "", "ok"])),
                        "tool_calls": calls})
            for c in calls:
                out.append({"role": "tool", "tool_call_id": c["id"], "content": draw(content)})
            continue
        msg: dict[str, Any] = {"role": "assistant",
                               "content": None if kind == "null" else draw(content)}
        if kind == "reasoning":
            msg["reasoning"] = draw(text)
        out.append(msg)
    if draw(st.integers(0, 9)) > 0:
        out.append({"role": "user", "content": draw(content)})
    return out


SAMPLING: dict[str, st.SearchStrategy[Any]] = {
    "temperature": st.sampled_from([0, 0.0, 0.7, 1.0, 1.5]),
    "top_p": st.sampled_from([0.1, 0.9, 1.0]),
    "top_k": st.sampled_from([-1, 0, 1, 50]),
    "min_p": st.sampled_from([0.0, 0.05]),
    "max_tokens": st.sampled_from([1, 16, 100, 4096]),
    "max_completion_tokens": st.sampled_from([8, 16, 256]),
    "n": st.sampled_from([1, 2]),
    "seed": st.sampled_from([-1, 0, 42]),
    "stop": st.sampled_from(["\n", ["END", "stop"], [], "。"]),
    "stop_token_ids": st.sampled_from([[], [2, 2], [13, 7, 13]]),
    "presence_penalty": st.sampled_from([0.0, 0.5, -1.0]),
    "frequency_penalty": st.sampled_from([0.0, 1.0]),
    "repetition_penalty": st.sampled_from([1.0, 1.1]),
    "logprobs": st.booleans(),
    "top_logprobs": st.sampled_from([0, 1, 5]),
    "prompt_logprobs": st.sampled_from([0, 1]),
    "min_tokens": st.sampled_from([0, 2]),
    "ignore_eos": st.booleans(),
    "skip_special_tokens": st.booleans(),
    "spaces_between_special_tokens": st.booleans(),
    "include_stop_str_in_output": st.booleans(),
    "bad_words": st.sampled_from([["foo"], ["foo", "foo"], []]),
    "logit_bias": st.sampled_from([{"13": 1.0}, {}]),
    "response_format": st.sampled_from([{"type": "text"}, {"type": "json_object"},
                                        {"type": "json_schema", "json_schema": {
                                            "name": "x", "schema": {"type": "object"}}}]),
    "add_generation_prompt": st.booleans(),
    "continue_final_message": st.booleans(),
    "add_special_tokens": st.booleans(),
    "echo": st.booleans(),
    "return_token_ids": st.booleans(),
    "length_penalty": st.sampled_from([1.0, 0.5]),
    "truncate_prompt_tokens": st.sampled_from([None, 20]),
    "priority": st.sampled_from([0, 1]),
    "reasoning_effort": st.sampled_from(["low", "medium", "high"]),
    "include_reasoning": st.booleans(),
    "parallel_tool_calls": st.booleans(),
    "user": st.just("u1"),
    "store": st.booleans(),
}
TEMPLATE_KWARGS = st.fixed_dictionaries({}, optional={
    "enable_thinking": st.booleans(), "thinking": st.booleans(),
    "reasoning_effort": st.sampled_from(["low", "high"]),
    "custom_flag": st.just(1),
})


@st.composite
def sampling(draw: Any) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(sorted(SAMPLING)), max_size=4, unique=True))
    return {k: draw(SAMPLING[k]) for k in keys}


@st.composite
def chat_request(draw: Any) -> dict[str, Any]:
    req: dict[str, Any] = {"messages": draw(messages())}
    tools = draw(st.lists(st.sampled_from(TOOL_POOL), max_size=3, unique_by=lambda t: t["function"]["name"]))
    if tools:
        req["tools"] = tools
        choice = draw(st.sampled_from(["absent", "none", "auto", "required", "named"]))
        if choice == "named":
            req["tool_choice"] = {"type": "function",
                                  "function": {"name": draw(st.sampled_from(tools))["function"]["name"]}}
        elif choice != "absent":
            req["tool_choice"] = choice
    if draw(st.booleans()):
        req["chat_template_kwargs"] = draw(TEMPLATE_KWARGS)
    req.update(draw(sampling()))
    return req


def load_dataset(path: Path) -> list[dict[str, Any]]:
    reqs = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        rec = json.loads(line)
        req = {k: v for k, v in rec.items() if k in ("messages", "tools", "chat_template_kwargs")}
        reqs.append(req)
    return reqs


def mutated(dataset: list[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A real request with a few mutations (tool_choice, sampling fields, content shapes)."""

    @st.composite
    def one(draw: Any) -> dict[str, Any]:
        req = copy.deepcopy(draw(st.sampled_from(dataset)))
        for m in draw(st.lists(st.sampled_from(
                ["tool_choice", "sampling", "parts", "drop_tools", "kwargs", "no_system"]), max_size=3)):
            if m == "tool_choice" and req.get("tools"):
                req["tool_choice"] = draw(st.sampled_from(["none", "auto", "required"]))
            elif m == "sampling":
                req.update(draw(sampling()))
            elif m == "parts":
                for msg in req["messages"]:
                    if isinstance(msg.get("content"), str) and msg["role"] in ("user", "system"):
                        msg["content"] = [{"type": "text", "text": msg["content"]}]
            elif m == "drop_tools":
                req.pop("tools", None)
            elif m == "kwargs":
                req["chat_template_kwargs"] = draw(TEMPLATE_KWARGS)
            elif m == "no_system":
                req["messages"] = [x for x in req["messages"] if x["role"] != "system"] or req["messages"]
        return req

    return one()


completion_request = st.fixed_dictionaries(
    {"prompt": st.one_of(text, st.lists(text, min_size=1, max_size=2),
                         st.lists(st.integers(0, 1000), max_size=5))}).flatmap(
    lambda base: sampling().map(lambda s: {**base, **s}))


# --- model outputs -----------------------------------------------------------------------------

FILLER = ["Hello", " world", "!", " 😶‍🌫️", " 你好世界", " é", "\n", " 42", "Ünï", " ", "\n\n", "…",
          " {\"a\": 1}", "🎉🎉", " naïve", " ∑x²", "\t"]


def _hermes(name: str, args: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


def _coder(name: str, args: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in json.loads(args).items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def _llama(name: str, args: str) -> str:
    return f'{{"name": "{name}", "parameters": {args}}}'


def _mistral(name: str, args: str) -> str:
    return f'[TOOL_CALLS][{{"name": "{name}", "arguments": {args}}}]'


def _harmony(name: str, args: str) -> str:
    return (f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json"
            f"<|message|>{args}<|call|>")


# Per parser family: (markers that may appear anywhere, tool-call builder, end-of-turn tokens).
FAMILIES: dict[str, tuple[list[str], Any, list[str]]] = {
    "hermes": (["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_start|>"], _hermes,
               ["<|im_end|>", "<|endoftext|>"]),
    "qwen3_coder": (["<tool_call>", "</tool_call>", "<function=add>", "<parameter=a>"], _coder,
                    ["<|im_end|>", "<|endoftext|>"]),
    "deepseek_r1": (["<think>", "</think>"], None, ["<｜end▁of▁sentence｜>"]),
    "llama3_json": (["<|python_tag|>", "{\"name\": ", "<|eom_id|>"], _llama, ["<|eot_id|>",
                                                                             "<|end_of_text|>"]),
    "mistral": (["[TOOL_CALLS]", "[INST]", "</s>"], _mistral, ["</s>"]),
    "harmony": (["<|channel|>analysis<|message|>", "<|end|>", "<|start|>assistant",
                 "<|channel|>final<|message|>", "<|channel|>commentary<|message|>"], _harmony,
                ["<|return|>", "<|call|>"]),
}
ARGS = ['{"city": "Paris"}', '{"a": 1, "b": 2}', "{}", '{"query": "日本 😶‍🌫️", "limit": 3}']


@st.composite
def model_output(draw: Any, family: str) -> dict[str, Any]:
    """``{"text", "end", "truncate", "chunks_seed"}``: the text the model writes (markers,
    filler, tool calls), how it ends (``stop`` + an end token, ``length`` cut at a token
    fraction, ``stop`` with no end token) and a seed for the random chunking."""
    markers, build, ends = FAMILIES[family]
    pieces: list[str] = []
    if family == "harmony" and draw(st.booleans()):
        pieces.append("<|channel|>analysis<|message|>")
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["filler", "filler", "marker", "call"]))
        if kind == "filler":
            pieces.append(draw(st.sampled_from(FILLER)))
        elif kind == "marker":
            pieces.append(draw(st.sampled_from(markers)))
        elif build is not None:
            pieces.append(build(draw(st.sampled_from(["get_weather", "add", "search", "unknown_fn"])),
                                draw(st.sampled_from(ARGS))))
    end = draw(st.sampled_from(["eos", "eos", "length", "none"]))
    return {"text": "".join(pieces), "end": end, "end_token": draw(st.sampled_from(ends)),
            "cut": draw(st.floats(0.1, 0.95)), "chunks_seed": draw(st.integers(0, 2**16)),
            "logprobs": draw(st.sampled_from([False, False, True]))}
