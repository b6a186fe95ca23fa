"""The window's start-up loads only what its first screen needs.

The heavy packages below load after the first paint, off the GUI thread (``desktop.preload``),
or at their first use. The test starts the real app (``simi`` with no arguments, offscreen, a
new SIMI_HOME) and reads ``sys.modules`` at the main window's first paint event, so it is
deterministic: no timing is involved. A failure names the chain of imports that pulled the
package in, which is the import to make lazy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# package -> why it must wait
HEAVY = {
    "httpx": "the remote providers' HTTP stack",
    "httpcore": "the remote providers' HTTP stack",
    "anyio": "the remote providers' HTTP stack and the API server",
    "numpy": "pulled in by sqlite-utils and llama-cpp-python, never needed by the window",
    "pygments": "code highlighting lexers (pulled in by httpx's command line)",
    "genai_prices": "the price list",
    "mcp": "the MCP SDK (tools)",
    "starlette": "the API server",
    "uvicorn": "the API server",
    "pypdf": "PDF attachments",
    "PIL": "image attachments",
    "keyring": "the keyring's backend (chosen on a worker thread after the first paint)",
    "llama_cpp": "llama.cpp runs in its worker process, never in the window's",
}


def test_the_first_paint_waits_for_no_heavy_package(tmp_path: Path) -> None:
    env = dict(os.environ, SIMI_HOME=str(tmp_path / "home"), QT_QPA_PLATFORM="offscreen")
    out = subprocess.run(
        [sys.executable, "-m", "tests.helpers.first_paint_modules", *HEAVY],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith('{"modules"')]
    assert lines, f"the window never painted (rc {out.returncode}):\n{out.stderr[-3000:]}"
    report = json.loads(lines[0])
    loaded = {name.partition(".")[0] for name in report["modules"]}
    assert "desktop" in loaded and "PySide6" in loaded  # it really was the window
    early = {
        name: f"{why}; first imported by {report['first_importers'].get(name, '?')}"
        for name, why in HEAVY.items()
        if name in loaded
    }
    assert early == {}
    assert out.returncode == 0, out.stderr[-3000:]


PRELOADED_FIRST_CALL = """
import asyncio, json, sys
from desktop import preload
from desktop.chat.providers import build_provider  # loaded with the window
from desktop.llm.provider import ChatMessage, ChatRequest
from desktop.store.agents import Agent
preload.warm_up(preload.steps(None))
before = set(sys.modules)
agent = Agent(name="Closed", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
async def call():
    provider = build_provider(agent, None)
    try:
        async for _event in provider.stream(ChatRequest("m", (ChatMessage("user", "Hi"),))):
            pass
    except Exception as exc:  # nothing listens there: the call fails, as intended
        print("failed as expected:", type(exc).__name__)
    finally:
        await provider.aclose()
asyncio.run(call())
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_after_the_warm_up_a_first_remote_call_loads_no_module(tmp_path: Path) -> None:
    """The first remote Send runs on the GUI thread: whatever it would import there (httpx
    loads httpcore, h11 and anyio's backend only at its first connection) the warm-up after
    the first paint has loaded already."""
    env = dict(os.environ, SIMI_HOME=str(tmp_path / "home"))
    out = subprocess.run(
        [sys.executable, "-c", PRELOADED_FIRST_CALL],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "failed as expected" in out.stdout
    assert json.loads(out.stdout.splitlines()[-1]) == []
