"""Export and import keep a reply's sources (the passages of knowledge collections it was
given): the JSON carries them, a Markdown export lists them under the reply (the path as text,
never a link), and an import stores them on the new reply. Real SQLite, via ``services``."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from desktop import cli
from desktop.chat.export import (
    ExportError,
    Stores,
    import_conversations,
    import_into,
    to_json,
    to_markdown,
    write_export,
)
from desktop.store.knowledge import Source

NOTES = Source(1, "Notes", "/home/me/notes/notes.md", 10, 24, None, 0.0325, "High tide at noon.")
MANUAL = Source(2, "Manuals", "C:\\docs\\tide_*tables*.pdf", 4, 9, 3, None, "Page three.")
BARE = Source(3, "Notes", "/home/me/notes/readme.txt", None, None, None, 0.5, "No lines.")


def _conversation(services: Any) -> tuple[int, int, int]:
    """A question; a reply with sources; a second question; a reply without sources."""
    store = services.conversations
    conv = store.create(None, "Tides")
    store.add_message(conv.id, "user", "When is high tide?")
    cited = store.add_message(conv.id, "assistant", "At noon [1], see [2].", agent_name="Reader")
    store.add_message(conv.id, "user", "Thanks.")
    plain = store.add_message(conv.id, "assistant", "You're welcome.", agent_name="Reader")
    services.knowledge.store.add_sources(cited.id, [NOTES, MANUAL, BARE])
    return conv.id, cited.id, plain.id


def _json(services: Any, conv_id: int) -> dict[str, Any]:
    data = to_json(Stores.of(services), conv_id)
    return json.loads(json.dumps(data))  # as a file holds it


def _with_sources(services: Any) -> Stores:
    """The conversations with their stats and the replies' sources (no files)."""
    return Stores(services.conversations, services.stats, knowledge=services.knowledge.store)


def _import(services: Any, data: Any) -> list[int]:
    return import_into(services, data)


def test_json_carries_a_replys_sources_exactly(services: Any) -> None:
    conv_id, cited, plain = _conversation(services)
    data = _json(services, conv_id)
    by_id = {m["id"]: m for m in data["messages"]}
    assert by_id[cited]["sources"] == [
        {
            "n": 1,
            "collection": "Notes",
            "path": "/home/me/notes/notes.md",
            "start_line": 10,
            "end_line": 24,
            "page": None,
            "score": 0.0325,
            "text": "High tide at noon.",
        },
        {
            "n": 2,
            "collection": "Manuals",
            "path": "C:\\docs\\tide_*tables*.pdf",
            "start_line": 4,
            "end_line": 9,
            "page": 3,
            "score": None,
            "text": "Page three.",
        },
        {
            "n": 3,
            "collection": "Notes",
            "path": "/home/me/notes/readme.txt",
            "start_line": None,
            "end_line": None,
            "page": None,
            "score": 0.5,
            "text": "No lines.",
        },
    ]
    assert data["version"] == 3  # an older SIMI Multi refuses it rather than drop them
    others = [m for m in data["messages"] if m["id"] != cited]
    assert others and all("sources" not in m for m in others)
    assert plain in {m["id"] for m in others}


def test_without_the_store_or_sources_nothing_changes(services: Any) -> None:
    conv_id, _cited, _plain = _conversation(services)
    data = to_json(
        Stores(services.conversations, services.stats, services.attachments.store), conv_id
    )
    assert data["version"] == 1 and all("sources" not in m for m in data["messages"])
    md = to_markdown(Stores(services.conversations, services.stats), conv_id)
    assert "Sources" not in md

    conv = services.conversations.create(None, "Plain")
    services.conversations.add_message(conv.id, "user", "hi")
    services.conversations.add_message(conv.id, "assistant", "hello")
    data = _json(services, conv.id)
    assert data["version"] == 1 and all("sources" not in m for m in data["messages"])
    md = to_markdown(_with_sources(services), conv.id)
    assert "Sources" not in md


def test_markdown_lists_the_sources_under_their_reply(services: Any) -> None:
    conv_id, _cited, _plain = _conversation(services)
    md = to_markdown(_with_sources(services), conv_id)
    lines = md.splitlines()
    assert lines.count("**Sources**") == 1
    at = lines.index("**Sources**")
    before, after = "\n".join(lines[:at]), "\n".join(lines[at:])
    assert before.rstrip().endswith("At noon [1], see [2].")  # right under the cited reply
    assert "Thanks." in after and "You're welcome." in after  # not under the later one
    assert lines[at + 1 : at + 5] == [
        "",
        "- \\[1\\] notes.md — lines 10–24 (collection “Notes”), `/home/me/notes/notes.md`",
        "- \\[2\\] tide\\_\\*tables\\*.pdf — page 3, lines 4–9 (collection “Manuals”), "
        "`C:\\docs\\tide_*tables*.pdf`",
        "- \\[3\\] readme.txt (collection “Notes”), `/home/me/notes/readme.txt`",
    ]
    assert "](" not in md and "<http" not in md  # no path became a link
    # the rest is what it was without sources
    plain = to_markdown(Stores(services.conversations, services.stats), conv_id)
    assert md.replace("\n".join(lines[at : at + 6]) + "\n", "") == plain


def test_a_path_is_shown_as_text_whatever_it_holds(services: Any) -> None:
    conv = services.conversations.create(None, "Odd")
    services.conversations.add_message(conv.id, "user", "q")
    reply = services.conversations.add_message(conv.id, "assistant", "a")
    odd = Source(1, "Mine <b>", "/x/`a`[b](http://e.com)\n# no.md", 1, 1, None, None, "t")
    services.knowledge.store.add_sources(reply.id, [odd])
    md = to_markdown(_with_sources(services), conv.id)
    (line,) = [x for x in md.splitlines() if x.startswith("- \\[1\\]")]
    assert line == (
        "- \\[1\\] e.com) # no.md — line 1 (collection “Mine \\<b\\>”), "
        "``/x/`a`[b](http://e.com)\\n# no.md``"
    )


def test_export_import_export_round_trips_the_sources(services: Any, tmp_path: Path) -> None:
    conv_id, cited, _plain = _conversation(services)
    out = tmp_path / "tides.json"
    write_export(Stores.of(services), conv_id, "json", out)
    first = json.loads(out.read_text(encoding="utf-8"))
    (new_id,) = _import(services, first)
    again = _json(services, new_id)
    reply = next(m for m in again["messages"] if m["content"] == "At noon [1], see [2].")
    assert services.knowledge.store.sources_of([reply["id"]])[reply["id"]] == [
        NOTES,
        MANUAL,
        BARE,
    ]

    def sources(data: dict[str, Any]) -> list[Any]:
        return [m.get("sources") for m in data["messages"]]

    assert sources(again) == sources(first) and again["version"] == first["version"] == 3
    assert next(m for m in first["messages"] if m["id"] == cited)["sources"] == reply["sources"]


def test_import_without_the_store_leaves_the_sources_out(services: Any) -> None:
    conv_id, _cited, _plain = _conversation(services)
    data = _json(services, conv_id)
    (new_id,) = import_conversations(data, Stores(services.conversations, services.stats))
    ids = [m.id for m in services.conversations.all_messages(new_id)]
    assert services.knowledge.store.sources_of(ids) == {}


BAD_SOURCES: list[tuple[Any, str]] = [
    ("not a list", "sources that are not a list"),
    (["nope"], "a source that is not described"),
    ([{"collection": "N", "path": "p", "text": "t"}], "a source without a number"),
    ([{"n": True, "collection": "N", "path": "p", "text": "t"}], "a source without a number"),
    ([{"n": 0, "collection": "N", "path": "p", "text": "t"}], "a source without a number"),
    ([{"n": 2**70, "collection": "N", "path": "p", "text": "t"}], "a source without a number"),
    ([{"n": 1, "collection": "N", "path": "p"}], "source 1 has no text"),
    ([{"n": 1, "collection": "N", "path": "p", "text": 5}], "source 1 has no text"),
    ([{"n": 1, "collection": "N", "path": "p", "text": "\ud800"}], "not valid Unicode"),
    ([{"n": 1, "collection": 3, "path": "p", "text": "t"}], "no collection or path"),
    ([{"n": 1, "collection": "N", "text": "t"}], "no collection or path"),
    (
        [{"n": 1, "collection": "N", "path": "p", "text": "t", "start_line": "10"}],
        "lines or a page that are not numbers",
    ),
    (
        [{"n": 1, "collection": "N", "path": "p", "text": "t", "end_line": 10**20}],
        "lines or a page that are not numbers",
    ),
    (
        [{"n": 1, "collection": "N", "path": "p", "text": "t", "page": 2.5}],
        "lines or a page that are not numbers",
    ),
    (
        [{"n": 1, "collection": "N", "path": "p", "text": "t", "score": "high"}],
        "a score that is not a number",
    ),
    (
        [{"n": 1, "collection": "N", "path": "p", "text": "t", "score": float("nan")}],
        "a score that is not a number",
    ),
    (
        [
            {"n": 1, "collection": "N", "path": "p", "text": "t"},
            {"n": 1, "collection": "N", "path": "q", "text": "u"},
        ],
        "two sources numbered 1",
    ),
]


@pytest.mark.parametrize(("value", "words"), BAD_SOURCES)
def test_a_malformed_source_refuses_the_import(services: Any, value: Any, words: str) -> None:
    conv_id, cited, _plain = _conversation(services)
    data = _json(services, conv_id)
    for message in data["messages"]:
        if message["id"] == cited:
            message["sources"] = value
    number = 1 + [m["id"] for m in data["messages"]].index(cited)
    before = len(services.conversations.list())
    with pytest.raises(ExportError, match=f"Message {number} of the export") as caught:
        _import(services, data)
    assert words in caught.value.user_message
    assert len(services.conversations.list()) == before  # nothing was imported


def test_a_malformed_source_in_a_file_of_several_names_the_conversation(services: Any) -> None:
    conv_id, cited, _plain = _conversation(services)
    good = _json(services, conv_id)
    bad = copy.deepcopy(good)
    next(m for m in bad["messages"] if m["id"] == cited)["sources"][1].pop("text")
    before = len(services.conversations.list())
    with pytest.raises(ExportError) as caught:
        _import(services, [good, bad])
    assert caught.value.user_message.startswith("Conversation 2 of 2 in the file:")
    assert "source 2 has no text" in caught.value.user_message
    assert caught.value.user_message.endswith("Nothing was imported.")
    assert len(services.conversations.list()) == before


def test_simi_export_and_import_carry_sources(
    services: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conv_id, _cited, _plain = _conversation(services)
    services.close()  # the command opens its own, as a terminal would
    out = tmp_path / "tides.json"
    assert cli.main(["export", str(conv_id), "--format", "json", "-o", str(out)]) == 0
    carried = json.loads(out.read_text(encoding="utf-8"))
    assert [s["n"] for m in carried["messages"] for s in m.get("sources", ())] == [1, 2, 3]
    capsys.readouterr()
    assert cli.main(["export", str(conv_id), "--format", "md"]) == 0
    assert "- \\[1\\] notes.md — lines 10–24" in capsys.readouterr().out
    assert cli.main(["import", str(out)]) == 0
    imported = int(capsys.readouterr().out.rsplit("conversation ", 1)[1].rstrip(".\n"))
    assert cli.main(["export", str(imported), "--format", "json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [m.get("sources") for m in again["messages"]] == [
        m.get("sources") for m in carried["messages"]
    ]
