"""The driver: per model, render requests, then batch and streaming derender of generated outputs
on both servers, compared after normalisation; a table and the smallest input of each kind."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from . import generate as gen
from .compare import diff_paths, kind_of
from .normalise import normalise
from .servers import MODEL_FLAGS, both_servers

AREAS = ("render", "derender batch", "derender stream")


def family_of(flags: list[str]) -> str:
    tool = flags[flags.index("--tool-call-parser") + 1] if "--tool-call-parser" in flags else None
    reasoning = flags[flags.index("--reasoning-parser") + 1] if "--reasoning-parser" in flags else None
    if tool == "openai":
        return "harmony"
    if tool in ("qwen3_coder", "llama3_json", "mistral"):
        return tool
    if reasoning == "deepseek_r1":
        return "deepseek_r1"
    return "hermes"


@dataclass
class Kind:
    count: int = 0
    example: Any = None
    size: int = 1 << 60
    ours: Any = None
    theirs: Any = None


@dataclass
class Tally:
    total: int = 0
    identical: int = 0
    deliberate: int = 0
    ours_5xx: int = 0
    vllm_5xx: int = 0
    kinds: dict[str, Kind] = field(default_factory=dict)


class Run:
    def __init__(self, ours: str, theirs: str, model: str) -> None:
        self.c = httpx.Client(timeout=120)
        self.ours, self.theirs, self.model = ours, theirs, model
        self.tally: dict[str, Tally] = {a: Tally() for a in AREAS}

    def post(self, base: str, path: str, body: Any) -> tuple[int, Any]:
        try:
            r = self.c.post(base + path, json=body)
        except httpx.HTTPError as e:
            return 599, {"transport_error": str(e)}
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, {"raw": r.text[:500]}

    def record(self, area: str, example: Any, so: int, bo: Any, st: int, bt: Any,
               deliberate: bool = False, adjusted: str | None = None) -> bool:
        """``deliberate``: the whole case is a README difference; ``adjusted``: the name of a
        README difference already taken out of ``bt`` by the caller (counts as deliberate when
        nothing else differs)."""
        t = self.tally[area]
        t.total += 1
        t.ours_5xx += so >= 500
        t.vllm_5xx += st >= 500
        if deliberate:
            t.deliberate += 1
            return True
        if so != st:
            keys = {f"status ours {so} vs vLLM {st}": []}
        elif so >= 400:
            t.identical += 1  # both refuse: error messages are worded differently by design
            return True
        else:
            o, th, used = normalise(area, bo, bt, example)
            paths = diff_paths(o, th)
            if not paths:
                if used or adjusted:
                    t.deliberate += 1
                else:
                    t.identical += 1
                return True
            keys = {}
            for item in paths:
                keys.setdefault(kind_of([item]), []).append(item)
        size = len(json.dumps(example, ensure_ascii=False))
        for key, paths in keys.items():
            k = t.kinds.setdefault(key, Kind())
            k.count += 1
            if size < k.size:
                k.size, k.example = size, example
                if paths:
                    k.ours = {p: a for p, a, _ in paths[:3]}
                    k.theirs = {p: b for p, _, b in paths[:3]}
                else:
                    k.ours, k.theirs = _brief(bo), _brief(bt)
        return False


def _brief(body: Any) -> Any:
    if isinstance(body, dict) and "error" in body:
        return body["error"].get("message", body["error"]) if isinstance(body["error"], dict) else body
    text = json.dumps(body)
    return text[:300]


# --- streaming aggregation ---------------------------------------------------------------------


def aggregate(chunks: list[Any], chat: bool) -> dict[str, Any]:
    """Join the deltas of a stream into one whole answer: text per field, tool calls by index,
    the last finish/stop reason, logprobs and token ids concatenated."""
    out: dict[str, Any] = {"role": None, "content": "", "reasoning": "", "tool_calls": {},
                           "finish_reason": None, "stop_reason": None, "logprobs": [],
                           "token_ids": [], "usage": None}
    for ch in chunks:
        if ch.get("usage") is not None:
            out["usage"] = ch["usage"]
        for c in ch.get("choices", []):
            d = c.get("delta", {}) if chat else {"content": c.get("text")}
            if d.get("role"):
                out["role"] = d["role"]
            out["content"] += d.get("content") or ""
            out["reasoning"] += d.get("reasoning") or ""
            for tc in d.get("tool_calls") or []:
                cur = out["tool_calls"].setdefault(str(tc.get("index")), {"id": None, "name": None,
                                                                           "arguments": ""})
                cur["id"] = cur["id"] or tc.get("id")
                fn = tc.get("function") or {}
                cur["name"] = cur["name"] or fn.get("name")
                cur["arguments"] += fn.get("arguments") or ""
            if c.get("finish_reason") is not None:
                out["finish_reason"] = c["finish_reason"]
                out["stop_reason"] = c.get("stop_reason")
            lp = c.get("logprobs")
            if lp:
                out["logprobs"].append(lp.get("content") if chat else lp)
            out["token_ids"] += c.get("token_ids") or []
    out["tool_calls"] = [{"id": v["id"], "type": "function", "function": {
        "name": v["name"], "arguments": v["arguments"]}} for _, v in sorted(out["tool_calls"].items())]
    return out


# --- the model outputs -------------------------------------------------------------------------


def output_ids(tok: Any, out: dict[str, Any]) -> tuple[list[int], str]:
    ids = tok.encode(out["text"], add_special_tokens=False) if out["text"] else []
    end_id = tok.convert_tokens_to_ids(out["end_token"])
    if out["end"] == "length" and len(ids) > 1:
        return ids[: max(1, int(len(ids) * out["cut"]))], "length"
    if out["end"] == "eos" or not ids:
        return [*ids, end_id] if isinstance(end_id, int) else ids or [0], "stop"
    return ids, "stop"


def chunks_of(ids: list[int], size: int | None, seed: int) -> list[list[int]]:
    if size == 1:
        return [[i] for i in ids]
    rnd = random.Random(seed)
    out, i = [], 0
    while i < len(ids):
        n = rnd.randint(1, 8)
        out.append(ids[i:i + n])
        i += n
    return out


def stream(run: Run, path: str, base_body: dict[str, Any], request_key: str,
           rid: str, ids: list[int], finish: str, lps: list[Any] | None,
           sizes: int | None, seed: int, ours: bool) -> tuple[int, Any]:
    state = None
    chunks: list[Any] = []
    pieces = chunks_of(ids, sizes, seed)
    pos = 0
    for n, piece in enumerate(pieces):
        last = n == len(pieces) - 1
        choice: dict[str, Any] = {"index": 0, "token_ids": piece,
                                  "finish_reason": finish if last else None}
        if lps is not None:
            choice["logprobs"] = {"content": lps[pos:pos + len(piece)]}
        pos += len(piece)
        body: dict[str, Any] = {"stream": True, "generate_chunk": {"request_id": rid,
                                                                   "choices": [choice]}}
        if state is None or not ours:
            body.update(base_body)
        if state is not None:
            body["stream_state"] = state
        status, resp = run.post(run.ours if ours else run.theirs, path, body)
        if status != 200:
            return status, resp
        chunks.append(resp["chunk"])
        state = resp["stream_state"]
    return 200, aggregate(chunks, chat=request_key == "chat_request")


def without_strict(req: dict[str, Any]) -> dict[str, Any] | None:
    """``req`` with ``strict`` taken out of its tools, or ``None`` when no tool has it."""
    tools = req.get("tools")
    if not isinstance(tools, list) or not any(
            isinstance(t, dict) and "strict" in (t.get("function") or {}) for t in tools):
        return None
    return {**req, "tools": [{**t, "function": {k: v for k, v in t["function"].items()
                                                if k != "strict"}} for t in tools]}


def run_model(folder: Path, args: argparse.Namespace, ours_url: str, vllm_url: str) -> Run:
    from transformers import AutoTokenizer

    run = Run(ours_url, vllm_url, folder.name)
    seed = args.seed
    family = family_of(MODEL_FLAGS.get(folder.name, []))
    dataset = gen.load_dataset(args.data / "chat_requests.jsonl")
    n_gen = args.requests * 2 // 5
    n_mut = args.requests * 2 // 5
    n_cmp = args.requests - n_gen - n_mut
    requests = ([("chat", r) for r in gen.draw(gen.chat_request(), n_gen, seed)]
                + [("chat", r) for r in gen.draw(gen.mutated(dataset), n_mut, seed + 1)]
                + [("completion", r) for r in gen.draw(gen.completion_request, n_cmp, seed + 2)])
    jobs = ThreadPoolExecutor(max_workers=args.jobs)

    def render_one(item: tuple[str, dict[str, Any]]) -> tuple[Any, ...]:
        kind, req = item
        path = "/v1/chat/completions/render" if kind == "chat" else "/v1/completions/render"
        so, bo = run.post(ours_url, path, req)
        st, bt = run.post(vllm_url, path, req)
        adjusted = None
        if so == st == 200 and without_strict(req) is not None \
                and bo.get("token_ids") != bt.get("token_ids"):
            # README: a tool's ``strict`` is not handed to the template; vLLM's prompt for the
            # same request without it is the prompt we must render
            s2, b2 = run.post(vllm_url, path, without_strict(req))
            if s2 == 200:
                bt = dict(bt, token_ids=b2["token_ids"], sampling_params={
                    **bt["sampling_params"], "max_tokens": b2["sampling_params"].get("max_tokens")})
                adjusted = "strict_not_in_template"
        return kind, req, path, so, bo, st, bt, adjusted

    pool: list[tuple[dict[str, Any], list[int]]] = []
    for kind, req, path, so, bo, st, bt, adjusted in jobs.map(render_one, requests):
        run.record("render", {"path": path, "body": req}, so, bo, st, bt, adjusted=adjusted)
        if kind == "chat" and so == st == 200 and not req.get("stop") and len(pool) < 400:
            pool.append((req, bt["token_ids"]))
    if not pool:
        pool.append(({"messages": [{"role": "user", "content": "hi"}]}, [1]))
    tok = AutoTokenizer.from_pretrained(str(folder))
    outputs = gen.draw(gen.model_output(family), args.outputs, seed + 3)
    rnd = random.Random(seed)
    picks = [pool[rnd.randrange(len(pool))] for _ in outputs]
    prepared = [(i, out, picks[i], *output_ids(tok, out)) for i, out in enumerate(outputs)]
    for records in jobs.map(lambda item: derender_one(run, *item), prepared):
        for rec in records:
            run.record(*rec)
    jobs.shutdown()
    return run


def derender_one(run: Run, i: int, out: dict[str, Any], pick: tuple[dict[str, Any], list[int]],
                 ids: list[int], finish: str) -> list[tuple[Any, ...]]:
    """Batch and streaming (one token, random chunks) derender of one output on both servers;
    the ``Run.record`` arguments, in order."""
    ours_url, vllm_url = run.ours, run.theirs
    chat_req, prompt_ids = dict(pick[0]), pick[1]
    records: list[tuple[Any, ...]] = []
    lps = None
    if out["logprobs"]:
        chat_req.update(logprobs=True, top_logprobs=2)
        lps = [{"token_id": t, "logprob": -0.25, "rank": 1,
                "top_logprobs": [{"token_id": t, "logprob": -0.25, "rank": 1},
                                 {"token_id": (t + 1) % 1000, "logprob": -2.0, "rank": 2}]}
               for t in ids]
    rid = f"chatcmpl-diff-{i}"
    completion = i % 5 == 4
    if completion:
        path, key = "/v1/completions/derender", "completion_request"
        creq: dict[str, Any] = {k: v for k, v in chat_req.items() if k in (
            "skip_special_tokens", "spaces_between_special_tokens", "min_tokens",
            "stop_token_ids", "ignore_eos", "return_token_ids", "include_stop_str_in_output")}
        creq["prompt"] = "x"
        if lps is not None:
            creq["logprobs"] = 2
        choice = {"index": 0, "token_ids": ids, "finish_reason": finish}
        if lps is not None:
            choice["logprobs"] = {"content": lps}
        body = {"generate_responses": [{"request_id": rid, "choices": [choice],
                                        "metrics": {"arrival_time": 1.5, "num_cached": 3}}],
                "completion_request": creq}
        base = {"completion_request": creq, "prompt_token_ids": prompt_ids}
    else:
        path, key = "/v1/chat/completions/derender", "chat_request"
        choice = {"index": 0, "token_ids": ids, "finish_reason": finish}
        if lps is not None:
            choice["logprobs"] = {"content": lps}
        body = {"generate_response": {"request_id": rid, "choices": [choice],
                                      "metrics": {"arrival_time": 1.5}},
                "chat_request": chat_req, "prompt_token_ids": prompt_ids, "prompt_tokens":
                len(prompt_ids)}
        base = {"chat_request": chat_req, "prompt_token_ids": prompt_ids}
    so, bo = run.post(ours_url, path, body)
    st, bt = run.post(vllm_url, path, body)
    example = {"path": path, "model": run.model, "output_text": out["text"], "token_ids": ids,
               "finish": finish, key: chat_req if not completion else creq}
    batch = (so, bo, st, bt)
    streams = []
    for size in (1, None):
        streams.append((size, stream(run, path, base, key, rid, ids, finish, lps, size,
                                     out["chunks_seed"], True),
                        stream(run, path, base, key, rid, ids, finish, lps, size,
                               out["chunks_seed"], False)))
    vllm_stream = streams[0][2][1] if streams[0][2][0] == 200 else None
    records.append(("derender batch", example, *batch, so == st == 200 and (
        calls_kept(bo, bt, finish) or vllm_stream_disagrees(bo, bt, vllm_stream, example,
                                                            "derender batch"))))
    vllm_batch = bt if st == 200 else None
    for size, (so, bo), (st, bt) in streams:
        ex = dict(example, chunking="one token" if size == 1 else f"random seed {out['chunks_seed']}")
        # vLLM's other answers to the same output: its batch, and for random chunks its
        # one-token stream (its streaming parsers can depend on the chunking)
        others = [vllm_batch] + ([vllm_stream] if size != 1 else [])
        deliberate = (bool(chat_req.get("stop")) and st == 400 and so == 200) or (
            so == st == 200 and (calls_kept(bo, bt, finish) or any(
                vllm_stream_disagrees(bo, bt, other, ex) for other in others)
                or batch_calls_kept(bo, bt, vllm_batch, finish)))
        records.append(("derender stream", ex, so, bo, st, bt, deliberate))
    return records


def _message_of(body: Any) -> dict[str, Any]:
    if isinstance(body, dict) and isinstance(body.get("choices"), list) and body["choices"]:
        return body["choices"][0].get("message") or {}
    return body if isinstance(body, dict) else {}


def calls_kept(ours: Any, theirs: Any, finish: str = "stop") -> bool:
    """README "Deliberate differences": a call already parsed stays a call when later text of the
    output is not a valid call (vLLM's batch then gives the whole output back as content: ours
    has calls, vLLM none, and vLLM's content holds every one of our calls' names), and a call cut
    off by ``finish_reason: "length"`` keeps its partial arguments (vLLM drops it)."""
    o, t = _message_of(ours), _message_of(theirs)
    names = [(c.get("function") or {}).get("name") for c in o.get("tool_calls") or []]
    if names and not t.get("tool_calls") and finish == "length":
        return True
    content = t.get("content")
    return bool(names) and not t.get("tool_calls") and isinstance(content, str) \
        and all(isinstance(n, str) and n in content for n in names)


def batch_calls_kept(ours: Any, theirs: Any, vllm_batch: Any, finish: str = "stop") -> bool:
    """README "Deliberate differences" (llama3_json, a later ``{`` that is not a call): vLLM's
    stream (``theirs``) says something else than vLLM's batch (``vllm_batch``), and ours relates
    to vLLM's batch by the ``calls_kept`` rule (vLLM's batch gives the whole output back as
    content holding our calls' names; its stream keeps the first call but sends no ``{}``
    arguments and loses a call written right after another without ``; ``)."""
    if vllm_batch is None or _core(theirs) == _core(vllm_batch):
        return False
    return calls_kept(ours, vllm_batch, finish)


CORE = ("content", "reasoning", "tool_calls", "finish_reason")


def _json_value(arguments: Any) -> Any:
    """Arguments as the JSON value they spell, so that spacing does not count (README: ours are
    re-spaced as vLLM's batch writes them, vLLM streams them raw); raw when not JSON."""
    if isinstance(arguments, str):
        try:
            return {"json": json.loads(arguments)}
        except ValueError:
            pass
    return arguments


def _core(answer: Any, raw_args: bool = False) -> dict[str, Any]:
    """What a client reads of one answer, batch or aggregated stream, in the aggregated stream's
    shape: text, reasoning (``None`` and ``""`` alike), calls (name, arguments as the JSON value
    they spell, or as written with ``raw_args``), finish reason."""
    value = (lambda a: a) if raw_args else _json_value
    if isinstance(answer, dict) and isinstance(answer.get("choices"), list) and answer["choices"]:
        choice = answer["choices"][0]
        m = choice.get("message") or {"content": choice.get("text")}
        answer = {**m, "finish_reason": choice.get("finish_reason")}
    if not isinstance(answer, dict):
        return {}
    calls = [{"function": {"name": (c.get("function") or {}).get("name"),
                           "arguments": value((c.get("function") or {}).get("arguments"))}}
             for c in answer.get("tool_calls") or []]
    return {"content": answer.get("content") or "", "reasoning": answer.get("reasoning") or "",
            "tool_calls": calls, "finish_reason": answer.get("finish_reason")}


def vllm_stream_disagrees(ours: Any, theirs: Any, vllm_other: Any, example: Any,
                          area: str = "derender stream") -> bool:
    """README "Deliberate differences" (streaming equals batch by construction): vLLM's answer
    in this mode (``theirs``) says something else (text, reasoning, calls or finish reason) than
    vLLM's answer in another mode (``vllm_other``: its batch or its one-token stream for a
    stream, its one-token stream for a batch); ours says what vLLM's other mode says, apart
    from the README's other differences (the normalisers); nothing else differs from ``theirs``."""
    if vllm_other is None:
        return False
    truth = _core(vllm_other)
    # vLLM disagrees with itself also where only the arguments' serialisation differs (gpt-oss:
    # its batch re-writes JSON arguments with ``json.dumps``, escaping non-ASCII; its stream
    # sends them raw); ours must still say the same value as the other mode
    if _core(theirs) == truth and _core(theirs, True) == _core(vllm_other, True):
        return False
    o, t, _ = normalise("derender stream", _core(ours), truth, example)
    if diff_paths(o, t):
        return False
    if area == "derender batch":
        o = json.loads(json.dumps(ours))
        for c_o, c_t in zip(o.get("choices") or [], theirs.get("choices") or [], strict=False):
            c_o["message"], c_o["finish_reason"] = c_t.get("message"), c_t.get("finish_reason")
    else:
        o = dict(ours)
        for k in CORE:
            o[k] = theirs.get(k)
    o, t, _ = normalise(area, o, theirs, example)
    return not diff_paths(o, t)


def report(runs: list[Run], out: Path | None) -> str:
    lines = ["| model | area | cases | identical | deliberate | different | kinds | 5xx ours | 5xx vLLM |",
             "|---|---|---|---|---|---|---|---|---|"]
    details: list[str] = []
    dump: dict[str, Any] = {}
    for r in runs:
        for area, t in r.tally.items():
            def pct(n: int, t: Tally = t) -> str:
                return f"{100.0 * n / t.total:.1f}%" if t.total else "-"
            different = t.total - t.identical - t.deliberate
            lines.append(f"| {r.model} | {area} | {t.total} | {pct(t.identical)} | "
                         f"{pct(t.deliberate)} | {pct(different)} | {len(t.kinds)} | "
                         f"{t.ours_5xx} | {t.vllm_5xx} |")
            for key, k in sorted(t.kinds.items(), key=lambda kv: -kv[1].count):
                details.append(f"\n[{r.model} / {area}] x{k.count}: {key}\n  input: "
                               f"{json.dumps(k.example, ensure_ascii=False)[:1500]}\n  ours:  "
                               f"{json.dumps(k.ours, ensure_ascii=False)[:600]}\n  vLLM:  "
                               f"{json.dumps(k.theirs, ensure_ascii=False)[:600]}")
                dump.setdefault(r.model, {}).setdefault(area, []).append(
                    {"kind": key, "count": k.count, "input": k.example, "ours": k.ours,
                     "vllm": k.theirs})
    if out is not None:
        out.write_text(json.dumps(dump, indent=1, ensure_ascii=False))
    return "\n".join(lines) + "\n\nKinds of difference (smallest input of each):" + "".join(details)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.differential", description=__doc__)
    p.add_argument("--models", default="all", help="'all' or comma-separated folder names")
    p.add_argument("--requests", type=int, default=300, help="generated render requests per model")
    p.add_argument("--outputs", type=int, default=200, help="generated model outputs per model")
    p.add_argument("--quick", action="store_true", help="30 requests and 20 outputs per model")
    p.add_argument("--seed", type=int, default=20261201)
    p.add_argument("--vllm", default=os.environ.get("VLLM_BIN", os.path.expanduser("~/vllm/bin/vllm")),
                   help="the vllm executable of a separate venv (env VLLM_BIN)")
    p.add_argument("--models-dir", type=Path, default=Path("../shared/models"))
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--port", type=int, default=8140, help="ours on PORT, vLLM on PORT+1")
    p.add_argument("--jobs", type=int, default=4, help="cases in flight at once (results are "
                   "recorded in input order, so the report does not depend on it)")
    p.add_argument("--json", type=Path, default=None, help="write every kind with its input here")
    p.add_argument("--logs", type=Path, default=Path("/tmp/differential-logs"))
    args = p.parse_args(argv)
    if args.quick:
        args.requests, args.outputs = 30, 20
    folders = sorted(d for d in args.models_dir.iterdir() if d.is_dir() and "--" in d.name)
    if args.models != "all":
        wanted = set(args.models.split(","))
        folders = [f for f in folders if f.name in wanted]
    runs = []
    for folder in folders:
        print(f"== {folder.name}", file=sys.stderr, flush=True)
        try:
            with both_servers(folder, args.vllm, (args.port, args.port + 1), args.logs) as (o, v):
                runs.append(run_model(folder, args, o, v))
        except RuntimeError as e:
            print(f"   skipped: {e}", file=sys.stderr)
        print(report(runs[-1:], None).split("\n\n")[0], file=sys.stderr, flush=True)
        if args.json is not None:  # so far, so a long run can be read while it goes on
            report(runs, args.json)
    print(f"$ python -m tools.differential --models {args.models} --requests {args.requests} "
          f"--outputs {args.outputs} --seed {args.seed}")
    print(report(runs, args.json))
    return 0
