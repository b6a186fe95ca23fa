"""Names people recognise, and a footer line with only what is known: a llama.cpp server's
GGUF path becomes its file name, a long model id is elided in the middle (the whole one in the
tooltip), a stopped reply says "stopped" and its token count, never "?". Qt-free."""

from __future__ import annotations

from typing import Any

from desktop.chat import agent_status
from desktop.chat.format import (
    MODEL_NAME_CHARS,
    short_model_name,
    stats_line,
    stats_line_variants,
    stats_tooltip_text,
)
from desktop.store.agents import Agent

GGUF = "/models/qwen2.5-7b-instruct-q4_k_m.gguf"
FIREWORKS = "accounts/fireworks/models/llama-v3p1-405b-instruct"


def test_a_gguf_path_becomes_its_file_name_on_every_system() -> None:
    assert short_model_name(GGUF) == "qwen2.5-7b-instruct-q4_k_m.gguf"
    assert short_model_name(r"C:\Users\ana\models\Phi-3-mini-Q4.gguf") == "Phi-3-mini-Q4.gguf"
    assert short_model_name("~/llm/smollm2-360m.gguf") == "smollm2-360m.gguf"
    assert short_model_name("models/tiny.gguf") == "tiny.gguf"


def test_a_familiar_id_stays_as_it_is_and_nothing_becomes_empty() -> None:
    assert (
        short_model_name("meta-llama/Llama-3.1-8B-Instruct") == "meta-llama/Llama-3.1-8B-Instruct"
    )
    assert short_model_name("gpt-4o-mini") == "gpt-4o-mini"
    assert short_model_name("  ") == "" and short_model_name(None) == ""


def test_a_long_id_is_elided_in_the_middle_keeping_its_distinctive_end() -> None:
    short = short_model_name(FIREWORKS)
    assert len(short) <= MODEL_NAME_CHARS and "…" in short
    assert short.startswith("accounts/") and short.endswith("llama-v3p1-405b-instruct")
    sixty = "x" * 20 + "-distill-qwen-32b-instruct-preview-2025-01-20"
    assert len(sixty) > 60
    assert len(short_model_name(sixty)) == MODEL_NAME_CHARS
    assert short_model_name(sixty).endswith("preview-2025-01-20")


def test_the_footer_names_the_agent_and_the_short_model_the_tooltip_the_whole_one() -> None:
    row: dict[str, Any] = {
        "ttft_ms": 85.0,
        "decode_tok_s": 112.4,
        "prompt_tokens": 32,
        "output_tokens": 57,
        "token_source": "reported",
        "finish_reason": "stop",
        "model_requested": "local",
        "model_reported": GGUF,
        "price_source": None,
    }
    line = stats_line(row, "Box server")
    assert line == (
        "Box server · qwen2.5-7b-instruct-q4_k_m.gguf · TTFT 85 ms · 112 tok/s · 32 → 57 tokens · —"
    )
    assert "/models/" not in line and "stop" not in line  # a normal end says nothing
    tip = stats_tooltip_text(row, "Box server")
    assert tip.splitlines()[0] == f"Box server · {GGUF}"
    assert "ttft_ms: 85.0" in tip
    fire = stats_line(row, "Fireworks", FIREWORKS)
    assert FIREWORKS not in fire and short_model_name(FIREWORKS) in fire
    assert FIREWORKS in stats_tooltip_text(row, "Fireworks", FIREWORKS)


def test_a_stopped_reply_shows_what_is_known_and_no_question_marks() -> None:
    row = {
        "ttft_ms": None,
        "prompt_tokens": None,
        "output_tokens": 81,
        "token_source": "counted",
        "finish_reason": "cancelled",
        "price_source": "local",
    }
    line = stats_line(row, "Starter", "smollm2-360m-instruct-q8_0.gguf")
    # a local model is free: its cost is not repeated on every line (the timeline says it)
    assert line == "Starter · smollm2-360m-instruct-q8_0.gguf · 81 tokens · stopped"
    assert "?" not in line and "counted" not in line
    assert "81 tokens (counted)" in stats_tooltip_text(row, "Starter")
    only_prompt = stats_line({"prompt_tokens": 40, "finish_reason": "length"})
    assert only_prompt == "40 tokens in · — · max tokens reached"
    assert "?" not in stats_line({"cached_tokens": 3, "output_tokens": 2, "finish_reason": "x_y"})


def test_headers_and_sidebar_subtitles_use_the_same_short_name(services: Any) -> None:
    agent = Agent(
        name="Box server", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model=GGUF
    )
    assert agent_status.subtitle(services.local, agent).endswith(
        "· qwen2.5-7b-instruct-q4_k_m.gguf"
    )
    assert agent_status.subtitle(services.local, agent, full=True).endswith(GGUF)


def test_a_narrow_footer_drops_the_names_before_a_figure() -> None:
    row = {
        "ttft_ms": 212.0,
        "decode_tok_s": 41.3,
        "prompt_tokens": 1234,
        "cached_tokens": 1024,
        "output_tokens": 321,
        "finish_reason": "cancelled",
    }
    assert stats_line_variants(row, "Box server", GGUF) == [
        "Box server · qwen2.5-7b-instruct-q4_k_m.gguf · TTFT 212 ms · 41 tok/s · "
        "1,234 (1,024 cached) → 321 tokens · — · stopped",
        "qwen2.5-7b-instruct-q4_k_m.gguf · TTFT 212 ms · 41 tok/s · "
        "1,234 (1,024 cached) → 321 tokens · — · stopped",
        "TTFT 212 ms · 41 tok/s · 1,234 (1,024 cached) → 321 tokens · — · stopped",
        "TTFT 212 ms · 41 tok/s · 1,234 → 321 tokens · stopped",
    ]
    assert stats_line_variants(None) == [""]
