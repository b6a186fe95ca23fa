"""``simi ask --attach FILE`` and prompt sets with attachments, run in-process through
``desktop.cli.main`` (the same code as the ``simi`` command, without a Python start each),
against ``FaultServer`` (tests/helpers/fault_server.py: a loopback stand-in for an
OpenAI-compatible provider that records each request)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop import cli
from desktop.chat.prompt_runs import parse_prompt_set, parse_prompts
from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.settings.paths import AppPaths
from desktop.store.agents import Agent
from tests.attach.samples import image_file
from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens


@pytest.fixture
def server(simi_home: Path) -> Iterator[FaultServer]:
    """A remote agent "Remote" on a loopback server."""
    with FaultServer(lambda _request: Reply(body=ticking_tokens(2))) as fault:
        services = Services.open(AppPaths.from_env())
        try:
            services.agents.create(
                Agent(
                    name="Remote", kind="openai-compatible", base_url=fault.url + "/v1", model="m"
                )
            )
        finally:
            services.close()
        yield fault


def _user_text(body: dict[str, Any]) -> str:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content)


def _conversations() -> int:
    services = Services.open(AppPaths.from_env())
    try:
        return len(services.conversations.list())
    finally:
        services.close()


def test_ask_sends_the_attached_files_with_the_prompt(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Packing\n\n- a torch\n", encoding="utf-8")
    picture = image_file(tmp_path / "map.png", (24, 24), noisy=False)
    argv = ["ask", "--agent", "Remote", "--attach", str(notes), "--attach", str(picture)]
    assert cli.main([*argv, "--json", "What am I missing?"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tok0 tok1")
    record = json.loads(out.strip().splitlines()[-1])
    assert record["status"] == "complete" and record["image_tokens_estimated"] == 1
    (request,) = server.requests
    body = request.json()
    text = _user_text(body)
    assert text.startswith('<document name="notes.md">\n# Packing')
    assert text.endswith("What am I missing?")
    parts = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url"]


def test_ask_with_a_missing_file_says_so_and_sends_nothing(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _conversations()
    missing = tmp_path / "gone.pdf"
    code = cli.main(["ask", "--agent", "Remote", "--attach", str(missing), "Read it"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("simi: “gone.pdf” ") and "Traceback" not in err
    assert server.requests == [] and _conversations() == before


def test_ask_refuses_an_image_for_a_model_that_cannot_see(
    simi_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The starter agent (no vision projector): refused before any conversation or model."""
    picture = image_file(tmp_path / "cat.png", (8, 8), noisy=False)
    assert cli.main(["ask", "--attach", str(picture), "What is this?"]) == 1
    err = capsys.readouterr().err
    assert "cannot read images" in err and "remove the image" in err
    assert _conversations() == 0


def test_a_prompt_sets_attachments_go_with_their_prompt_to_every_agent(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "set"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "menu.txt").write_text("Soup of the day: leek.\n", encoding="utf-8")
    lines = [
        {"prompt": "What is the soup?", "attachments": ["docs/menu.txt"]},
        "Say hi.",
    ]
    prompts = folder / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    items = parse_prompt_set(prompts.read_text(encoding="utf-8"), str(prompts))
    assert [i.attachments for i in items] == [((folder / "docs" / "menu.txt").absolute(),), ()]
    assert parse_prompts(prompts.read_text(encoding="utf-8"), "prompts.jsonl") == [
        "What is the soup?",
        "Say hi.",
    ]

    services = Services.open(AppPaths.from_env())
    try:
        services.agents.create(
            Agent(name="Other", kind="openai-compatible", base_url=server.url + "/v1", model="o")
        )
    finally:
        services.close()
    assert cli.main(["bench", "--agents", "Remote,Other", "--prompts", str(prompts), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [c["status"] for c in result["calls"]] == ["complete"] * 4
    sent = sorted((r.json()["model"], _user_text(r.json())) for r in server.requests)
    with_menu = [(m, t) for m, t in sent if "Soup of the day: leek." in t]
    assert sorted(m for m, _ in with_menu) == ["m", "o"]
    assert all(t.endswith("What is the soup?") for _, t in with_menu)
    assert sorted(t for _, t in sent if "leek" not in t) == ["Say hi.", "Say hi."]


def test_a_prompt_set_naming_a_missing_file_is_refused_with_its_line(tmp_path: Path) -> None:
    text = '"first"\n{"prompt": "second", "attachments": ["nope.png"]}\n'
    with pytest.raises(UserError, match=r"set\.jsonl, line 2: the attachment nope\.png"):
        parse_prompt_set(text, str(tmp_path / "set.jsonl"))
    with pytest.raises(UserError, match="must be a list of file paths"):
        parse_prompt_set('{"prompt": "x", "attachments": "a.png"}', "set.jsonl")
