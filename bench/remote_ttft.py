"""Time to first token of a remote turn: the app's path against a kept-alive raw httpx client.

A loopback server (a separate process, so it never shares the client's event loop) answers
every POST at once with one OpenAI-style token, then the end of the reply, keeping the
connection alive; it listens twice, plain http and TLS (a throwaway CA from
``tests/helpers/fault_server.make_tls_files``; the agent's ``ca_bundle`` points at it).

On the app's kind of loop (qasync on Qt, offscreen), for each listener:

- **app**: a turn as ``ChatService`` runs it: ``ProviderFactory.for_agent(agent)``, then
  ``stream(request)`` to the end, then ``aclose()`` (retry wrapper, pooled client and all);
  timed from ``for_agent`` to the first ``TextDelta``. The first turn opens the connection and
  is not counted: second and later turns are.
- **raw** (the reference): one ``httpx.AsyncClient`` made before timing starts and kept alive,
  the same request posted and its lines read, timed to the first content line.
- **new client per turn** (context, not a target): ``build_provider`` without a pooled client,
  what every turn paid before one client per endpoint was kept.

App and raw turns alternate, so drift on a shared machine hits both alike. The overhead is the
difference of the medians. Prints JSON only.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/remote_ttft.py [--turns 40]

Target: ``plain_overhead_ms`` and ``tls_overhead_ms`` <= 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["QT_API"] = "pyside6"

import httpx

from bench.remote_streams import percentile, read_request
from desktop.chat.providers import ProviderFactory, build_provider
from desktop.llm.events import TextDelta
from desktop.llm.provider import ChatMessage, ChatRequest, Provider, Sampling
from desktop.store.agents import Agent

TARGET_MS = 5.0
REQUEST = ChatRequest("bench", (ChatMessage("user", "go"),), Sampling(max_tokens=8))
TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
TAIL = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def serve(ports: Any, cert: str, key: str) -> None:
    """The fake endpoint: answers at once, one token, keep-alive (as llama.cpp's server)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    await read_request(reader)
                except asyncio.IncompleteReadError:
                    return  # the client closed its kept connection
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                    + f"{len(TOKEN):x}\r\n".encode()
                    + TOKEN
                    + b"\r\n"
                )
                await writer.drain()
                writer.write(f"{len(TAIL):x}\r\n".encode() + TAIL + b"\r\n0\r\n\r\n")
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        plain = await asyncio.start_server(handle, "127.0.0.1", 0)
        secure = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
        ports.put((plain.sockets[0].getsockname()[1], secure.sockets[0].getsockname()[1]))
        async with plain, secure:
            await asyncio.gather(plain.serve_forever(), secure.serve_forever())

    asyncio.run(main())


class NoKeys:
    """The agent service's one call a turn makes here: the endpoint's key (none)."""

    def api_key(self, agent: Agent) -> str | None:
        return None


async def app_turn(factory: ProviderFactory, agent: Agent) -> float:
    started = time.perf_counter()
    provider = factory.for_agent(agent)
    return await _first_token(provider, started)


async def fresh_turn(agent: Agent) -> float:
    started = time.perf_counter()
    provider = build_provider(agent, None)
    return await _first_token(provider, started)


async def _first_token(provider: Provider, started: float) -> float:
    first: float | None = None
    try:
        async with contextlib.aclosing(provider.stream(REQUEST)) as events:  # type: ignore[type-var]
            async for event in events:
                if first is None and isinstance(event, TextDelta):
                    first = time.perf_counter()
    finally:
        await provider.aclose()
    assert first is not None, "no token"
    return (first - started) * 1000


async def raw_turn(client: httpx.AsyncClient, url: str) -> float:
    body = {
        "model": REQUEST.model,
        "messages": [{"role": "user", "content": "go"}],
        "max_tokens": 8,
        "stream": True,
    }
    started = time.perf_counter()
    first: float | None = None
    async with client.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if first is None and line.startswith("data:") and '"content"' in line:
                first = time.perf_counter()
    assert first is not None, "no token"
    return (first - started) * 1000


async def measure(base_url: str, ca_bundle: str | None, turns: int) -> dict[str, Any]:
    agent = Agent(
        name="bench", kind="openai-compatible", base_url=base_url, model="bench", id=1
    ).with_changes(ca_bundle=ca_bundle)
    factory = ProviderFactory(NoKeys(), None, retry_attempts=3)  # type: ignore[arg-type]
    verify: ssl.SSLContext | bool = (
        ssl.create_default_context(cafile=ca_bundle) if ca_bundle else True
    )
    raw = httpx.AsyncClient(verify=verify, timeout=30)
    url = f"{base_url}/chat/completions"
    app_ms: list[float] = []
    raw_ms: list[float] = []
    fresh_ms: list[float] = []
    try:
        await app_turn(factory, agent)  # the first turn connects: not counted
        await raw_turn(raw, url)
        for i in range(turns):
            if i % 2:
                raw_ms.append(await raw_turn(raw, url))
                app_ms.append(await app_turn(factory, agent))
            else:
                app_ms.append(await app_turn(factory, agent))
                raw_ms.append(await raw_turn(raw, url))
            if i % 4 == 0:
                fresh_ms.append(await fresh_turn(agent))
        clients_made = factory.clients.created
    finally:
        await factory.aclose()
        await raw.aclose()
    app_med, raw_med = statistics.median(app_ms), statistics.median(raw_ms)
    return {
        "turns": turns,
        "app_ttft_ms_median": round(app_med, 3),
        "app_ttft_ms_p90": round(percentile(app_ms, 90), 3),
        "raw_ttft_ms_median": round(raw_med, 3),
        "raw_ttft_ms_p90": round(percentile(raw_ms, 90), 3),
        "new_client_per_turn_ttft_ms_median": round(statistics.median(fresh_ms), 3),
        "clients_made_by_the_app_path": clients_made,
        "overhead_ms": round(app_med - raw_med, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40, help="timed turns per listener")
    args = parser.parse_args()

    from tests.helpers.fault_server import make_tls_files

    with tempfile.TemporaryDirectory() as folder:
        tls = make_tls_files(Path(folder))
        ctx = multiprocessing.get_context("spawn")
        ports = ctx.Queue()
        server = ctx.Process(
            target=serve, args=(ports, str(tls.cert_pem), str(tls.key_pem)), daemon=True
        )
        server.start()
        try:
            plain_port, tls_port = ports.get(timeout=30)
            from PySide6.QtWidgets import QApplication

            from desktop.ui.kit.loop import drain, new_loop

            app = QApplication.instance() or QApplication([])
            loop = new_loop(app)  # qasync + the async-generator hooks, as in the app

            async def run_all() -> dict[str, Any]:
                plain = await measure(f"http://127.0.0.1:{plain_port}/v1", None, args.turns)
                secure = await measure(
                    f"https://127.0.0.1:{tls_port}/v1", str(tls.ca_pem), args.turns
                )
                return {"plain": plain, "tls": secure}

            try:
                runs = loop.run_until_complete(run_all())
            finally:
                drain(loop, app)
        finally:
            server.terminate()
            server.join(timeout=10)
    plain_ms, tls_ms = runs["plain"]["overhead_ms"], runs["tls"]["overhead_ms"]
    result = {
        "bench": "remote_ttft",
        "cpus": os.cpu_count(),
        "plain": runs["plain"],
        "tls": runs["tls"],
        "plain_overhead_ms": plain_ms,
        "tls_overhead_ms": tls_ms,
        "overhead_target_ms": TARGET_MS,
        "pass": plain_ms <= TARGET_MS and tls_ms <= TARGET_MS,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
