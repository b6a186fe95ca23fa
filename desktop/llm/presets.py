"""Endpoint presets the user picks from, and the one place that turns a kind into a Provider.

A *provider kind* is code (``openai``, ``openai-compatible``, ``anthropic``, ``gemini``); a
*preset* is data: a name and base URL for an endpoint of a kind. Groq, OpenRouter, LM Studio,
vLLM and the rest are presets of ``openai-compatible``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from desktop.llm import anthropic, gemini
from desktop.llm.anthropic import AnthropicProvider
from desktop.llm.errors import ValidationError
from desktop.llm.gemini import GeminiProvider
from desktop.llm.openai_compat import OpenAICompatProvider
from desktop.llm.provider import Provider

RemoteKind = Literal["openai", "openai-compatible", "anthropic", "gemini"]
REMOTE_KINDS: tuple[RemoteKind, ...] = ("openai", "openai-compatible", "anthropic", "gemini")


@dataclass(frozen=True, slots=True)
class Preset:
    """``needs_key``: the service refuses calls without an API key (local servers do not)."""

    id: str
    name: str
    kind: RemoteKind
    base_url: str
    needs_key: bool
    local: bool = False


PRESETS: tuple[Preset, ...] = (
    Preset("openai", "OpenAI", "openai", "https://api.openai.com/v1", True),
    Preset("anthropic", "Anthropic", "anthropic", anthropic.DEFAULT_BASE_URL, True),
    Preset("gemini", "Google Gemini", "gemini", gemini.DEFAULT_BASE_URL, True),
    Preset("groq", "Groq", "openai-compatible", "https://api.groq.com/openai/v1", True),
    Preset("openrouter", "OpenRouter", "openai-compatible", "https://openrouter.ai/api/v1", True),
    Preset("mistral", "Mistral", "openai-compatible", "https://api.mistral.ai/v1", True),
    Preset("deepseek", "DeepSeek", "openai-compatible", "https://api.deepseek.com/v1", True),
    Preset("together", "Together", "openai-compatible", "https://api.together.xyz/v1", True),
    Preset("xai", "xAI", "openai-compatible", "https://api.x.ai/v1", True),
    Preset("ollama", "Ollama", "openai-compatible", "http://localhost:11434/v1", False, True),
    Preset("lmstudio", "LM Studio", "openai-compatible", "http://localhost:1234/v1", False, True),
    Preset(
        "llamacpp", "llama.cpp server", "openai-compatible", "http://localhost:8080/v1", False, True
    ),
    Preset("vllm", "vLLM", "openai-compatible", "http://localhost:8000/v1", False, True),
    Preset("custom", "Custom URL", "openai-compatible", "", False),
)


def preset(preset_id: str) -> Preset:
    for p in PRESETS:
        if p.id == preset_id:
            return p
    raise KeyError(preset_id)


def presets_for(kind: RemoteKind) -> tuple[Preset, ...]:
    """Presets offered for a kind (``openai`` and ``openai-compatible`` share theirs)."""
    if kind in ("openai", "openai-compatible"):
        return tuple(p for p in PRESETS if p.kind in ("openai", "openai-compatible"))
    return tuple(p for p in PRESETS if p.kind == kind)


def create_provider(
    kind: str,
    *,
    base_url: str | None,
    api_key: str | None,
    label: str,
    stall_timeout_s: float = 60.0,
    ca_bundle: str | None = None,
) -> Provider:
    """A Provider for one remote endpoint. ``base_url`` None or empty: the kind's default."""
    if kind == "anthropic":
        return AnthropicProvider(
            api_key,
            base_url=base_url or anthropic.DEFAULT_BASE_URL,
            label=label,
            stall_timeout_s=stall_timeout_s,
            ca_bundle=ca_bundle,
        )
    if kind == "gemini":
        return GeminiProvider(
            api_key,
            base_url=base_url or gemini.DEFAULT_BASE_URL,
            label=label,
            stall_timeout_s=stall_timeout_s,
            ca_bundle=ca_bundle,
        )
    if kind in ("openai", "openai-compatible"):
        url = base_url or (preset("openai").base_url if kind == "openai" else "")
        if not url:
            raise ValidationError({"base_url": "Enter the base URL of the server."})
        return OpenAICompatProvider(
            url, api_key, label=label, stall_timeout_s=stall_timeout_s, ca_bundle=ca_bundle
        )
    raise ValidationError({"kind": f"“{kind}” is not a remote provider kind."})
