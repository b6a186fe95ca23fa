"""What the API server's tests share: a server on a free loopback port over a test's
``Services`` (``serving``), agents to serve, and reads of what it stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx

from desktop.local.starter import STARTER_AGENT_NAME
from desktop.serve.config import ServeConfig
from desktop.serve.server import ApiServer
from desktop.store.agents import Agent
from tests.helpers.fault_server import FaultServer, Handler

STARTER_ID = "smollm2-local"  # the starter agent's model id on the server


@asynccontextmanager
async def serving(services: Any, config: ServeConfig | None = None) -> AsyncIterator[ApiServer]:
    """An ``ApiServer`` listening on a port the system picks; stopped (and the services'
    HTTP clients closed) on the way out."""
    server = ApiServer(services, config or ServeConfig(port=0))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
        await services.aclose()


def root(server: ApiServer) -> str:
    """``http://127.0.0.1:PORT`` (the address without ``/v1``)."""
    return server.address.removesuffix("/v1")


def client(server: ApiServer, **kw: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=root(server), timeout=60, **kw)


def remote(services: Any, base_url: str, name: str = "Remote", **fields: Any) -> Agent:
    """An agent on a generic OpenAI-compatible server that takes no key."""
    fields.setdefault("model", "m")
    return services.agents.create(
        Agent(name=name, kind="openai-compatible", base_url=base_url, **fields)
    )


@contextmanager
def remote_upstream(services: Any, handler: Handler, **fields: Any) -> Iterator[FaultServer]:
    """A ``FaultServer`` answering with ``handler`` (stopped on the way out) and the agent
    ``Remote`` (model id ``remote``) on it, saved with ``fields``."""
    with FaultServer(handler) as upstream:
        remote(services, upstream.url + "/v1", **fields)
        yield upstream


def post_chat(services: Any, body: dict[str, Any]) -> httpx.Response:
    """The answer to ``body`` posted to ``/v1/chat/completions`` of a server started for it."""

    async def main() -> httpx.Response:
        async with serving(services) as server, client(server) as http:
            return await http.post("/v1/chat/completions", json=body)

    return asyncio.run(main())


def starter(services: Any, **changes: Any) -> Agent:
    """The starter agent, saved with ``changes`` (short replies: ``max_tokens``)."""
    agent = services.agents.by_name(STARTER_AGENT_NAME)
    return services.agents.update(agent.with_changes(**changes))


def stats_rows(services: Any) -> list[dict[str, Any]]:
    cur = services.db.execute("SELECT * FROM inference_stats ORDER BY id")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def chat_body(model: str, text: str = "Say hello.", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def assert_openai_error(response: httpx.Response, status: int, code: str | None = None) -> dict:
    """``response`` is OpenAI's error shape with ``status`` (and ``code``), and no traceback."""
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text and 'File "' not in response.text
    error = response.json()["error"]
    assert {"message", "type", "code"} <= set(error)
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code, error
    return error


def make_key(services: Any, name: str, agent_ids: tuple[int, ...] | None = None) -> str:
    """A new API key (as the Server page makes one), before or while a server runs."""
    from desktop.serve.keys import ApiKeys
    from desktop.store.serving import ApiKeyStore

    _record, key = ApiKeys(ApiKeyStore(services.db), services.secrets).create(name, agent_ids)
    return key


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
