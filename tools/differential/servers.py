"""Start and stop the two servers for one model folder with the same flags."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

# The README's parser table (section "Parsers"); vision folders get their text model's flags.
MODEL_FLAGS: dict[str, list[str]] = {
    "Qwen--Qwen3-0.6B": ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes",
                         "--enable-auto-tool-choice"],
    "Qwen--Qwen2.5-7B-Instruct": ["--tool-call-parser", "hermes", "--enable-auto-tool-choice"],
    "Qwen--Qwen3-Coder-30B-A3B-Instruct": ["--tool-call-parser", "qwen3_coder",
                                           "--enable-auto-tool-choice"],
    "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B": ["--reasoning-parser", "deepseek_r1"],
    "meta-llama--Llama-3.1-8B-Instruct": ["--tool-call-parser", "llama3_json",
                                          "--enable-auto-tool-choice"],
    "mistralai--Mistral-Nemo-Instruct-2407": ["--tool-call-parser", "mistral",
                                              "--enable-auto-tool-choice"],
    "openai--gpt-oss-20b": ["--reasoning-parser", "openai_gptoss", "--tool-call-parser", "openai",
                            "--enable-auto-tool-choice"],
    "Qwen--Qwen2.5-VL-7B-Instruct": ["--tool-call-parser", "hermes", "--enable-auto-tool-choice"],
    "Qwen--Qwen3-VL-2B-Instruct": ["--tool-call-parser", "hermes", "--enable-auto-tool-choice"],
}


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Poll ``GET {url}/health`` each second until 200.

    Raises:
        RuntimeError: ``proc`` exited first, or ``timeout`` seconds passed.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server for {url} exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"server {url} not ready after {timeout} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def both_servers(folder: Path, vllm_bin: str, ports: tuple[int, int], log_dir: Path,
                 timeout: float = 300) -> Iterator[tuple[str, str]]:
    """Start ours (``python -m render_service serve``) and vLLM (``vllm launch render``) on
    ``ports`` for ``folder`` with the README's flags; yield their base URLs; stop both."""
    flags = MODEL_FLAGS.get(folder.name, [])
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               VLLM_TARGET_DEVICE="cpu")
    log_dir.mkdir(parents=True, exist_ok=True)
    ours_cmd = [sys.executable, "-m", "render_service", "serve", str(folder), "--port",
                str(ports[0]), *flags]
    vllm_cmd = [vllm_bin, "launch", "render", str(folder), "--port", str(ports[1]), *flags]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for cmd, name in ((ours_cmd, "ours"), (vllm_cmd, "vllm")):
            log = open(log_dir / f"{folder.name}.{name}.log", "wb")
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
        urls = (f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}")
        for url, proc in zip(urls, procs, strict=False):
            wait_ready(url, proc, timeout)
        yield urls
    finally:
        for proc in procs:
            _stop(proc)


@contextmanager
def vllm_server(folder: Path, vllm_bin: str, port: int, timeout: float = 300) -> Iterator[str]:
    """Start vLLM alone (``vllm launch render``, output discarded) on ``port`` for ``folder``
    with the README's flags; yield its base URL once ``/health`` answers; stop it."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_TARGET_DEVICE="cpu")
    proc = subprocess.Popen([vllm_bin, "launch", "render", str(folder), "--port", str(port),
                             *MODEL_FLAGS.get(folder.name, [])], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, timeout)
        yield url
    finally:
        _stop(proc)
