"""Create or edit an agent: every field validated by ``AgentService.validate``, with the
message shown in red under its field; the dialog stays open until the agent is valid.

The dialog lays out the sections and saves. The endpoint section (presets, URL, key,
connection options) is ``desktop.ui.agents.endpoint``; "Fetch models" and "Test connection"
are ``desktop.ui.agents.probe``; the local load parameters are ``desktop.ui.agents.local``
(the vision projector ``desktop.ui.agents.vision``, checked again as the agent is stored);
rows, error labels and status text are ``desktop.ui.agents.form``. Kinds come from the
registry (``desktop.chat.kinds``); typed numbers parse, and keys follow their host, by
``desktop.chat.agent_rules``, as in the CLI.

Given the MCP servers (``tools``), a "Tools" section (``desktop.ui.agents.tools``) chooses the
servers and tools the agent may use; they are stored with the agent when it saves. Given the
knowledge service (``knowledge``), a "Knowledge" section (``desktop.ui.agents.knowledge``)
chooses the collections the agent searches, stored the same way.

Blocking calls (the keyring: reading a key, saving an agent with its key, asking whether a
keyring exists at all) go through ``desktop.ui.kit.async_door.run_blocking``; the dialog shows
"Saving…" meanwhile and keeps painting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.agent_rules import LOCAL_FIELDS, parse_numbers, stop_lines
from desktop.chat.agents import AgentService
from desktop.chat.kinds import all_kinds, find_kind
from desktop.chat.knowledge import KnowledgeService
from desktop.chat.tool_loop import ToolRunner
from desktop.errors import UserError, ValidationError
from desktop.llm.connection import ConnectionReport
from desktop.llm.presets import Preset
from desktop.settings.secrets import SecretStore, SecretsUnavailable
from desktop.store.agents import Agent
from desktop.store.knowledge import Collection
from desktop.ui.agents.endpoint import EndpointSection
from desktop.ui.agents.form import FieldForm, line, row, show_value
from desktop.ui.agents.knowledge import AgentKnowledgeSection
from desktop.ui.agents.local import LocalSection, attach_memory_estimate
from desktop.ui.agents.probe import EndpointFields, EndpointProbe
from desktop.ui.agents.tools import AgentToolsSection
from desktop.ui.agents.vision import check_on_save
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.widgets import plain

__all__ = ["AgentEditorDialog", "EndpointFields", "attach_memory_estimate"]

# Widgets of the sections the dialog shows under their own names (tests and the window use
# them as ``dialog.<name>``).
_ENDPOINT_WIDGETS = (
    "preset",
    "base_url",
    "base_url_warning",
    "api_key",
    "key_note",
    "memory_key",
    "stall_timeout",
    "ca_bundle",
    "ca_browse",
)
_PROBE_WIDGETS = ("fetch_button", "models_status", "test_button", "test_result")
_LOCAL_WIDGETS = (*LOCAL_FIELDS, "browse", "memory_slot", "memory_slot_host")


class AgentEditorDialog(QDialog):
    """New / edit agent. After a successful save, ``saved_agent`` holds the stored agent and
    the dialog is accepted.

    Signals:
        save_finished(bool): a save attempt ended (True: stored and accepted; False: the
            dialog shows why not). Emitted for every click on Save, valid or not.
        models_fetched(object): "Fetch models" ended; a tuple of model ids, or None when it
            failed (the reason is shown under the model field).
        connection_tested(object): "Test connection" ended, with its ``ConnectionReport``.
        keyring_checked(bool): whether a system keyring is available (probed off the GUI
            thread when the dialog opens).
    """

    save_finished = Signal(bool)

    def __init__(
        self,
        agents: AgentService,
        secrets: SecretStore,
        agent: Agent | None = None,
        parent: QWidget | None = None,
        *,
        tools: ToolRunner | None = None,
        knowledge: KnowledgeService | None = None,
    ) -> None:
        super().__init__(parent)
        self._agents = agents
        self._tools = tools
        self._secrets = secrets
        self._original = agent
        self.saved_agent: Agent | None = None
        self._save_task: asyncio.Task[bool] | None = None
        self.setWindowTitle("Edit agent" if agent and agent.id else "New agent")
        self.setModal(True)
        self.resize(620, 780)
        self._form = FieldForm()

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        content = QWidget()
        column = QVBoxLayout(content)
        column.setContentsMargins(20, 16, 20, 8)
        column.setSpacing(12)
        scroll.setWidget(content)
        content.setMaximumWidth(880)  # a maximised editor keeps rows a reader can follow
        scroll.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        outer.addWidget(scroll, 1)

        basics = self._form.group("Agent")
        self.name = line("e.g. Fast local helper")
        self._form.add(basics, "name", "Name", self.name)
        self.kind = QComboBox()
        for kind in all_kinds():
            self.kind.addItem(kind.label, kind.name)
        self._form.add(basics, "kind", "Provider", self.kind)
        self.model = QComboBox()
        self.model.setEditable(True)  # any name may be typed; the list is a convenience
        self.model.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.model.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model.setMinimumContentsLength(12)
        self.endpoint = EndpointSection(
            secrets,
            self._form,
            kind=self.kind,
            relayout=self._update_visibility,
            original=agent,
            parent=self,
            model=self.model,
        )
        self.endpoint.add_rows(basics)
        self.probe = EndpointProbe(
            agents, self._form, self.endpoint, model=self.model, name=self.name, typed=self.collect
        )
        self.probe.add_rows(basics)
        column.addWidget(basics)
        self.remote_group = self.endpoint.add_connection_group()
        column.addWidget(self.remote_group)
        self.local_section = LocalSection(self._form, self)
        self.local_group = self.local_section.group
        column.addWidget(self.local_group)
        for name in _ENDPOINT_WIDGETS:
            setattr(self, name, getattr(self.endpoint, name))
        for name in _PROBE_WIDGETS:
            setattr(self, name, getattr(self.probe, name))
        for name in _LOCAL_WIDGETS:
            setattr(self, name, getattr(self.local_section, name))
        # The sections' signals, under the dialog's names.
        self.models_fetched = self.probe.models_fetched
        self.connection_tested = self.probe.connection_tested
        self.keyring_checked = self.endpoint.keyring_checked

        column.addWidget(self._sampling_group())
        self.tools_section = AgentToolsSection(tools, agent) if tools is not None else None
        if self.tools_section is not None:
            column.addWidget(self.tools_section.group)
        self.knowledge_section = (
            AgentKnowledgeSection(knowledge, agent) if knowledge is not None else None
        )
        if self.knowledge_section is not None:
            column.addWidget(self.knowledge_section.group)
        self.general_error = plain(QLabel())
        self.general_error.setObjectName("FieldError")
        self.general_error.setWordWrap(True)
        self.general_error.hide()
        column.addWidget(self.general_error)
        column.addStretch(1)
        outer.addWidget(self._footer())

        self.kind.currentIndexChanged.connect(self._kind_changed)
        self._load(agent or Agent(name="", kind="local"))
        self.endpoint.start_keyring_probe()

    # building ------------------------------------------------------------------------------
    def _sampling_group(self) -> QWidget:
        sampling = self._form.group("Prompt and sampling")
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("You are a helpful assistant.")
        self.system_prompt.setFixedHeight(90)
        self._form.add(sampling, "system_prompt", "System prompt", self.system_prompt)
        self.temperature = line("provider default (0 – 2)")
        self.top_p = line("provider default (0 – 1)")
        self.max_tokens = line("provider default")
        self.seed = line("random")
        # Agent field -> its edit and row label (numbers parse with desktop.chat.agent_rules).
        self._sampling_numbers: dict[str, tuple[QLineEdit, str]] = {
            "temperature": (self.temperature, "Temperature"),
            "top_p": (self.top_p, "Top-p"),
            "max_tokens": (self.max_tokens, "Max tokens"),
            "seed": (self.seed, "Seed"),
        }
        for field, (edit, label) in self._sampling_numbers.items():
            self._form.add(sampling, field, label, edit)
        self.stop = QPlainTextEdit()
        self.stop.setPlaceholderText("One stop sequence per line")
        self.stop.setFixedHeight(64)
        self._form.add(sampling, "stop", "Stop sequences", self.stop)
        return sampling

    def _footer(self) -> QWidget:
        self.save_status = plain(QLabel())
        self.save_status.setObjectName("DialogNote")
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.save_button = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        self.save_button.setObjectName("PrimaryButton")
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save)
        self.cancel_button = self.buttons.button(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.rejected.connect(self.reject)
        return row(self.save_status, self.buttons, spacing=12, margins=(20, 8, 20, 16))

    def set_memory_view(self, widget: QWidget) -> None:
        """Embed the local engine's memory estimate in the local group (shown for local)."""
        self.local_section.set_memory_view(widget)

    def _load(self, agent: Agent) -> None:
        with self.endpoint.sync():
            self.name.setText(agent.name)
            self.kind.setCurrentIndex(max(0, self.kind.findData(agent.kind)))
            self.endpoint.load(agent)
        self.model.setEditText(agent.model)
        self.system_prompt.setPlainText(agent.system_prompt)
        for field, (edit, _label) in self._sampling_numbers.items():
            edit.setText(show_value(getattr(agent, field)))
        self.stop.setPlainText("\n".join(agent.stop))
        self.local_section.load(agent)
        self._update_visibility()
        self.endpoint.edited()

    # kind ----------------------------------------------------------------------------------
    @property
    def current_kind(self) -> str:
        return self.endpoint.current_kind

    @property
    def current_preset(self) -> Preset | None:
        """The chosen preset, or None for local agents."""
        return self.endpoint.current_preset

    def _kind_changed(self) -> None:
        if self.endpoint.syncing:
            return
        self.endpoint.kind_changed()
        self._update_visibility()
        self.endpoint.edited()

    def _update_visibility(self) -> None:
        kind = find_kind(self.current_kind)
        self.endpoint.show_for(kind)
        self.probe.show_for(kind)
        self.local_group.setVisible(kind is not None and not kind.remote)
        typed = self.model.lineEdit()
        assert typed is not None  # the model box is editable from the start
        typed.setPlaceholderText(kind.model_hint if kind else "")

    # the endpoint and probe sections, under the names the window and the tests use --------
    def effective_base_url(self) -> str | None:
        return self.endpoint.effective_base_url()

    def endpoint_fields(self) -> EndpointFields | None:
        return self.probe.endpoint_fields()

    def fetch_models(self) -> asyncio.Task[tuple[str, ...] | None] | None:
        return self.probe.fetch_models()

    def test_connection(self) -> asyncio.Task[ConnectionReport | None] | None:
        return self.probe.test_connection()

    @property
    def key_reentry_needed(self) -> bool:
        """An existing agent now points somewhere its saved key must not go."""
        return self.endpoint.key_left_behind() is not None

    @property
    def http_warning_shown(self) -> bool:
        return not self.endpoint.base_url_warning.isHidden()

    @property
    def key_note_text(self) -> str:
        return self.endpoint.key_note_text

    @property
    def test_result_text(self) -> str:
        return self.probe.test_result_text

    @property
    def models_status_text(self) -> str:
        return self.probe.models_status_text

    # errors --------------------------------------------------------------------------------
    def error_text(self, field: str) -> str:
        return self._form.error_text(field)

    def show_errors(self, errors: dict[str, str]) -> None:
        unplaced = self._form.show_errors(errors)
        self.general_error.setText("\n".join(unplaced))
        self.general_error.setVisible(bool(unplaced))

    # collecting ----------------------------------------------------------------------------
    def collect(self) -> tuple[Agent, dict[str, str]]:
        """The agent described by the fields, and messages for fields that do not parse.
        Only the side the kind uses (local load parameters, or the endpoint) is read."""
        kind = find_kind(self.current_kind)
        remote = kind is None or kind.remote
        texts = {f: edit.text() for f, (edit, _label) in self._sampling_numbers.items()}
        texts.update(self.endpoint.number_texts() if remote else self.local_section.number_texts())
        numbers, errors = parse_numbers(texts, remote=remote)
        changes: dict[str, Any] = {
            **numbers,
            **(self.endpoint.values() if remote else self.local_section.values()),
            "name": self.name.text(),
            "kind": self.current_kind,
            "model": self.model.currentText().strip(),
            "system_prompt": self.system_prompt.toPlainText(),
            "stop": stop_lines(self.stop.toPlainText()),
        }
        base = self._original or Agent(name="", kind=self.current_kind)
        return base.with_changes(**changes), errors

    # saving --------------------------------------------------------------------------------
    @property
    def saving(self) -> bool:
        return self._save_task is not None and not self._save_task.done()

    def save(self) -> asyncio.Task[bool] | None:
        """Validate now; store off the GUI thread. Returns the save task (None when the fields
        are invalid: the messages are already shown). ``save_finished`` tells the outcome."""
        if self._save_task is not None and not self._save_task.done():
            return self._save_task
        agent, errors = self.collect()
        errors = {**self._agents.validate(agent), **errors}
        if errors:
            self.show_errors(errors)
            self.save_finished.emit(False)
            return None
        kind = find_kind(agent.kind)
        key = self.endpoint.typed_key() if kind is not None and kind.remote else None
        allowed = self.tools_section.selection() if self.tools_section is not None else None
        searched = (
            self.knowledge_section.selection() if self.knowledge_section is not None else None
        )
        memory_ok = self.endpoint.memory_key.isChecked()
        self._save_task = start(
            self._save(partial(self._store, agent, key, memory_ok, allowed, searched)),
            name="agent editor: save",
        )
        return self._save_task

    async def _save(self, store: Callable[[], Agent]) -> bool:
        """``store`` on a worker thread (``_store``, its arguments given), then the outcome:
        the dialog closes, or says what stopped it."""
        self._set_saving(True)
        saved: Agent | None = None
        try:
            saved = await run_blocking(store)
        except ValidationError as exc:
            self.show_errors(exc.fields)
        except SecretsUnavailable as exc:
            self.endpoint.memory_key.show()
            self.show_errors({"api_key": exc.user_message})
        except UserError as exc:
            self.show_errors({"general": exc.user_message})
        finally:
            self._set_saving(False)
        if saved is None:
            self.save_finished.emit(False)
            return False
        self.show_errors({})
        self.saved_agent = saved
        self.accept()
        self.save_finished.emit(True)
        return True

    def _store(
        self,
        agent: Agent,
        key: str | None,
        memory_ok: bool,
        allowed: list[tuple[str, str]] | None = None,
        searched: list[Collection] | None = None,
    ) -> Agent:
        """On a worker thread: the keyring check, the insert/update and the key write (a saved
        key follows the agent to its new endpoint where ``AgentService.update`` allows it),
        then the tools it may use and the collections it searches. A local agent's vision
        projector is checked first (two GGUF headers)."""
        check_on_save(agent)
        if key and not self._secrets.available:
            if not memory_ok:
                raise SecretsUnavailable(self._secrets.unavailable_message())
            self._secrets.allow_memory_fallback()
        if agent.id is None:
            saved = self._agents.create(agent, api_key=key)
        else:
            saved = self._agents.update(agent, api_key=key)
        if allowed is not None and self._tools is not None and saved.id is not None:
            self._tools.tools.set_agent_tools(saved.id, allowed)
        if searched is not None and self.knowledge_section is not None and saved.id is not None:
            self.knowledge_section.save(saved.id, searched)
        return saved

    def _set_saving(self, saving: bool) -> None:
        self.save_button.setEnabled(not saving)
        self.cancel_button.setEnabled(not saving)
        self.save_button.setText("Saving…" if saving else "Save")
        self.save_status.setText("Saving…" if saving else "")

    def reject(self) -> None:
        if self.saving:  # the store is being written; closing now would hide the outcome
            return
        super().reject()

    def done(self, result: int) -> None:
        self.probe.cancel()
        self.endpoint.cancel()
        if self.tools_section is not None:
            self.tools_section.cancel()
        super().done(result)
