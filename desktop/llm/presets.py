"""Endpoint presets the user picks from: data, a name and base URL for an endpoint of a kind.

A *provider kind* is code (``desktop.chat.kinds`` declares them and builds their providers);
Groq, OpenRouter, LM Studio, vLLM and the rest are presets of ``openai-compatible``.
"""

from __future__ import annotations

from dataclasses import dataclass

# The hosted APIs' own addresses; their providers read them from here (this module stays free
# of HTTP code, so the kinds' registry can be read at start-up without loading httpx).
ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"


@dataclass(frozen=True, slots=True)
class Preset:
    """``kind``: the provider kind's name; ``needs_key``: the service refuses calls without an
    API key (local servers do not); ``local``: the server runs on this machine."""

    id: str
    name: str
    kind: str
    base_url: str
    needs_key: bool
    local: bool = False


PRESETS: tuple[Preset, ...] = (
    Preset("openai", "OpenAI", "openai", "https://api.openai.com/v1", True),
    Preset("anthropic", "Anthropic", "anthropic", ANTHROPIC_BASE_URL, True),
    Preset("gemini", "Google Gemini", "gemini", GEMINI_BASE_URL, True),
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
