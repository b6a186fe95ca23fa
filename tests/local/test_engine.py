import asyncio
from pathlib import Path

import pytest

from desktop.llm.errors import LocalModelError
from desktop.local.engine import _split_on_stops
from desktop.local.loading import check_gguf_file
from desktop.store.agents import Agent


@pytest.mark.parametrize(
    ("text", "stops", "expected"),
    [
        ("Hello wor", (), ("Hello wor", "", False)),
        ("Hello <|im", ("<|im_end|>",), ("Hello ", "<|im", False)),
        ("Hello <|im_end|> tail", ("<|im_end|>",), ("Hello ", "", True)),
        ("a END b", ("END", "b"), ("a ", "", True)),
    ],
)
def test_stop_strings_are_held_back_and_cut(text, stops, expected) -> None:
    assert _split_on_stops(text, stops) == expected


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty"),
        (b"GG", "empty or truncated"),
        (b"NOPE" * 100, "not a GGUF"),
        (b"just some text\n" * 10, "not a GGUF"),
    ],
)
def test_bad_model_files_get_clear_errors(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    with pytest.raises(LocalModelError) as info:
        check_gguf_file(path)
    assert str(path) in info.value.user_message and words in info.value.user_message


def test_corrupt_model_fails_on_the_message_and_keeps_the_conversation(services, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)  # right magic, nonsense header
    agent = services.agents.create(
        Agent(name="Broken", kind="local", model="b", model_path=str(bad), n_ctx=512)
    )
    conv = services.conversations.create(agent.id)
    services.conversations.add_message(conv.id, "user", "earlier")
    services.conversations.add_message(conv.id, "assistant", "kept")
    result = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "hi")))
    assert result.status == "error" and result.error.kind == "local_model"
    assert "broken.gguf" in result.error.user_message
    contents = [m.content for m in services.conversations.messages(conv.id)]
    assert contents[:3] == ["earlier", "kept", "hi"]


def test_llama_logs_are_captured_once_per_process() -> None:
    from desktop.local.loading import capture_llama_logs

    assert capture_llama_logs() is capture_llama_logs()
