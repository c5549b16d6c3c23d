"""The served render path uses the prefix-cached encoder: same ids as transformers, and hits
counted in /metrics when the next turn of a conversation reuses the earlier turns."""

from conftest import hf_tokenizer

from render_service.settings import EMBEDDED_MODEL_DIR

CONVERSATION = [
    {"role": "system", "content": "You are a terse assistant. " * 40},
    {"role": "user", "content": "Name three rivers in Europe."},
    {"role": "assistant", "content": "Danube, Rhine, Loire."},
    {"role": "user", "content": "Which one is the longest? Answer in 日本語 too 😀."},
]


def _cache_total(metrics_text: str, result: str) -> float:
    total = 0.0
    for line in metrics_text.splitlines():
        if line.startswith("render_service_cache") and 'cache="prompt_prefix"' in line and f'result="{result}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_next_turn_hits_the_prefix_cache_and_ids_match_transformers(serve):
    """Turn 1 then turn 2 of one conversation: turn 2's token_ids equal transformers'
    apply_chat_template ids, and the prompt_prefix cache reports hits for the shared turns."""
    client = serve()
    reference = hf_tokenizer(str(EMBEDDED_MODEL_DIR))
    before = _cache_total(client.get("/metrics").text, "hit")
    for turn in (CONVERSATION[:2], CONVERSATION):
        body = {"model": "Qwen/Qwen3-0.6B", "messages": turn}
        ids = client.post("/v1/chat/completions/render", json=body).json()["token_ids"]
        text = reference.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)
        assert ids == reference.encode(text, add_special_tokens=False)
    assert _cache_total(client.get("/metrics").text, "hit") > before
