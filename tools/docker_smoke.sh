#!/usr/bin/env bash
# Build the image and smoke-test it where a Docker engine runs:
#   1. hadolint (when installed) finds nothing in the Dockerfile;
#   2. the image builds with BuildKit (optionally with the host's pip.conf and CA bundle as build
#      secrets: PIP_CONF=... CA_BUNDLE=...), and its size is printed;
#   3. a container on a non-default port given by the environment (-e RENDER_SERVICE_PORT) becomes
#      healthy; so does one whose port is given by a flag (serve --port), on a read-only root
#      filesystem with a tmpfs /tmp;
#   4. /v1/chat/completions/render and /v1/chat/completions/derender answer on the published port,
#      and the default command parses reasoning and tool calls (auto parsers for the embedded model);
#   5. read-only without a writable /tmp exits at once with the clear message;
#   6. SIGTERM (docker stop) drains and the container exits 0.
# Usage: tools/docker_smoke.sh [IMAGE_TAG]     (default render-service:smoke)
# Env:   PIP_CONF, CA_BUNDLE  files passed as build secrets pip_conf / ca_bundle
#        DOCKER                the docker client to use (default: docker on PATH)
#        PYTHON_IMAGE          base image (default python:3.11-slim)
set -euo pipefail
docker() { command "${DOCKER:-docker}" "$@"; }  # DOCKER=path picks another client (BuildKit needs buildx or a client <= 20.10)
cd "$(dirname "$0")/.."
tag=${1:-render-service:smoke}
port_env=18790
port_flag=18791
names=()
cleanup() { for n in "${names[@]}"; do docker rm -f "$n" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }
fail() { echo "FAIL: $*"; exit 1; }

if command -v hadolint >/dev/null; then
  say "hadolint"; hadolint Dockerfile && echo "hadolint: clean"
fi

say "build $tag"
build=(docker build -t "$tag" --build-arg "PYTHON_IMAGE=${PYTHON_IMAGE:-python:3.11-slim}")
[ -n "${PIP_CONF:-}" ] && build+=(--secret "id=pip_conf,src=$PIP_CONF")
[ -n "${CA_BUNDLE:-}" ] && build+=(--secret "id=ca_bundle,src=$CA_BUNDLE")
start=$(date +%s)
DOCKER_BUILDKIT=1 "${build[@]}" .
echo "build: $(( $(date +%s) - start )) s"
size=$(docker image inspect "$tag" --format '{{.Size}}')
echo "image size: $(( size / 1000000 )) MB"

wait_healthy() {  # name -> seconds until the health check says healthy
  local name=$1 t0 status
  t0=$(date +%s.%N)
  for _ in $(seq 1 240); do
    status=$(docker inspect -f '{{.State.Health.Status}}' "$name" 2>/dev/null || echo gone)
    [ "$status" = healthy ] && { echo "$name healthy after $(echo "$(date +%s.%N) - $t0" | bc) s"; return 0; }
    [ "$status" = unhealthy ] || [ "$status" = gone ] && { docker logs "$name" | tail -20; fail "$name is $status"; }
    sleep 0.5
  done
  fail "$name not healthy in 120 s"
}

wait_http() {  # url -> seconds until it answers (the health check runs every 15 s)
  local url=$1 t0
  t0=$(date +%s.%N)
  for _ in $(seq 1 600); do
    curl -sf "$url" >/dev/null 2>&1 && { echo "$url answered after $(echo "$(date +%s.%N) - $t0" | bc) s"; return 0; }
    sleep 0.1
  done
  fail "$url did not answer"
}

say "port from the environment: -e RENDER_SERVICE_PORT=$port_env"
names+=(rs-smoke-env)
docker run -d --name rs-smoke-env -e RENDER_SERVICE_PORT=$port_env -p $port_env:$port_env \
  --health-interval 1s "$tag" >/dev/null
wait_http "http://127.0.0.1:$port_env/health"
wait_healthy rs-smoke-env

say "port from a flag, read-only root with a tmpfs /tmp: serve --port $port_flag"
names+=(rs-smoke-flag)
docker run -d --name rs-smoke-flag --read-only --tmpfs /tmp -p $port_flag:$port_flag \
  --health-interval 1s "$tag" serve --port $port_flag --renderer-num-workers 2 >/dev/null
wait_healthy rs-smoke-flag
curl -sf "http://127.0.0.1:$port_flag/metrics" | grep -q render_service_requests_total \
  || fail "metrics not served with two workers on a read-only root"
echo "metrics with 2 workers on a read-only root: ok"

say "render and derender"
render=$(curl -sf "http://127.0.0.1:$port_env/v1/chat/completions/render" -H 'content-type: application/json' \
  -d '{"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "max_tokens": 64}')
echo "$render" | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["token_ids"] and r["sampling_params"]["max_tokens"] == 64; print("render:", len(r["token_ids"]), "token ids")'
derender=$(curl -sf "http://127.0.0.1:$port_env/v1/chat/completions/derender" -H 'content-type: application/json' \
  -d '{"chat_request": {"messages": [{"role": "user", "content": "Hi"}],
                        "chat_template_kwargs": {"enable_thinking": false}},
       "generate_response": {"request_id": "chatcmpl-smoke", "choices": [{"index": 0, "finish_reason": "stop",
         "token_ids": [9707, 0, 151645]}]}}')
echo "$derender" | python3 -c 'import json,sys; r=json.load(sys.stdin); m=r["choices"][0]["message"]; assert "Hello" in (m["content"] or ""), m; print("derender:", json.dumps(m["content"]))'

say "the default image parses reasoning and tool calls (the README's derender example)"
parsed=$(curl -sf "http://127.0.0.1:$port_env/v1/chat/completions/derender" -H 'content-type: application/json' -d '{
  "model": "Qwen/Qwen3-0.6B",
  "chat_request": {"messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]},
  "generate_response": {"request_id": "chatcmpl-demo", "choices": [{"index": 0, "finish_reason": "stop",
    "token_ids": [151667, 198, 59604, 9104, 4362, 624, 151668, 271, 10061, 752, 1779, 624, 151657, 198,
      4913, 606, 788, 330, 455, 69364, 497, 330, 16370, 788, 5212, 8926, 788, 330, 59604, 95642,
      151658, 151645]}]}}')
echo "$parsed" | python3 -c 'import json,sys; c=json.load(sys.stdin)["choices"][0]; m=c["message"]; assert m["reasoning"] and m["tool_calls"][0]["function"]["name"] == "get_weather" and c["finish_reason"] == "tool_calls", c; print("parsed: reasoning", json.dumps(m["reasoning"]), "+ tool call", m["tool_calls"][0]["function"])'

say "read-only root without a writable /tmp"
names+=(rs-smoke-notmp)
docker run --name rs-smoke-notmp --read-only "$tag" serve >/tmp/rs-smoke-notmp.log 2>&1 && fail "started without /tmp"
grep -q "needs a writable temporary directory" /tmp/rs-smoke-notmp.log || { cat /tmp/rs-smoke-notmp.log; fail "unclear message"; }
echo "exits with: $(grep -o 'render-service needs a writable temporary directory[^:]*' /tmp/rs-smoke-notmp.log)"

say "SIGTERM drains and exits 0"
docker stop -t 30 rs-smoke-env >/dev/null
code=$(docker inspect -f '{{.State.ExitCode}}' rs-smoke-env)
[ "$code" = 0 ] || { docker logs rs-smoke-env | tail -20; fail "exit code $code after SIGTERM"; }
echo "exit code after SIGTERM: $code"

say "smoke test passed"
