"""The provider-kind registry: one declaration per kind, read by validation, the factory and
the CLI (the editor's kind list and badge colours: tests/ui/test_agent_editor.py)."""

from __future__ import annotations

import asyncio

import pytest

from desktop.chat.kinds import (
    NEUTRAL_BADGE_COLOR,
    ProviderKind,
    ProviderSpec,
    all_kinds,
    badge_color,
    find_kind,
    get_kind,
    kind_label,
    kind_names,
    register,
    unregister,
)
from desktop.chat.providers import ProviderFactory, build_provider, endpoint_label
from desktop.cli import build_parser
from desktop.cli import main as simi
from desktop.errors import ValidationError
from desktop.llm.anthropic import AnthropicProvider
from desktop.llm.gemini import GeminiProvider
from desktop.llm.openai_compat import OpenAICompatProvider
from desktop.llm.presets import PRESETS, preset
from desktop.llm.provider import Provider
from desktop.llm.retry import RetryingProvider
from desktop.store.agents import Agent
from tests.conftest import THROWAWAY_KIND

BUILT_IN = ("local", "openai", "openai-compatible", "anthropic", "gemini")


def test_the_built_in_kinds_in_the_order_lists_show_them() -> None:
    assert kind_names() == BUILT_IN
    assert [k.label for k in all_kinds()] == [
        "Local (llama.cpp)",
        "OpenAI",
        "OpenAI-compatible server",
        "Anthropic",
        "Google Gemini",
    ]
    assert [k.name for k in all_kinds() if not k.remote] == ["local"]
    assert {k.name for k in all_kinds() if k.needs_key} == {"openai", "anthropic", "gemini"}
    assert not any(k.capabilities.tools for k in all_kinds())
    assert not get_kind("local").capabilities.model_listing
    assert get_kind("openai-compatible").capabilities.server_timings


def test_each_kinds_default_preset_is_offered_and_matches_its_default_address() -> None:
    for kind in all_kinds():
        offered = kind.presets()
        assert all(p.kind in (kind.preset_kinds or (kind.name,)) for p in offered)
        if not kind.remote:
            assert offered == () and kind.default_preset is None
            continue
        assert kind.default_preset in {p.id for p in offered}, kind.name
        chosen = preset(kind.default_preset or "")
        assert chosen.base_url == (kind.default_base_url or ""), kind.name
    names = {p.name for p in get_kind("openai-compatible").presets()}
    assert names == {p.name for p in PRESETS if p.kind in ("openai", "openai-compatible")}
    assert [p.id for p in get_kind("anthropic").presets()] == ["anthropic"]


def test_placeholders_name_the_default_address_or_an_example() -> None:
    assert get_kind("openai").url_placeholder == "https://api.openai.com/v1  (default)"
    assert get_kind("openai-compatible").url_placeholder == "http://localhost:8080/v1"
    assert get_kind("gemini").model_hint == "e.g. gemini-1.5-flash"


@pytest.mark.parametrize(
    ("kind", "cls", "url"),
    [
        ("openai", OpenAICompatProvider, None),
        ("openai-compatible", OpenAICompatProvider, preset("ollama").base_url),
        ("anthropic", AnthropicProvider, None),
        ("gemini", GeminiProvider, None),
    ],
)
def test_each_kind_makes_its_provider(kind: str, cls: type, url: str | None) -> None:
    provider = build_provider(Agent(name="x", kind=kind, base_url=url, model="m"), "k")
    assert isinstance(provider, cls)
    asyncio.run(provider.aclose())


def test_unusable_settings_are_validation_errors_naming_the_field() -> None:
    def build(**changes: object) -> None:
        build_provider(
            Agent(name="x", kind="openai-compatible", model="m").with_changes(**changes), None
        )

    with pytest.raises(ValidationError) as info:
        build(base_url="")
    assert "base_url" in info.value.fields
    with pytest.raises(ValidationError) as info:
        build(base_url="localhost:1234")
    assert "base_url" in info.value.fields
    with pytest.raises(ValidationError) as info:
        build(kind="gemini", ca_bundle="/no/ca.pem")
    assert "ca_bundle" in info.value.fields
    with pytest.raises(ValidationError) as info:
        build(kind="no-such-kind")
    assert "no-such-kind" in info.value.fields["kind"]
    assert "openai-compatible" in info.value.fields["kind"]  # the message names the kinds


def test_errors_name_a_known_service_by_kind_and_a_server_by_the_agent() -> None:
    assert endpoint_label(Agent(name="Mine", kind="anthropic")) == "Anthropic"
    assert endpoint_label(Agent(name="GPU box", kind="openai-compatible")) == "GPU box"


def test_a_registered_kind_reaches_validation_the_factory_and_the_cli(
    throwaway_kind, services, capsys
) -> None:
    kind, built = throwaway_kind
    assert kind_names()[-1] == THROWAWAY_KIND and find_kind(THROWAWAY_KIND) is kind
    assert kind_label(THROWAWAY_KIND) == "Throwaway service"
    assert badge_color(THROWAWAY_KIND) == "#123456"
    with pytest.raises(ValueError, match="already registered"):
        register(kind)

    # The CLI's --kind choices come from the registry when the parser is built.
    add = ["agents", "add", "--name", "Throwaway", "--kind", THROWAWAY_KIND, "--model", "t-1"]
    assert build_parser().parse_args(add).kind == THROWAWAY_KIND
    assert simi([*add, "--temperature", "0.5"]) == 0
    assert "Added agent “Throwaway”" in capsys.readouterr().out

    stored = services.agents.by_name("Throwaway")
    assert stored is not None and stored.kind == THROWAWAY_KIND
    assert stored.base_url == "https://throwaway.example/v1"  # the kind's default address
    assert services.agents.validate(stored.with_changes(base_url=None)) == {}

    provider = ProviderFactory(services.agents, services.local).for_agent(stored)
    assert isinstance(provider, RetryingProvider)  # a remote kind's turns retry
    (spec,) = built
    assert spec.agent == stored and spec.base_url == "https://throwaway.example/v1"
    assert spec.label == "Throwaway service"  # a known address: errors name the kind
    asyncio.run(provider.aclose())


def test_an_unregistered_kind_is_gone_from_every_list() -> None:
    def factory(spec: ProviderSpec) -> Provider:
        raise AssertionError("never built")

    register(ProviderKind("gone-kind", "Gone", factory, badge_color="#abcdef"))
    assert "gone-kind" in kind_names()
    unregister("gone-kind")
    assert kind_names() == BUILT_IN and find_kind("gone-kind") is None
    assert badge_color("gone-kind") == NEUTRAL_BADGE_COLOR
    assert kind_label("gone-kind") == "gone-kind"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["agents", "add", "--name", "T", "--kind", "gone-kind"])
    with pytest.raises(ValidationError) as info:
        get_kind("gone-kind")
    assert "Unknown provider kind" in info.value.fields["kind"]
