"""The agent editor for remote agents: presets, "Fetch models", "Test connection", stall
timeout and CA bundle, keys bound to their host, and saving off the GUI thread.

Real peers wherever possible: llama-cpp-python's OpenAI-compatible server on loopback for model
lists and keys, the real Secret Service (tests/conftest.py) for stored keys. Where a test needs
to see exactly what a server received, or a keyring that is slow on purpose, the stand-ins say
what they stand in for.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring.backend
import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDialog

from desktop.chat.services import Services
from desktop.llm.connection import ConnectionReport
from desktop.settings.paths import AppPaths
from desktop.settings.secrets import SecretStore
from desktop.store.agents import Agent
from desktop.ui.agents.editor import AgentEditorDialog
from tests.helpers.fault_server import FaultServer, Recorded, Reply, make_tls_files
from tests.helpers.servers import closed_port, llama_server
from tests.ui.conftest import click_for

SERVER_KEY = "sk-llama-server-key-4821"
OLD_KEY = "sk-old-host-secret-7301"
NEW_KEY = "sk-new-host-secret-5512"
WAIT_MS = 20_000  # a guard against hanging, not a timing assertion


@pytest.fixture(scope="module")
def open_server() -> Iterator[str]:
    with llama_server() as base_url:
        yield base_url


@pytest.fixture(scope="module")
def keyed_server() -> Iterator[str]:
    with llama_server(api_key=SERVER_KEY) as base_url:
        yield base_url


def _editor(qtbot: Any, services: Any, agent: Agent | None = None) -> AgentEditorDialog:
    dialog = AgentEditorDialog(services.agents, services.secrets, agent)
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.keyring_checked, timeout=WAIT_MS):
        dialog.show()
    return dialog


@pytest.fixture
def editor(qtbot: Any, services: Any, qloop: Any) -> AgentEditorDialog:
    return _editor(qtbot, services)


def _choose(combo: Any, data: str) -> None:
    index = combo.findData(data)
    assert index >= 0, data
    combo.setCurrentIndex(index)


def _a_llamacpp_server(editor: AgentEditorDialog, base_url: str) -> None:
    """Fill the editor in for a llama.cpp server (its preset) at ``base_url``."""
    _choose(editor.kind, "openai-compatible")
    _choose(editor.preset, "llamacpp")
    editor.base_url.setText(base_url)


def _fetch(qtbot: Any, dialog: AgentEditorDialog) -> tuple[str, ...] | None:
    return click_for(qtbot, dialog.fetch_button, dialog.models_fetched, WAIT_MS)


def _test(qtbot: Any, dialog: AgentEditorDialog) -> ConnectionReport:
    return click_for(qtbot, dialog.test_button, dialog.connection_tested, WAIT_MS)


def _save(qtbot: Any, dialog: AgentEditorDialog) -> bool:
    return bool(click_for(qtbot, dialog.save_button, dialog.save_finished, WAIT_MS))


# presets ---------------------------------------------------------------------------------------
def test_presets_fill_the_url_and_keep_the_kind_consistent(
    qtbot: Any, editor: AgentEditorDialog, services: Any
) -> None:
    _choose(editor.kind, "openai-compatible")
    assert editor.current_preset is not None and editor.current_preset.id == "custom"
    assert editor.base_url.text() == ""

    _choose(editor.preset, "groq")
    assert editor.base_url.text() == "https://api.groq.com/openai/v1"
    assert editor.current_kind == "openai-compatible"

    _choose(editor.preset, "openai")
    assert editor.current_kind == "openai"
    assert editor.base_url.text() == "https://api.openai.com/v1"

    _choose(editor.preset, "openrouter")  # leaving the OpenAI preset leaves the openai kind
    assert editor.current_kind == "openai-compatible"
    assert editor.base_url.text() == "https://openrouter.ai/api/v1"

    _choose(editor.kind, "anthropic")
    assert [editor.preset.itemData(i) for i in range(editor.preset.count())] == ["anthropic"]
    assert editor.base_url.text() == "https://api.anthropic.com/v1"

    _choose(editor.kind, "openai")  # picking the kind picks its preset
    assert editor.current_preset.id == "openai"  # type: ignore[union-attr]
    assert editor.base_url.text() == "https://api.openai.com/v1"
    _choose(editor.kind, "openai-compatible")  # no longer OpenAI: a custom URL, not OpenAI's
    assert editor.current_preset.id == "custom"  # type: ignore[union-attr]
    assert editor.base_url.text() == ""

    _choose(editor.preset, "ollama")
    assert editor.base_url.text() == "http://localhost:11434/v1"
    assert "needs no API key" in editor.key_note_text
    editor.base_url.setText("http://localhost:11435/v1")  # editable after filling
    editor.name.setText("Ollama here")
    editor.model.setEditText("llama3.2")
    assert _save(qtbot, editor)
    saved = services.agents.by_name("Ollama here")
    assert saved is not None
    assert (saved.kind, saved.preset, saved.base_url) == (
        "openai-compatible",
        "ollama",
        "http://localhost:11435/v1",
    )

    again = _editor(qtbot, services, saved)
    assert again.current_preset.id == "ollama"  # type: ignore[union-attr]
    assert again.base_url.text() == "http://localhost:11435/v1"
    assert again.model.currentText() == "llama3.2"


def test_keys_are_said_to_be_unneeded_only_for_local_servers(editor: AgentEditorDialog) -> None:
    _choose(editor.kind, "openai-compatible")
    for preset_id in ("lmstudio", "llamacpp", "vllm"):
        _choose(editor.preset, preset_id)
        assert "needs no API key" in editor.key_note_text, preset_id
    for preset_id in ("groq", "mistral", "deepseek", "together", "xai"):
        _choose(editor.preset, preset_id)
        assert "needs no API key" not in editor.key_note_text, preset_id


# fetch models and test connection against the real llama.cpp server -----------------------------
def test_fetch_models_lists_the_real_servers_model_without_blocking(
    qtbot: Any, editor: AgentEditorDialog, open_server: str
) -> None:
    _a_llamacpp_server(editor, open_server)

    task = editor.fetch_models()
    assert task is not None and not task.done()  # the slot returned; the call runs on the loop
    with qtbot.waitSignal(editor.models_fetched, timeout=WAIT_MS) as blocker:
        pass
    models = blocker.args[0]
    assert models is not None and len(models) == 1
    assert models[0].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert [editor.model.itemText(i) for i in range(editor.model.count())] == list(models)
    assert editor.model.currentText() == models[0]  # empty box: the first model is picked
    assert "1 model(s) from 127.0.0.1" in editor.models_status_text
    assert editor.fetch_button.isEnabled() and editor.fetch_button.text() == "Fetch models"

    editor.model.setEditText("my-own-name")  # free text stays possible and is kept
    assert _fetch(qtbot, editor) == models
    assert editor.model.currentText() == "my-own-name"


def test_test_connection_reports_latency_and_a_refused_key_in_plain_words(
    qtbot: Any, editor: AgentEditorDialog, keyed_server: str
) -> None:
    _a_llamacpp_server(editor, keyed_server)
    editor.api_key.setText(SERVER_KEY)
    report = _test(qtbot, editor)
    assert report.ok and report.reachable and report.auth_ok
    assert report.latency_ms is not None and report.latency_ms > 0
    assert f"in {report.latency_ms:.0f} ms" in editor.test_result_text
    assert "1 model(s) available" in editor.test_result_text
    assert editor.test_result.property("tone") == "ok"

    editor.api_key.setText("sk-wrong-key-000000")
    assert editor.test_result_text == ""  # an older result does not stand for new settings
    report = _test(qtbot, editor)
    assert report.reachable and report.auth_ok is False and not report.ok
    assert "refused the key" in editor.test_result_text
    assert "sk-wrong" not in editor.test_result_text
    assert editor.test_result.property("tone") == "error"

    assert _fetch(qtbot, editor) is None  # the same refusal, under the model field
    assert editor.models_status_text and "sk-wrong" not in editor.models_status_text
    assert editor.models_status.property("tone") == "error"


def test_test_connection_to_a_closed_port_says_it_could_not_reach_it(
    qtbot: Any, editor: AgentEditorDialog
) -> None:
    _choose(editor.kind, "openai-compatible")
    editor.base_url.setText(f"http://127.0.0.1:{closed_port()}/v1")
    report = _test(qtbot, editor)
    assert not report.reachable and not report.ok and report.latency_ms is None
    assert editor.test_result_text.startswith("Could not reach the server")
    assert "127.0.0.1" in editor.test_result_text
    assert editor.test_result.property("tone") == "error"
    assert editor.test_button.isEnabled()


# keys stay with their host ---------------------------------------------------------------------
def _model_list_server() -> FaultServer:
    """Stands in for a remote OpenAI-compatible service (a second provider host): answers every
    GET /models with one model and records each request's headers, so a test can see which
    Authorization header, if any, reached it."""
    body = json.dumps({"object": "list", "data": [{"id": "remote-model"}]}).encode()

    def reply(_request: Recorded) -> Reply:
        return Reply(body=body, content_type="application/json", chunked=False)

    return FaultServer(reply)


def _edit_keyed_agent(
    qtbot: Any, services: Any, name: str, base_url: str, model: str = "remote-model"
) -> tuple[Agent, AgentEditorDialog]:
    """A saved OpenAI-compatible agent on ``base_url`` whose key, OLD_KEY, is in the keyring
    (skips without a Secret Service), open in the editor."""
    if not services.secrets.available:
        pytest.skip("no Secret Service in this environment")
    agent = services.agents.create(
        Agent(name=name, kind="openai-compatible", model=model, base_url=base_url),
        api_key=OLD_KEY,
    )
    return agent, _editor(qtbot, services, agent)


def _auth_headers(server: FaultServer) -> list[str | None]:
    return [r.headers.get("authorization") for r in server.requests]


def test_moving_an_agent_to_another_host_asks_for_its_key_and_never_sends_the_old_one(
    qtbot: Any, services: Any, qloop: Any
) -> None:
    with _model_list_server() as old_host, _model_list_server() as new_host:
        agent, dialog = _edit_keyed_agent(qtbot, services, "Hosted", f"{old_host.url}/v1")
        assert not dialog.key_reentry_needed and dialog.key_note_text == ""
        # Control: on its own host the saved key is used (so the check below can fail).
        assert _fetch(qtbot, dialog) == ("remote-model",)
        assert _auth_headers(old_host) == [f"Bearer {OLD_KEY}"]

        # 127.0.0.1 -> localhost: the same machine, but another host name, hence another host.
        dialog.base_url.setText(f"http://localhost:{new_host.port}/v1")
        assert dialog.key_reentry_needed
        assert dialog.key_note_text == (
            "This agent now points at localhost; enter its API key "
            "(the old key is not sent to another host)"
        )
        assert dialog.key_note.objectName() == "FieldWarning"
        assert _fetch(qtbot, dialog) == ("remote-model",)
        assert _test(qtbot, dialog).ok
        assert _auth_headers(new_host) == [None, None]

        dialog.api_key.setText(NEW_KEY)
        assert _fetch(qtbot, dialog) == ("remote-model",)
        assert _auth_headers(new_host)[-1] == f"Bearer {NEW_KEY}"

        dialog.api_key.clear()
        assert _save(qtbot, dialog)
        saved = services.agents.get(agent.id)
        assert saved.base_url == f"http://localhost:{new_host.port}/v1"
        assert saved.key_ref != agent.key_ref
        assert services.agents.api_key(saved) is None  # the new host has no key yet
        assert services.agents.api_key(agent) == OLD_KEY  # the old endpoint keeps its own
        every_header = [h for r in new_host.requests for h in r.headers.values()]
        assert not any(OLD_KEY in h for h in every_header)


def test_same_host_on_another_port_keeps_using_and_carries_the_saved_key(
    qtbot: Any, services: Any, qloop: Any
) -> None:
    with _model_list_server() as first, _model_list_server() as second:
        agent, dialog = _edit_keyed_agent(qtbot, services, "Moved port", first.url, model="m")
        dialog.base_url.setText(second.url)  # 127.0.0.1 still: only the port changed
        assert not dialog.key_reentry_needed and dialog.key_note_text == ""
        assert _fetch(qtbot, dialog) == ("remote-model",)
        assert _auth_headers(second) == [f"Bearer {OLD_KEY}"]
        assert _save(qtbot, dialog)
        saved = services.agents.get(agent.id)
        assert saved.key_ref != agent.key_ref  # another endpoint ...
        assert services.agents.api_key(saved) == OLD_KEY  # ... with the key carried over


def test_moving_from_https_to_plain_http_on_the_same_host_asks_for_the_key_again(
    qtbot: Any, services: Any, qloop: Any
) -> None:
    agent = services.agents.create(
        Agent(name="TLS", kind="openai-compatible", model="m", base_url="https://10.0.0.5/v1"),
        api_key=None,
    )
    dialog = _editor(qtbot, services, agent)
    dialog.base_url.setText("http://10.0.0.5/v1")
    assert dialog.key_reentry_needed
    assert "not sent unencrypted" in dialog.key_note_text
    assert dialog.http_warning_shown


# stall timeout and CA bundle -------------------------------------------------------------------
def test_stall_timeout_and_ca_bundle_show_field_messages_and_save(
    qtbot: Any, editor: AgentEditorDialog, services: Any, tmp_path: Path
) -> None:
    _choose(editor.kind, "openai-compatible")
    _choose(editor.preset, "vllm")
    editor.name.setText("vLLM box")
    editor.model.setEditText("qwen")
    editor.stall_timeout.setText("soon")
    editor.ca_bundle.setText(str(tmp_path / "missing.pem"))
    assert not _save(qtbot, editor)
    assert "must be a number" in editor.error_text("stall_timeout_s")
    assert "does not exist" in editor.error_text("ca_bundle")

    editor.stall_timeout.setText("0")
    assert not _save(qtbot, editor)
    assert "between 1 and 3,600 seconds" in editor.error_text("stall_timeout_s")

    assert editor.fetch_models() is None  # the same checks guard "Fetch models"
    assert "between 1 and 3,600" in editor.error_text("stall_timeout_s")
    assert editor.models_status_text == "Fix the marked fields first."

    tls = make_tls_files(tmp_path)
    editor.stall_timeout.setText("15")
    editor.ca_bundle.setText(str(tls.ca_pem))
    assert _save(qtbot, editor)
    saved = services.agents.by_name("vLLM box")
    assert saved is not None
    assert (saved.stall_timeout_s, saved.ca_bundle) == (15.0, str(tls.ca_pem))

    reopened = _editor(qtbot, services, saved)
    assert reopened.stall_timeout.text() == "15"
    assert reopened.ca_bundle.text() == str(tls.ca_pem)


def test_the_ca_bundle_is_what_lets_fetch_models_trust_a_private_https_server(
    qtbot: Any, editor: AgentEditorDialog, tmp_path: Path
) -> None:
    """The private-CA server stands in for a company's internal gateway (self-hosted vLLM or
    LiteLLM behind a certificate from an in-house CA)."""
    tls = make_tls_files(tmp_path)
    body = json.dumps({"data": [{"id": "internal-model"}]}).encode()
    reply = Reply(body=body, content_type="application/json", chunked=False)
    with FaultServer(reply, tls=tls.server_context()) as server:
        _choose(editor.kind, "openai-compatible")
        editor.base_url.setText(f"{server.url}/v1")
        assert _fetch(qtbot, editor) is None
        assert "certificate" in editor.models_status_text.lower()

        editor.ca_bundle.setText(str(tls.ca_pem))
        assert _fetch(qtbot, editor) == ("internal-model",)


# saving off the GUI thread ---------------------------------------------------------------------
class SlowKeyring(keyring.backend.KeyringBackend):
    """Stands in for a Secret Service that takes its time (a keyring daemon waking up, a busy
    D-Bus, an unlock prompt): ``set_password`` blocks until the test lets it go, and records
    the thread it ran on."""

    priority = 1  # type: ignore[assignment]  # a real (non-file) backend as far as SecretStore knows

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.threads: list[threading.Thread] = []
        self.stored: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.stored.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.threads.append(threading.current_thread())
        self.entered.set()
        # Bounded: were this called on the GUI thread, the test fails instead of hanging.
        self.release.wait(timeout=10)
        self.stored[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.stored.pop((service, username), None)


@pytest.fixture
def slow_keyring_services(simi_home: Any) -> Iterator[tuple[Services, SlowKeyring]]:
    backend = SlowKeyring()
    svc = Services.open(AppPaths.from_env(), secrets=SecretStore(backend))
    yield svc, backend
    backend.release.set()
    svc.close()


def test_saving_writes_the_key_off_the_gui_thread_and_the_dialog_stays_responsive(
    qtbot: Any, slow_keyring_services: tuple[Services, SlowKeyring], qloop: Any
) -> None:
    services, backend = slow_keyring_services
    dialog = _editor(qtbot, services)
    _choose(dialog.kind, "openai")
    dialog.name.setText("Slow keyring")
    dialog.model.setEditText("gpt-4o-mini")
    dialog.api_key.setText("sk-slow-keyring-31337")

    with qtbot.waitSignal(dialog.save_finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(backend.entered.is_set, timeout=WAIT_MS)
        # The keyring is blocked right now; the GUI thread still runs timers and paints.
        ticked: list[bool] = []
        QTimer.singleShot(0, lambda: ticked.append(True))
        qtbot.waitUntil(lambda: bool(ticked), timeout=WAIT_MS)
        assert not backend.release.is_set()
        assert dialog.saving
        assert dialog.save_button.text() == "Saving…" and not dialog.save_button.isEnabled()
        assert dialog.save_status.text() == "Saving…"
        dialog.reject()  # Escape / Cancel while the store is written: the dialog stays
        assert dialog.isVisible()
        backend.release.set()
    assert finished.args == [True]
    assert backend.threads and backend.threads[0] is not threading.main_thread()
    assert dialog.result() == QDialog.DialogCode.Accepted
    saved = services.agents.by_name("Slow keyring")
    assert saved is not None and dialog.saved_agent == saved
    assert services.agents.api_key(saved) == "sk-slow-keyring-31337"
