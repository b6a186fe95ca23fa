"""The rules the agent editor and the CLI share: where a saved key may go, and how typed text
becomes an agent's numbers."""

from __future__ import annotations

import pytest

from desktop.chat.agent_rules import (
    NUMBER_FIELDS,
    default_model_name,
    host_of,
    is_plain_http_remote,
    key_left_behind,
    key_may_follow,
    number_field,
    parse_number,
    parse_numbers,
    stop_lines,
)
from desktop.local.starter import STARTER_REF, starter_model_path


@pytest.mark.parametrize(
    ("old", "new", "follows"),
    [
        ("https://one.example/v1", "https://one.example/v2", True),  # another path
        ("https://one.example/v1", "https://one.example:8443/v1", True),  # another port
        ("https://ONE.example/v1", "https://one.example/v1", True),  # host names ignore case
        ("http://10.0.0.5/v1", "https://10.0.0.5/v1", True),  # upgraded to TLS
        ("https://one.example/v1", "https://two.example/v1", False),  # another host
        ("http://127.0.0.1:8080/v1", "http://localhost:8080/v1", False),  # another host name
        ("https://10.0.0.5/v1", "http://10.0.0.5/v1", False),  # would travel in clear
        ("https://one.example/v1", None, False),
        (None, "https://one.example/v1", False),
        ("https://one.example/v1", "http://[::1", False),  # does not parse
    ],
)
def test_a_key_follows_only_within_its_host_and_never_into_plain_http(
    old: str | None, new: str | None, follows: bool
) -> None:
    assert key_may_follow(old, new) is follows
    assert (key_left_behind(old, new) is None) is follows


def test_the_reason_a_key_stays_behind_names_the_new_host() -> None:
    assert key_left_behind("https://a.example/v1", "https://B.example/v1") == (
        "This agent now points at b.example; enter its API key "
        "(the old key is not sent to another host)"
    )
    assert key_left_behind("https://a.example/v1", "http://a.example/v1") == (
        "This agent now uses plain http:// to a.example; enter its API key again "
        "(the old key is not sent unencrypted)"
    )
    assert host_of("not a url") is None


def test_plain_http_warns_only_off_this_machine() -> None:
    assert is_plain_http_remote("http://192.168.1.20:8080/v1")
    assert not is_plain_http_remote("http://localhost:11434/v1")
    assert not is_plain_http_remote("https://api.example/v1")
    assert not is_plain_http_remote(None)


@pytest.mark.parametrize(
    ("text", "whole", "value"),
    [
        ("", False, None),
        ("  0.5 ", False, 0.5),
        ("4,096", True, 4096),
        ("-1", True, -1),
    ],
)
def test_numbers_parse_as_typed(text: str, whole: bool, value: object) -> None:
    assert parse_number(text, "It", whole=whole) == value


@pytest.mark.parametrize(
    ("text", "whole", "message"),
    [
        ("many", True, "Max tokens must be a whole number."),
        ("1.5", True, "Max tokens must be a whole number."),
        ("warm", False, "Max tokens must be a number."),
        ("nan", False, "Max tokens must be a number."),
        ("inf", False, "Max tokens must be a number."),
    ],
)
def test_numbers_that_do_not_parse_say_so_in_words(text: str, whole: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_number(text, "Max tokens", whole=whole)


def test_only_the_fields_of_the_agents_side_are_read() -> None:
    texts = {f.name: "x" for f in NUMBER_FIELDS}
    values, errors = parse_numbers({**texts, "temperature": "0.2"}, remote=True)
    assert values == {"temperature": 0.2}
    remote = {"stall_timeout_s", "price_input_per_m", "price_output_per_m"}
    assert set(errors) == {"top_p", "max_tokens", "seed", *remote}
    assert errors["stall_timeout_s"] == "The stall timeout (seconds) must be a number."
    values, errors = parse_numbers({"n_ctx": "2048", "stall_timeout_s": "x"}, remote=False)
    assert values == {"n_ctx": 2048} and errors == {}
    assert number_field("n_threads").whole and number_field("n_threads").scope == "local"


def test_stop_lines_and_the_local_model_name() -> None:
    assert stop_lines("###\n\nUser:\n") == ("###", "User:")
    assert default_model_name("/models/Qwen2.5-7B.Q4_K_M.gguf") == "Qwen2.5-7B.Q4_K_M"
    if starter_model_path() is not None:
        assert default_model_name(STARTER_REF) == "SmolLM2-135M-Instruct.Q4_1"
    assert default_model_name(None) == ""
