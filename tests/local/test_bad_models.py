"""Bad model files: each gives a clear error naming the file and what is wrong, in the library
(Models page row, `simi models list`) and on the message; the conversation is kept."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from desktop.local.catalog import ModelCatalog
from desktop.settings.prefs import Preferences
from desktop.store.agents import Agent
from tests.helpers import gguf_files

BAD_FILES: dict[str, tuple[Callable[[Path], object], str]] = {
    "zero-byte": (lambda p: p.write_bytes(b""), "empty (0 bytes)"),
    "wrong-magic": (
        lambda p: p.write_bytes(b"\x7fELF" + b"\x00" * 400),
        "does not start with 'GGUF'",
    ),
    "truncated-header": (gguf_files.truncated_header, "truncated"),
    "truncated-data": (gguf_files.truncated_tensor_data, "tensor data is truncated"),
    "zeroed-data": (gguf_files.zeroed_tensor_data, "tensor data is all zeros"),
    "absurd-counts": (gguf_files.absurd_counts, "tensors, which is not plausible"),
    "absurd-string": (gguf_files.huge_string, "claims a length of 1,099,511,627,776 bytes"),
    "unknown-arch": (
        lambda p: gguf_files.rewrite_starter(
            p, set_kv={"general.architecture": "nonesuch"}, rename_prefix=("llama.", "nonesuch.")
        ),
        "architecture “nonesuch” is unknown to the installed llama.cpp",
    ),
    "text-file": (gguf_files.text_file, "it looks like a text file"),
    "missing": (lambda p: None, "does not exist"),
}


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bad-models")
    for name, (make, _words) in BAD_FILES.items():
        make(folder / f"{name}.gguf")
    return folder


def test_each_bad_file_is_a_row_with_its_error(services, bad_folder: Path) -> None:
    catalog = ModelCatalog(services.paths, Preferences(services.paths.settings_path))
    catalog.add_folder(bad_folder)
    rows = {Path(e.path).stem: e for e in catalog.entries() if not e.starter}
    assert set(rows) == set(BAD_FILES) - {"missing"}  # a missing file is not in a folder
    for name, entry in rows.items():
        assert entry.info is None and BAD_FILES[name][1] in (entry.error or ""), name
    starter = [e for e in catalog.entries() if e.starter]
    assert starter and starter[0].info is not None  # one bad file never hides the others


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_bad_file_fails_on_the_message_and_keeps_the_conversation(
    services, bad_folder: Path, name: str
) -> None:
    path = bad_folder / f"{name}.gguf"
    if name == "missing":  # the agent was saved while the file existed; then it was moved
        path.write_bytes(b"")
    agent = services.agents.create(
        Agent(name=f"Bad {name}", kind="local", model=name, model_path=str(path), n_ctx=512)
    )
    if name == "missing":
        path.unlink()
    conv = services.conversations.create(agent.id)
    services.conversations.add_message(conv.id, "user", "earlier")
    services.conversations.add_message(conv.id, "assistant", "kept")
    result = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "hi")))
    assert result.status == "error" and result.error.kind == "local_model"
    assert str(path) in result.error.user_message
    assert BAD_FILES[name][1] in result.error.user_message
    messages = services.conversations.messages(conv.id)
    assert [m.content for m in messages[:3]] == ["earlier", "kept", "hi"]
    assert messages[-1].status == "error"
    assert services.stats.for_message(messages[-1].id)["finish_reason"] == "error"
    assert not services.local.worker.alive  # told apart before any worker started


@pytest.mark.slow
def test_file_deleted_while_loaded_is_reported_and_unloaded(services, tmp_path: Path) -> None:
    path = gguf_files.copy_starter(tmp_path / "soon-gone.gguf")
    agent = services.agents.create(
        Agent(name="Gone", kind="local", model="g", model_path=str(path), n_ctx=512, max_tokens=4)
    )
    conv = services.conversations.create(agent.id)
    first = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Hi")))
    assert first.status == "complete" and services.local.worker.alive
    path.unlink()
    second = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Again")))
    assert second.status == "error" and str(path) in second.error.user_message
    assert "does not exist" in second.error.user_message
    assert not services.local.worker.alive  # its memory was freed
    contents = [m.content for m in services.conversations.messages(conv.id)]
    assert contents[:3] == ["Hi", first.text, "Again"]
    gguf_files.copy_starter(path)  # put it back: the next message loads it again
    third = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Back?")))
    assert third.status == "complete" and third.stats.load_ms is not None
