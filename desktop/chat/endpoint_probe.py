"""The agent editor's probes, Qt-free: "Fetch models" (the endpoint's model list) and "Test
connection" (one model-list call as a ``ConnectionReport`` a person can read).

Each builds a throwaway provider from the fields as typed (saved or not) with the same factory
a turn uses (``chat.providers.build_provider``), calls it once and closes it. The key is the
caller's: typed, or the saved one read through the async door (the keyring blocks). A
``UserError`` (settings that cannot be used, the server's refusal for the model list) is
raised to the caller; ``check_endpoint`` never raises one for the call itself.
"""

from __future__ import annotations

from desktop.chat.providers import build_provider
from desktop.llm.connection import ConnectionReport, test_connection
from desktop.store.agents import Agent


async def endpoint_models(agent: Agent, api_key: str | None, label: str) -> tuple[str, ...]:
    """The model ids the endpoint of ``agent`` lists."""
    provider = build_provider(agent, api_key, label=label)
    try:
        return tuple(await provider.list_models())
    finally:
        await provider.aclose()


async def check_endpoint(agent: Agent, api_key: str | None, label: str) -> ConnectionReport:
    """Whether the endpoint of ``agent`` answers and accepts the key, in words."""
    provider = build_provider(agent, api_key, label=label)
    try:
        return await test_connection(provider, label=label)
    finally:
        await provider.aclose()
