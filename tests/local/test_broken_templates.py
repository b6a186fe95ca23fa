"""Broken model metadata never breaks a reply: a chat template that does not compile or fails
to render falls back to ChatML with the no-template notice; a failure in the worker is logged
and becomes a typed error, never a traceback on the terminal."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path

import pytest

from desktop.llm.errors import LocalModelError
from desktop.llm.events import Finished, RunInfo, TextDelta
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local.client import WorkerClient
from desktop.local.engine import LocalEngine
from desktop.local.loading import CHATML_TEMPLATE_NOTE, LoadParams
from tests.helpers import gguf_files
from tests.helpers.cli import simi

pytestmark = pytest.mark.slow

# name: (template, what the log says about it)
BROKEN_TEMPLATES = {
    "unknown-tag": ("{% fo %}{{ messages }}", "Encountered unknown tag 'fo'"),
    "unknown-filter": ("{{ messages | nosuchfilter }}", "No filter named 'nosuchfilter'"),
    "unclosed-block": ("{% for m in messages %}{{ m.content }}", "Unexpected end of template"),
    "raises-at-render": ('{{ raise_exception("no system role here") }}', "no system role here"),
    "fails-at-render": ("{{ messages[7].content.upper() }}", "no element 7"),
}


@pytest.fixture(scope="module")
def broken_models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("broken-templates")
    return {
        name: gguf_files.rewrite_starter(
            folder / f"{name}.gguf", set_kv={"tokenizer.chat_template": template}
        )
        for name, (template, _said) in BROKEN_TEMPLATES.items()
    }


@pytest.mark.parametrize("name", list(BROKEN_TEMPLATES))
def test_broken_template_falls_back_to_chatml_with_the_notice(broken_models, name, caplog) -> None:
    engine = LocalEngine()
    request = ChatRequest("m", (ChatMessage("user", "Say hello."),), Sampling(max_tokens=6, seed=1))
    params = LoadParams(str(broken_models[name]), n_ctx=512)
    with caplog.at_level(logging.WARNING, logger="simi.local"):
        events = list(engine.generate(params, request, threading.Event()))
    engine.unload()
    [info] = [e for e in events if isinstance(e, RunInfo)]
    assert info.notice == CHATML_TEMPLATE_NOTE
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip()
    assert events[-1] == Finished("length")
    assert BROKEN_TEMPLATES[name][1] in caplog.text and "using ChatML" in caplog.text


def test_broken_template_through_the_worker_is_a_complete_reply(
    services, broken_models, capfd, caplog
) -> None:
    path = broken_models["unknown-tag"]
    agent = gguf_files.short_local_agent(services, "Bad template", path)
    conv = services.conversations.create(agent.id)
    with caplog.at_level(logging.INFO, logger="simi"):
        result = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Hi")))
    assert result.status == "complete" and result.text.strip()
    assert result.notice == CHATML_TEMPLATE_NOTE
    assert "Traceback" not in capfd.readouterr().err
    # the worker's warning, in the app's log (under "simi", where the log file listens)
    [record] = [r for r in caplog.records if "unknown tag 'fo'" in r.getMessage()]
    assert record.name.startswith("simi.")


def test_unexpected_worker_failure_is_logged_and_typed_never_printed(capfd, caplog) -> None:
    """A bug inside the worker (here: a KV type llama.cpp has no id for) is a LocalModelError
    with finished text; its traceback is in the app's log, not on stderr."""
    client = WorkerClient()
    params = LoadParams(str(gguf_files.starter()), n_ctx=256, kv_type="no-such-type")
    request = ChatRequest("m", (ChatMessage("user", "Hi"),), Sampling(max_tokens=2))

    async def main() -> None:
        async for _event in client.stream(params, request):
            pass

    try:
        with caplog.at_level(logging.INFO, logger="simi.local"):
            with pytest.raises(LocalModelError) as info:
                asyncio.run(main())
            assert client.alive  # it keeps serving
    finally:
        client.shutdown()
    assert "llama.cpp failed" in info.value.user_message
    assert "Traceback" in caplog.text and "KeyError: 'no-such-type'" in caplog.text
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("name", ["unknown-tag", "raises-at-render"])
def test_simi_ask_with_a_broken_template_answers_without_a_traceback(
    cli_env, broken_models, name
) -> None:
    added = simi(
        cli_env,
        "agents",
        "add",
        "--name",
        "Broken template",
        "--kind",
        "local",
        "--model-file",
        str(broken_models[name]),
        "--n-ctx",
        "512",
        "--max-tokens",
        "8",
        "--seed",
        "1",
    )
    assert added.returncode == 0, added.stderr
    out = simi(cli_env, "ask", "--agent", "Broken template", "--json", "Say hello.")
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
    assert out.returncode == 0, out.stderr
    lines = out.stdout.rstrip("\n").splitlines()
    record = json.loads(lines[-1])
    assert record["status"] == "complete" and record["output_tokens"] > 0
    assert "\n".join(lines[:-1]).strip()  # the reply itself
