"""Presets, "Test connection", and the Qt-free rule (kinds and their factories:
tests/chat/test_kinds.py)."""

from __future__ import annotations

import asyncio

import pytest

from desktop.llm.connection import ConnectionReport
from desktop.llm.connection import test_connection as check_connection
from desktop.llm.presets import PRESETS, preset
from desktop.llm.provider import Provider
from tests.helpers.cli import packages_loaded
from tests.helpers.fault_server import FaultServer, error_reply, replay
from tests.helpers.servers import closed_port
from tests.llm.streams import make

KEY = "sk-connection-test-key-999"


def test_presets_named_in_the_issue_have_their_usual_addresses() -> None:
    expected = {
        "OpenAI": "https://api.openai.com/v1",
        "Groq": "https://api.groq.com/openai/v1",
        "OpenRouter": "https://openrouter.ai/api/v1",
        "Mistral": "https://api.mistral.ai/v1",
        "DeepSeek": "https://api.deepseek.com/v1",
        "Together": "https://api.together.xyz/v1",
        "xAI": "https://api.x.ai/v1",
        "Ollama": "http://localhost:11434/v1",
        "LM Studio": "http://localhost:1234/v1",
        "llama.cpp server": "http://localhost:8080/v1",
        "vLLM": "http://localhost:8000/v1",
        "Custom URL": "",
    }
    by_name = {p.name: p for p in PRESETS}
    for name, url in expected.items():
        assert by_name[name].base_url == url
    for p in PRESETS:
        assert p.local == p.base_url.startswith("http://localhost")
        assert p.needs_key == p.base_url.startswith("https://")
    assert preset("groq").kind == "openai-compatible"
    with pytest.raises(KeyError):
        preset("no-such-preset")


def report_for(provider: Provider, label: str = "Endpoint") -> ConnectionReport:
    async def go() -> ConnectionReport:
        try:
            return await check_connection(provider, label=label)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_connection_report_counts_models() -> None:
    with FaultServer(replay("gemini_models_page2.json")) as server:
        report = report_for(make("gemini", server.url), "Gemini")
    assert report.reachable and report.auth_ok and report.ok
    assert report.model_count == 1 and report.models == ("gemini-2.5-pro",)
    assert report.latency_ms is not None
    assert "Gemini" in report.message and "1 model" in report.message


def test_connection_report_for_a_bad_key_says_reachable_but_rejected() -> None:
    with FaultServer(error_reply(401, {"error": {"message": f"bad key {KEY}"}})) as server:
        report = report_for(make("anthropic", server.url, key=KEY, label="Claude"), "Claude")
    assert report.reachable and report.auth_ok is False and not report.ok
    assert "Claude" in report.message and "key" in report.message
    assert KEY not in report.message and report.error_kind == "auth"


def test_connection_report_for_nothing_listening_says_unreachable() -> None:
    provider = make("openai", f"http://127.0.0.1:{closed_port()}", label="LM Studio")
    report = report_for(provider, "LM Studio")
    assert not report.reachable and report.auth_ok is None and report.model_count is None
    assert "LM Studio" in report.message and "refused" in report.message


def test_connection_report_for_a_server_error_says_reachable() -> None:
    with FaultServer(error_reply(503, {"error": {"message": "warming up"}})) as server:
        report = report_for(make("openai", server.url), "vLLM")
    assert report.reachable and not report.ok and "warming up" in report.message


def test_connection_report_for_an_empty_model_list_says_what_to_do() -> None:
    with FaultServer(error_reply(200, {"object": "list", "data": []})) as server:
        report = report_for(make("openai", server.url), "Ollama")
    assert report.ok and report.model_count == 0 and "pull" in report.message


def test_provider_layer_imports_no_qt() -> None:
    code = (
        "import desktop.llm.anthropic, desktop.llm.gemini, desktop.llm.openai_compat\n"
        "import desktop.llm.presets, desktop.llm.retry, desktop.llm.connection\n"
        "import desktop.llm.transport"
    )
    assert packages_loaded(code, ("PySide6",)) == []
