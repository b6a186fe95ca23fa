"""Files go where people look: Export proposes the person's Documents folder and a clean file
name from the conversation's title ("Name three primary colors.md", never "…colors_.md" in the
folder the app was started from); the folder used last, for an export or an import, is
remembered and proposed next time. The window's ``ask_save_path`` / ``ask_open_path`` are
answered as a person answers the dialog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from desktop.settings.places import LAST_FOLDER_PREF, clean_file_name
from desktop.settings.prefs import Preferences
from desktop.store.agents import Agent


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A person's home with a Documents folder (platformdirs finds it there)."""
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(tmp_path)  # where the app was started: never proposed
    return home


def _conversation(services: Any, title: str) -> int:
    agent = services.agents.create(
        Agent(name="Painter", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )
    conv = services.conversations.create(agent.id, title=title)
    user = services.conversations.add_message(conv.id, "user", title)
    services.conversations.add_message(
        conv.id, "assistant", "Red, yellow and blue.", parent_id=user.id, agent_name="Painter"
    )
    return conv.id


def _window_on(make_window: Any, services: Any, title: str) -> Any:
    """A window with a conversation titled ``title`` (a question and its answer) open."""
    window = make_window(services)
    window.open_conversation(_conversation(services, title))
    return window


def _folder(parent: Path, name: str) -> Path:
    """A new empty folder ``name`` in ``parent``."""
    folder = parent / name
    folder.mkdir()
    return folder


def _answer_save(window: Any, answer: Path) -> list[str]:
    asked: list[str] = []
    window.ask_save_path = lambda _title, suggested, _filters: (
        asked.append(suggested) or str(answer)
    )
    return asked


def test_export_proposes_documents_and_the_title_as_a_clean_file_name(
    qtbot: Any, services: Any, make_window: Any, home: Path, tmp_path: Path
) -> None:
    window = _window_on(make_window, services, "Name three primary colors?")
    elsewhere = _folder(tmp_path, "notes")
    asked = _answer_save(window, elsewhere / "colours.md")
    task = window.export_conversation("md")
    assert task is not None
    qtbot.waitUntil(task.done, timeout=10_000)
    assert asked == [str(home / "Documents" / "Name three primary colors.md")]
    assert "Red, yellow and blue." in (elsewhere / "colours.md").read_text(encoding="utf-8")

    # the folder chosen is proposed next time, and survives a restart (it is a preference)
    assert Preferences(services.prefs.path).get(LAST_FOLDER_PREF) == str(elsewhere)
    asked_again = _answer_save(window, elsewhere / "colours.json")
    qtbot.waitUntil(window.export_conversation("json").done, timeout=10_000)
    assert asked_again == [str(elsewhere / "Name three primary colors.json")]


def test_import_starts_in_the_folder_used_last_and_remembers_its_own(
    qtbot: Any, services: Any, make_window: Any, home: Path, tmp_path: Path
) -> None:
    window = _window_on(make_window, services, "Harbour notes")
    first = _folder(tmp_path, "first")
    _answer_save(window, first / "harbour.json")
    qtbot.waitUntil(window.export_conversation("json").done, timeout=10_000)

    folders: list[str] = []
    window.ask_open_path = lambda _title, _filters, folder: (
        folders.append(folder) or str(first / "harbour.json")
    )
    qtbot.waitUntil(window.import_conversation().done, timeout=10_000)
    assert folders == [str(first)]

    second = _folder(tmp_path, "second")
    (second / "copy.json").write_bytes((first / "harbour.json").read_bytes())
    window.ask_open_path = lambda *_args: str(second / "copy.json")
    qtbot.waitUntil(window.import_conversation().done, timeout=10_000)
    asked = _answer_save(window, second / "again.md")
    qtbot.waitUntil(window.export_conversation("md").done, timeout=10_000)
    assert asked == [str(second / "Harbour notes.md")]  # the import's folder, remembered


def test_a_remembered_folder_that_is_gone_falls_back_to_documents(
    qtbot: Any, services: Any, make_window: Any, home: Path, tmp_path: Path
) -> None:
    services.prefs.set(LAST_FOLDER_PREF, str(tmp_path / "unplugged-usb-stick"))
    window = _window_on(make_window, services, "Trip")
    asked = _answer_save(window, tmp_path / "trip.md")
    qtbot.waitUntil(window.export_conversation("md").done, timeout=10_000)
    assert asked == [str(home / "Documents" / "Trip.md")]


def test_the_real_dialogs_open_in_the_proposed_folder(
    services: Any, make_window: Any, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window's own questions (not a test's answer): a bare name from the Stats page's
    export goes into Documents too, and the open dialog starts where it is told."""
    from desktop.ui.shell import main_window

    opened: list[tuple[str, ...]] = []

    def save(_parent: Any, title: str, where: str, filters: str) -> tuple[str, str]:
        opened.append((title, where))
        return "", ""

    def open_(_parent: Any, title: str, where: str, filters: str) -> tuple[str, str]:
        opened.append((title, where))
        return "", ""

    monkeypatch.setattr(main_window.QFileDialog, "getSaveFileName", save)
    monkeypatch.setattr(main_window.QFileDialog, "getOpenFileName", open_)
    window = make_window(services)
    assert window.ask_save_path("Export stats", "simi-stats.csv", "CSV (*.csv)") is None
    assert window.import_conversation() is None  # cancelled: nothing is remembered
    assert opened == [
        ("Export stats", str(home / "Documents" / "simi-stats.csv")),
        ("Import conversation", str(home / "Documents")),
    ]
    assert services.prefs.get(LAST_FOLDER_PREF) is None


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("Name three primary colors?", "Name three primary colors.md"),
        ('What is "C:\\temp\\a|b"? <quick>', "What is C temp a b quick.md"),
        ("  lots   of\tspace\nand lines  ", "lots of space and lines.md"),
        ("...hidden.", "hidden.md"),
        ("???", "Conversation.md"),
        ("", "Conversation.md"),
        ("CON", "CON conversation.md"),
        ("Ünïcödé stays · 日本語 ✓", "Ünïcödé stays · 日本語 ✓.md"),
    ],
)
def test_clean_file_names_from_titles(title: str, name: str) -> None:
    assert clean_file_name(title, ".md") == name


def test_a_long_title_is_cut_at_a_word_within_eighty_characters() -> None:
    title = "Compare the decoding speed of " + "many local and remote models " * 5
    name = clean_file_name(title, ".md")
    stem = name.removesuffix(".md")
    assert len(stem) <= 80 and title.startswith(stem) and not stem.endswith(" ")
    assert title[len(stem)] == " "  # cut between words, not inside one
