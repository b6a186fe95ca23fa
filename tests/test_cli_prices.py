"""`simi agents add|edit --price-input/--price-output`: an agent's own price, USD per million
tokens, which wins over the price list; "none" goes back to the list."""

from __future__ import annotations

import json
from typing import Any

import pytest

from desktop import cli

GROQ = [
    "--kind",
    "openai-compatible",
    "--base-url",
    "https://api.groq.com/openai/v1",
    "--model",
    "llama-3.1-8b-instant",
]


def _show(capsys: pytest.CaptureFixture[str], name: str) -> dict[str, Any]:
    capsys.readouterr()
    assert cli.main(["agents", "show", name, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _prices(data: dict[str, Any]) -> tuple[Any, Any]:
    return data["price_input_per_m"], data["price_output_per_m"]


def test_price_override_is_set_changed_and_cleared(
    simi_home: object, capsys: pytest.CaptureFixture[str]
) -> None:
    add = ["agents", "add", "--name", "Groq", *GROQ, "--price-input", "0.5"]
    assert cli.main([*add, "--price-output", "1.25"]) == 0
    assert _prices(_show(capsys, "Groq")) == (0.5, 1.25)
    assert cli.main(["agents", "edit", "Groq", "--price-output", "2"]) == 0
    assert _prices(_show(capsys, "Groq")) == (0.5, 2.0)
    assert cli.main(["agents", "edit", "Groq", "--price-input", "none"]) == 0
    assert _prices(_show(capsys, "Groq")) == (None, 2.0)
    assert cli.main(["agents", "edit", "Groq", "--temperature", "0.3"]) == 0
    assert _prices(_show(capsys, "Groq")) == (None, 2.0)  # other edits leave it alone


def test_a_price_that_is_no_price_is_refused_in_words(
    simi_home: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["agents", "add", "--name", "Groq", *GROQ]) == 0
    capsys.readouterr()
    assert cli.main(["agents", "edit", "Groq", "--price-input", "-1"]) == 1
    assert "A price must be between 0 and 10,000 USD per million tokens" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        cli.main(["agents", "edit", "Groq", "--price-output", "cheap"])
    assert usage.value.code == 2
    assert "The output price must be a number." in capsys.readouterr().err
    assert _prices(_show(capsys, "Groq")) == (None, None)
