"""Create or edit an agent: every field validated by ``AgentService.validate``, with the
message shown in red under its field; the dialog stays open until the agent is valid.

Remote agents get a preset picker (``desktop.llm.presets``), a model box that can list the
endpoint's models, and a "Test connection" button. Both network calls run as coroutines on the
qasync loop with a throwaway provider built from the fields as they are now (saved or not).

Keys: an API key belongs to the host of its endpoint. When an existing agent is pointed at
another host, its saved key is neither used for "Fetch models"/"Test connection" nor carried to
the new endpoint; the editor asks for the new host's key instead.

Blocking calls (the keyring: reading a key, saving an agent with its key, asking whether a
keyring exists at all) go through ``desktop.ui.async_door.run_blocking``; the dialog shows
"Saving…" meanwhile and keeps painting.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.agents import DEFAULT_BASE_URLS, KIND_LABELS, AgentService, is_plain_http_remote
from desktop.errors import UserError, ValidationError
from desktop.llm.connection import ConnectionReport, test_connection
from desktop.llm.presets import Preset, create_provider, presets_for
from desktop.llm.presets import preset as preset_by_id
from desktop.llm.provider import Provider
from desktop.local.starter import resolve_model_path
from desktop.settings.secrets import SecretStore, SecretsUnavailable
from desktop.store.agents import KV_TYPES, PROVIDER_KINDS, Agent
from desktop.ui import theme
from desktop.ui.async_door import run_blocking, start

BASE_URL_PLACEHOLDERS = {
    "openai-compatible": "http://localhost:8080/v1",
    **{kind: f"{url}  (default)" for kind, url in DEFAULT_BASE_URLS.items()},
}
MODEL_PLACEHOLDERS = {
    "local": "Name shown in stats (defaults to the file name)",
    "openai": "e.g. gpt-4o-mini",
    "openai-compatible": "e.g. llama-3.1-8b-instruct",
    "anthropic": "e.g. claude-3-5-sonnet-latest",
    "gemini": "e.g. gemini-1.5-flash",
}
# The preset a kind starts with when the person picks the kind itself.
DEFAULT_PRESETS = {
    "openai": "openai",
    "openai-compatible": "custom",
    "anthropic": "anthropic",
    "gemini": "gemini",
}
DEFAULT_STALL_TIMEOUT_S = 60.0
LABEL_WIDTH_PX = 120
PLAIN_HTTP_WARNING = (
    "This address uses plain http:// to another machine: the API key and your messages "
    "travel unencrypted. Use https:// unless you trust the network."
)


class WrapLabel(QLabel):
    """A word-wrapped label whose height follows the width it really gets.

    A form row takes its field's ``sizeHint``, and for a wrapped QLabel that height is computed
    for a much narrower guessed width: a two-line message got four lines of room, centred.
    """

    def __init__(self, text: str = "", object_name: str = "") -> None:
        super().__init__(text)
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        if object_name:
            self.setObjectName(object_name)

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        parent = self.parentWidget()
        # The parent's width is settled before ours (a form field's column); ours may not be.
        width = parent.contentsRect().width() if parent is not None else self.width()
        if width > 40:
            hint.setHeight(self.heightForWidth(width))
        return hint

    def minimumSizeHint(self) -> QSize:
        # Never squeezed to one line: the scroll area scrolls instead.
        return QSize(super().minimumSizeHint().width(), self.sizeHint().height())

    def hasHeightForWidth(self) -> bool:
        # Otherwise QLayout::totalSizeHint asks for the height at the *hint's* width (a narrow
        # guess), and the form row keeps that height.
        return False

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.updateGeometry()


@dataclass(frozen=True, slots=True)
class EndpointFields:
    """What "Fetch models" and "Test connection" connect to: the fields as typed, not saved.

    ``typed_key``: the key in the key field; ``saved_key_agent``: the stored agent whose key
    may be used instead (only when the host is unchanged), read through the async door.
    """

    kind: str
    base_url: str | None
    host: str
    label: str
    typed_key: str | None
    saved_key_agent: Agent | None
    stall_timeout_s: float
    ca_bundle: str | None


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
    models_fetched = Signal(object)
    connection_tested = Signal(object)
    keyring_checked = Signal(bool)

    def __init__(
        self,
        agents: AgentService,
        secrets: SecretStore,
        agent: Agent | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._agents = agents
        self._secrets = secrets
        self._original = agent
        self.saved_agent: Agent | None = None
        self._syncing = False
        self._save_task: asyncio.Task[bool] | None = None
        self._fetch_task: asyncio.Task[tuple[str, ...] | None] | None = None
        self._test_task: asyncio.Task[ConnectionReport | None] | None = None
        self._probe_task: asyncio.Task[bool] | None = None
        self.setWindowTitle("Edit agent" if agent and agent.id else "New agent")
        self.setModal(True)
        self.resize(620, 780)

        self._errors: dict[str, QLabel] = {}
        self._rows: dict[str, tuple[QFormLayout, QWidget]] = {}

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
        outer.addWidget(scroll, 1)

        # basics ------------------------------------------------------------------------------
        basics = self._group("Agent")
        self.name = QLineEdit()
        self.name.setPlaceholderText("e.g. Fast local helper")
        self._add(basics, "name", "Name", self.name)
        self.kind = QComboBox()
        for kind in PROVIDER_KINDS:
            self.kind.addItem(KIND_LABELS.get(kind, kind), kind)
        self._add(basics, "kind", "Provider", self.kind)
        self.preset = QComboBox()
        self.preset.setToolTip("Fills in the service's usual address; you can still edit it.")
        self._add(basics, "preset", "Service", self.preset)
        self.base_url = QLineEdit()
        self.base_url_warning = WrapLabel(PLAIN_HTTP_WARNING, "FieldWarning")
        self.base_url_warning.hide()
        self._add(basics, "base_url", "Base URL", self.base_url, extra=self.base_url_warning)
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_note = WrapLabel(object_name="DialogNote")
        self.key_note.hide()
        self.memory_key = QCheckBox("Keep the key in memory for this run only")
        self.memory_key.setToolTip(secrets.unavailable_message())
        self.memory_key.hide()  # shown once the keyring probe says there is none
        key_extra = QWidget()
        key_extra_layout = QVBoxLayout(key_extra)
        key_extra_layout.setContentsMargins(0, 0, 0, 0)
        key_extra_layout.setSpacing(4)
        key_extra_layout.addWidget(self.key_note)
        key_extra_layout.addWidget(self.memory_key)
        self._add(basics, "api_key", "API key", self.api_key, extra=key_extra)

        model_row = QWidget()
        model_layout = QHBoxLayout(model_row)
        model_layout.setContentsMargins(0, 0, 0, 0)
        model_layout.setSpacing(8)
        self.model = QComboBox()
        self.model.setEditable(True)  # any name may be typed; the list is a convenience
        self.model.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.model.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model.setMinimumContentsLength(12)
        self.fetch_button = QPushButton("Fetch models")
        self.fetch_button.setToolTip("Ask the server which models it offers")
        self.fetch_button.clicked.connect(self.fetch_models)
        model_layout.addWidget(self.model, 1)
        model_layout.addWidget(self.fetch_button)
        self.models_status = WrapLabel()
        self.models_status.hide()
        self._add(basics, "model", "Model", model_row, extra=self.models_status)

        test_row = QWidget()
        test_layout = QHBoxLayout(test_row)
        test_layout.setContentsMargins(0, 0, 0, 0)
        test_layout.setSpacing(8)
        self.test_button = QPushButton("Test connection")
        self.test_button.setToolTip("List the server's models once: reachability, key, latency")
        self.test_button.clicked.connect(self.test_connection)
        test_layout.addWidget(self.test_button)
        test_layout.addStretch(1)
        self.test_result = WrapLabel()
        self.test_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.test_result.hide()
        for row in (model_row, test_row):
            row.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self._add(basics, "connection", "", test_row, extra=self.test_result)
        column.addWidget(basics)

        # remote connection options -----------------------------------------------------------
        self.remote_group = self._group("Connection")
        self.stall_timeout = self._line(f"{DEFAULT_STALL_TIMEOUT_S:.0f}  (default)")
        self.stall_timeout.setToolTip(
            "Give up when the server sends nothing for this many seconds (1 – 3,600)."
        )
        self._add(self.remote_group, "stall_timeout_s", "Stall timeout (s)", self.stall_timeout)
        ca_row = QWidget()
        ca_layout = QHBoxLayout(ca_row)
        ca_layout.setContentsMargins(0, 0, 0, 0)
        ca_layout.setSpacing(8)
        self.ca_bundle = QLineEdit()
        self.ca_bundle.setPlaceholderText("Optional: PEM file of a private CA")
        self.ca_bundle.setToolTip(
            "Trust servers whose certificate comes from your own certificate authority; "
            "verification stays on."
        )
        self.ca_browse = QPushButton("Browse…")
        self.ca_browse.clicked.connect(self._browse_ca)
        ca_layout.addWidget(self.ca_bundle, 1)
        ca_layout.addWidget(self.ca_browse)
        self._add(self.remote_group, "ca_bundle", "CA bundle", ca_row)
        column.addWidget(self.remote_group)

        # local -------------------------------------------------------------------------------
        self.local_group = self._group("Local model (llama.cpp)")
        path_row = QWidget()
        path_layout = QHBoxLayout(path_row)
        path_layout.setContentsMargins(0, 0, 0, 0)
        path_layout.setSpacing(8)
        self.model_path = QLineEdit()
        self.model_path.setPlaceholderText("/path/to/model.gguf")
        self.browse = QPushButton("Browse…")
        self.browse.clicked.connect(self._browse)
        path_layout.addWidget(self.model_path, 1)
        path_layout.addWidget(self.browse)
        self._add(self.local_group, "model_path", "Model file", path_row)
        self.n_ctx = self._line("2048")
        self._add(self.local_group, "n_ctx", "Context (tokens)", self.n_ctx)
        self.n_gpu_layers = self._line("0  (-1 = all layers)")
        self._add(self.local_group, "n_gpu_layers", "GPU layers", self.n_gpu_layers)
        self.n_threads = self._line("automatic")
        self._add(self.local_group, "n_threads", "Threads", self.n_threads)
        self.n_batch = self._line("512")
        self._add(self.local_group, "n_batch", "Batch size", self.n_batch)
        self.main_gpu = self._line("0  (first GPU)")
        self._add(self.local_group, "main_gpu", "Main GPU", self.main_gpu)
        self.flash_attn = QCheckBox("Flash attention")
        self._add(self.local_group, "flash_attn", "", self.flash_attn)
        self.kv_type = QComboBox()
        for kv in KV_TYPES:
            self.kv_type.addItem(kv, kv)
        self._add(self.local_group, "kv_type", "KV cache type", self.kv_type)
        # MEMORY ESTIMATE SLOT: the local-engine work adds its MemoryEstimateView here with
        # ``set_memory_view(widget)`` (or ``self.memory_slot.addWidget`` + show the host).
        # The row stays hidden while empty so it adds no gap.
        self.memory_slot_host = QWidget()
        self.memory_slot = QVBoxLayout(self.memory_slot_host)
        self.memory_slot.setContentsMargins(0, 0, 0, 0)
        self.memory_slot.setSpacing(4)
        local_form = self.local_group.layout()
        assert isinstance(local_form, QFormLayout)
        local_form.addRow(self.memory_slot_host)
        local_form.setRowVisible(self.memory_slot_host, False)
        column.addWidget(self.local_group)

        # prompt and sampling -----------------------------------------------------------------
        sampling = self._group("Prompt and sampling")
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("You are a helpful assistant.")
        self.system_prompt.setFixedHeight(90)
        self._add(sampling, "system_prompt", "System prompt", self.system_prompt)
        self.temperature = self._line("provider default (0 – 2)")
        self._add(sampling, "temperature", "Temperature", self.temperature)
        self.top_p = self._line("provider default (0 – 1)")
        self._add(sampling, "top_p", "Top-p", self.top_p)
        self.max_tokens = self._line("provider default")
        self._add(sampling, "max_tokens", "Max tokens", self.max_tokens)
        self.seed = self._line("random")
        self._add(sampling, "seed", "Seed", self.seed)
        self.stop = QPlainTextEdit()
        self.stop.setPlaceholderText("One stop sequence per line")
        self.stop.setFixedHeight(64)
        self._add(sampling, "stop", "Stop sequences", self.stop)
        column.addWidget(sampling)

        self.general_error = QLabel()
        self.general_error.setObjectName("FieldError")
        self.general_error.setWordWrap(True)
        self.general_error.hide()
        column.addWidget(self.general_error)
        column.addStretch(1)

        footer = QWidget()
        footer_layout = QHBoxLayout(footer)
        footer_layout.setContentsMargins(20, 8, 20, 16)
        footer_layout.setSpacing(12)
        self.save_status = QLabel()
        self.save_status.setObjectName("DialogNote")
        footer_layout.addWidget(self.save_status, 1)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.save_button = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        self.save_button.setObjectName("PrimaryButton")
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save)
        self.cancel_button = self.buttons.button(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.rejected.connect(self.reject)
        footer_layout.addWidget(self.buttons)
        outer.addWidget(footer)

        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.preset.currentIndexChanged.connect(self._preset_changed)
        self.base_url.textChanged.connect(self._endpoint_edited)
        self.api_key.textChanged.connect(self._endpoint_edited)
        self.ca_bundle.textChanged.connect(self._endpoint_edited)
        self._load(agent or Agent(name="", kind="local"))
        self._probe_task = start(self._probe_keyring(), name="agent editor: keyring probe")

    # building ------------------------------------------------------------------------------
    @staticmethod
    def _line(placeholder: str) -> QLineEdit:
        edit = QLineEdit()
        edit.setPlaceholderText(placeholder)
        return edit

    @staticmethod
    def _group(title: str) -> QGroupBox:
        group = QGroupBox(title)
        form = QFormLayout(group)
        form.setContentsMargins(12, 12, 12, 12)
        form.setHorizontalSpacing(12)
        form.setVerticalSpacing(8)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        return group

    def _add(
        self,
        group: QGroupBox,
        field: str,
        label: str,
        widget: QWidget,
        extra: QWidget | None = None,
    ) -> None:
        form = group.layout()
        assert isinstance(form, QFormLayout)
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(widget)
        if extra is not None:
            layout.addWidget(extra)
        error = WrapLabel(object_name="FieldError")
        error.hide()
        layout.addWidget(error)
        self._errors[field] = error
        form.addRow(label, box)
        label_widget = form.labelForField(box)
        if label_widget is not None:
            label_widget.setMinimumWidth(LABEL_WIDTH_PX)  # one column across the groups
        self._rows[field] = (form, box)

    def set_memory_view(self, widget: QWidget) -> None:
        """Embed the local engine's memory estimate in the local group (shown for local)."""
        self.memory_slot.addWidget(widget)
        form = self.local_group.layout()
        assert isinstance(form, QFormLayout)
        form.setRowVisible(self.memory_slot_host, True)

    @contextlib.contextmanager
    def _sync(self) -> Iterator[None]:
        """Programmatic changes to kind/preset: their change slots do nothing meanwhile."""
        was = self._syncing
        self._syncing = True
        try:
            yield
        finally:
            self._syncing = was

    def _load(self, agent: Agent) -> None:
        with self._sync():
            self.name.setText(agent.name)
            index = self.kind.findData(agent.kind)
            self.kind.setCurrentIndex(max(0, index))
            if not agent.is_local:
                self._fill_presets(self.current_kind, _initial_preset(agent))
            self.base_url.setText(agent.base_url or "")
        self.model.setEditText(agent.model)
        self.stall_timeout.setText(_show_number(agent.stall_timeout_s))
        self.ca_bundle.setText(agent.ca_bundle or "")
        self.system_prompt.setPlainText(agent.system_prompt)
        self.temperature.setText(_show(agent.temperature))
        self.top_p.setText(_show(agent.top_p))
        self.max_tokens.setText(_show(agent.max_tokens))
        self.seed.setText(_show(agent.seed))
        self.stop.setPlainText("\n".join(agent.stop))
        self.model_path.setText(agent.model_path or "")
        self.n_ctx.setText(_show(agent.n_ctx))
        self.n_gpu_layers.setText(_show(agent.n_gpu_layers))
        self.n_threads.setText(_show(agent.n_threads))
        self.n_batch.setText(_show(agent.n_batch))
        self.main_gpu.setText(_show(agent.main_gpu))
        self.flash_attn.setChecked(agent.flash_attn)
        self.kv_type.setCurrentIndex(max(0, self.kv_type.findData(agent.kv_type or "f16")))
        self._update_visibility()
        self._endpoint_edited()

    # kind, preset, URL ---------------------------------------------------------------------
    @property
    def current_kind(self) -> str:
        return str(self.kind.currentData())

    @property
    def current_preset(self) -> Preset | None:
        """The chosen preset, or None for local agents."""
        if self.current_kind == "local":
            return None
        preset_id = self.preset.currentData()
        return preset_by_id(str(preset_id)) if preset_id else None

    def _fill_presets(self, kind: str, select_id: str | None) -> None:
        with self._sync():
            self.preset.clear()
            for p in presets_for(kind):  # type: ignore[arg-type]
                self.preset.addItem(p.name, p.id)
            index = self.preset.findData(select_id) if select_id else -1
            if index < 0:
                index = self.preset.findData(DEFAULT_PRESETS.get(kind, "custom"))
            self.preset.setCurrentIndex(max(0, index))

    def _kind_changed(self) -> None:
        if self._syncing:
            return
        kind = self.current_kind
        if kind != "local":
            before = self.preset.currentData()
            # The kind and the preset agree: the OpenAI preset is the ``openai`` kind, every
            # other preset of the shared list is ``openai-compatible``.
            keep = before if before and preset_by_id(str(before)).kind == kind else None
            self._fill_presets(kind, keep or DEFAULT_PRESETS.get(kind))
            chosen = self.current_preset
            if chosen is not None and chosen.id != before:
                self._apply_preset_url(chosen)
        self._update_visibility()
        self._endpoint_edited()

    def _preset_changed(self) -> None:
        if self._syncing:
            return
        chosen = self.current_preset
        if chosen is None:
            return
        if chosen.kind != self.current_kind:
            with self._sync():
                self.kind.setCurrentIndex(self.kind.findData(chosen.kind))
            self._update_visibility()
        self._apply_preset_url(chosen)
        self._endpoint_edited()

    def _apply_preset_url(self, chosen: Preset) -> None:
        if chosen.base_url:
            self.base_url.setText(chosen.base_url)
        elif self.base_url.text().strip().rstrip("/") in {
            p.base_url for p in presets_for("openai") if p.base_url
        }:
            self.base_url.clear()  # "Custom URL": do not leave another service's address
        if chosen.id == "custom":
            self.base_url.setFocus()

    def _update_visibility(self) -> None:
        kind = self.current_kind
        local = kind == "local"
        for field in ("preset", "base_url", "api_key", "connection"):
            form, box = self._rows[field]
            form.setRowVisible(box, not local)
        self.fetch_button.setVisible(not local)
        self.local_group.setVisible(local)
        self.remote_group.setVisible(not local)
        self.base_url.setPlaceholderText(BASE_URL_PLACEHOLDERS.get(kind, "https://…"))
        self.model.lineEdit().setPlaceholderText(MODEL_PLACEHOLDERS.get(kind, ""))
        if local:
            self.models_status.hide()
            self.test_result.hide()

    def effective_base_url(self) -> str | None:
        """The URL the agent will use: the field, or the kind's default when it is empty."""
        text = self.base_url.text().strip().rstrip("/")
        return text or DEFAULT_BASE_URLS.get(self.current_kind)

    def _endpoint_edited(self) -> None:
        """The address, key or TLS settings changed: older results no longer apply."""
        url = self.base_url.text().strip()
        self.base_url_warning.setVisible(self.current_kind != "local" and is_plain_http_remote(url))
        self._update_key_note()
        for task in (self._fetch_task, self._test_task):
            if task is not None and not task.done():
                task.cancel()
        self.test_result.hide()

    @property
    def http_warning_shown(self) -> bool:
        return not self.base_url_warning.isHidden()

    # keys ----------------------------------------------------------------------------------
    def _saved_key_endpoint(self) -> Agent | None:
        """The stored agent whose endpoint may hold a key (None for new and local agents)."""
        original = self._original
        if original is None or original.id is None or original.is_local:
            return None
        return original if original.key_ref else None

    def saved_key_follows(self) -> bool:
        """Whether the saved key may be used with the URL as typed: same host, and not moved
        from https:// to plain http:// (which would send it in clear)."""
        original = self._saved_key_endpoint()
        if original is None:
            return False
        return _key_may_follow(original.base_url, self.effective_base_url())

    @property
    def key_reentry_needed(self) -> bool:
        """An existing agent now points somewhere its saved key must not go."""
        return self._saved_key_endpoint() is not None and not self.saved_key_follows()

    def _update_key_note(self) -> None:
        if self.current_kind == "local":
            return
        chosen = self.current_preset
        host = _host(self.effective_base_url()) or "the new address"
        editing = self._saved_key_endpoint() is not None
        note = ""
        warn = False
        if self.key_reentry_needed:
            warn = True
            old = self._saved_key_endpoint()
            if _host(old.base_url if old else None) == _host(self.effective_base_url()):
                note = (
                    f"This agent now uses plain http:// to {host}; enter its API key again "
                    "(the old key is not sent unencrypted)"
                )
            else:
                note = (
                    f"This agent now points at {host}; enter its API key "
                    "(the old key is not sent to another host)"
                )
            if chosen is not None and chosen.local:
                note += f". {chosen.name} usually needs none: leave it empty."
            self.api_key.setPlaceholderText(f"API key for {host}")
        elif chosen is not None and chosen.local:
            note = f"{chosen.name} runs on your own machine and needs no API key; leave it empty."
            self.api_key.setPlaceholderText("Not needed")
        elif chosen is not None and chosen.id == "custom" and not editing:
            note = "Only if the server asks for one."
            self.api_key.setPlaceholderText("Optional; kept in the system keyring")
        else:
            self.api_key.setPlaceholderText(
                "Leave empty to keep the saved key"
                if editing
                else "Paste the key; it is kept in the system keyring"
            )
        self.key_note.setText(note)
        _restyle(self.key_note, "FieldWarning" if warn else "DialogNote")
        self.key_note.setVisible(bool(note))

    @property
    def key_note_text(self) -> str:
        return self.key_note.text() if not self.key_note.isHidden() else ""

    async def _probe_keyring(self) -> bool:
        # ``SecretStore.available`` asks D-Bus whether Secret Service runs: not on this thread.
        available = await run_blocking(lambda: self._secrets.available)
        if not available or self._secrets.memory_only:
            self.memory_key.show()
        self.keyring_checked.emit(available)
        return available

    # fetching models and testing the connection --------------------------------------------
    def endpoint_fields(self) -> EndpointFields | None:
        """The endpoint as typed now; None (with messages shown) when it cannot be used."""
        agent, errors = self.collect()
        checked = self._agents.validate(agent)
        fields = ("kind", "base_url", "stall_timeout_s", "ca_bundle")
        problems = {f: m for f, m in {**checked, **errors}.items() if f in fields}
        for field in fields:
            label = self._errors.get(field)
            if label is not None:
                label.setText(problems.get(field, ""))
                label.setVisible(field in problems)
        if problems:
            return None
        url = self.effective_base_url()
        chosen = self.current_preset
        name = self.name.text().strip()
        if chosen is not None and chosen.id != "custom":
            label = chosen.name
        else:
            label = name or KIND_LABELS.get(self.current_kind, "The server")
        return EndpointFields(
            kind=self.current_kind,
            base_url=url,
            host=_host(url) or "the server",
            label=label,
            typed_key=self.api_key.text().strip() or None,
            saved_key_agent=self._saved_key_endpoint() if self.saved_key_follows() else None,
            stall_timeout_s=agent.stall_timeout_s or DEFAULT_STALL_TIMEOUT_S,
            ca_bundle=agent.ca_bundle,
        )

    async def _provider_for(self, spec: EndpointFields) -> Provider:
        key = spec.typed_key
        if key is None and spec.saved_key_agent is not None:
            key = await run_blocking(self._agents.api_key, spec.saved_key_agent)
        return create_provider(
            spec.kind,
            base_url=spec.base_url,
            api_key=key,
            label=spec.label,
            stall_timeout_s=spec.stall_timeout_s,
            ca_bundle=spec.ca_bundle,
        )

    def fetch_models(self) -> asyncio.Task[tuple[str, ...] | None] | None:
        """Start listing the endpoint's models (slot of "Fetch models"); returns the task."""
        spec = self.endpoint_fields()
        if spec is None:
            self._say(self.models_status, "Fix the marked fields first.", "error")
            self.models_fetched.emit(None)
            return None
        if self._fetch_task is not None and not self._fetch_task.done():
            self._fetch_task.cancel()
        self._fetch_task = start(self._fetch(spec), name="agent editor: fetch models")
        return self._fetch_task

    async def _fetch(self, spec: EndpointFields) -> tuple[str, ...] | None:
        self.fetch_button.setEnabled(False)
        self.fetch_button.setText("Loading…")
        self._say(self.models_status, f"Loading models from {spec.host}…", "muted")
        result: tuple[str, ...] | None = None
        try:
            provider = await self._provider_for(spec)
            try:
                result = tuple(await provider.list_models())
            finally:
                await provider.aclose()
        except ValidationError as exc:
            self._say(self.models_status, "; ".join(exc.fields.values()), "error")
        except UserError as exc:
            self._say(self.models_status, exc.user_message, "error")
        else:
            self._show_models(result, spec.host)
        finally:
            self.fetch_button.setEnabled(True)
            self.fetch_button.setText("Fetch models")
        self.models_fetched.emit(result)
        return result

    def _show_models(self, models: tuple[str, ...], host: str) -> None:
        typed = self.model.currentText()
        self.model.clear()
        self.model.addItems(list(models))
        self.model.setEditText(typed or (models[0] if models else ""))
        if models:
            self._say(
                self.models_status,
                f"{len(models)} model(s) from {host}: pick one from the list or type a name.",
                "muted",
            )
        else:
            self._say(
                self.models_status,
                f"{host} lists no models. Load or pull a model on the server, or type its name.",
                "muted",
            )

    def test_connection(self) -> asyncio.Task[ConnectionReport | None] | None:
        """Start "Test connection" (its button's slot); returns the task."""
        spec = self.endpoint_fields()
        if spec is None:
            self._say(self.test_result, "Fix the marked fields first.", "error")
            return None
        if self._test_task is not None and not self._test_task.done():
            self._test_task.cancel()
        self._test_task = start(self._test(spec), name="agent editor: test connection")
        return self._test_task

    async def _test(self, spec: EndpointFields) -> ConnectionReport | None:
        self.test_button.setEnabled(False)
        self._say(self.test_result, f"Testing {spec.host}…", "muted")
        report: ConnectionReport | None = None
        try:
            provider = await self._provider_for(spec)
            try:
                report = await test_connection(provider, label=spec.label)
            finally:
                await provider.aclose()
        except ValidationError as exc:
            self._say(self.test_result, "; ".join(exc.fields.values()), "error")
        except UserError as exc:  # the keyring could not be read
            self._say(self.test_result, exc.user_message, "error")
        finally:
            self.test_button.setEnabled(True)
        if report is not None:
            self._say(self.test_result, _describe(report), "ok" if report.ok else "error")
            if report.ok and report.models:
                self._show_models(report.models, spec.host)
            self.connection_tested.emit(report)
        return report

    @property
    def test_result_text(self) -> str:
        return self.test_result.text() if not self.test_result.isHidden() else ""

    @property
    def models_status_text(self) -> str:
        return self.models_status.text() if not self.models_status.isHidden() else ""

    def _say(self, label: QLabel, text: str, tone: str) -> None:
        """Inline status text: ``ok`` green, ``error`` red, ``muted`` grey."""
        colors = theme.current_colors()
        color = {
            "ok": "#4ac26b" if colors.dark else "#1a7f37",
            "error": colors.error_text,
        }.get(tone, colors.muted)
        label.setProperty("tone", tone)
        label.setStyleSheet(f"color: {color}; font-size: 12px;")
        label.setText(text)
        label.setVisible(bool(text))

    # files ---------------------------------------------------------------------------------
    def _browse(self) -> None:
        current = resolve_model_path(self.model_path.text().strip() or None)
        start_dir = str(current.parent) if current else str(Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose a GGUF model", start_dir, "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.model_path.setText(path)

    def _browse_ca(self) -> None:
        current = self.ca_bundle.text().strip()
        start_dir = str(Path(current).expanduser().parent) if current else str(Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Choose a CA bundle",
            start_dir,
            "PEM certificates (*.pem *.crt *.cer);;All files (*)",
        )
        if path:
            self.ca_bundle.setText(path)

    # errors --------------------------------------------------------------------------------
    def error_text(self, field: str) -> str:
        label = self._errors.get(field)
        return label.text() if label is not None and not label.isHidden() else ""

    def show_errors(self, errors: dict[str, str]) -> None:
        for field, label in self._errors.items():
            message = errors.get(field, "")
            label.setText(message)
            label.setVisible(bool(message))
        unplaced = [m for f, m in errors.items() if f not in self._errors]
        self.general_error.setText("\n".join(unplaced))
        self.general_error.setVisible(bool(unplaced))
        first = next((f for f in self._errors if errors.get(f)), None)
        if first is not None:
            _form, box = self._rows[first]
            box.setFocus()

    # collecting ----------------------------------------------------------------------------
    def collect(self) -> tuple[Agent, dict[str, str]]:
        """The agent described by the fields, and messages for fields that do not parse."""
        errors: dict[str, str] = {}
        kind = self.current_kind
        local = kind == "local"

        def number(field: str, edit: QLineEdit, as_int: bool, what: str) -> Any:
            text = edit.text().strip().replace(",", "") if as_int else edit.text().strip()
            if not text:
                return None
            try:
                value = int(text) if as_int else float(text)
            except ValueError:
                errors[field] = f"{what} must be a {'whole number' if as_int else 'number'}."
                return None
            if not as_int and not math.isfinite(value):
                errors[field] = f"{what} must be a number."
                return None
            return value

        temperature = number("temperature", self.temperature, False, "Temperature")
        top_p = number("top_p", self.top_p, False, "Top-p")
        max_tokens = number("max_tokens", self.max_tokens, True, "Max tokens")
        seed = number("seed", self.seed, True, "Seed")
        n_ctx = n_gpu_layers = n_threads = n_batch = main_gpu = None
        stall_timeout_s = None
        if local:
            n_ctx = number("n_ctx", self.n_ctx, True, "Context size")
            n_gpu_layers = number("n_gpu_layers", self.n_gpu_layers, True, "GPU layers")
            n_threads = number("n_threads", self.n_threads, True, "Threads")
            n_batch = number("n_batch", self.n_batch, True, "Batch size")
            main_gpu = number("main_gpu", self.main_gpu, True, "Main GPU")
        else:
            stall_timeout_s = number(
                "stall_timeout_s", self.stall_timeout, False, "The stall timeout (seconds)"
            )
        stop = tuple(line for line in self.stop.toPlainText().split("\n") if line != "")

        model = self.model.currentText().strip()
        model_path = self.model_path.text().strip() or None if local else None
        if local and not model and model_path:
            resolved = resolve_model_path(model_path)
            model = resolved.stem if resolved else ""
        chosen = self.current_preset

        base = self._original or Agent(name="", kind=kind)
        agent = base.with_changes(
            name=self.name.text(),
            kind=kind,
            model=model,
            base_url=None if local else (self.base_url.text().strip() or None),
            system_prompt=self.system_prompt.toPlainText(),
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            seed=seed,
            stop=stop,
            preset=None if local or chosen is None else chosen.id,
            stall_timeout_s=None if local else stall_timeout_s,
            ca_bundle=None if local else (self.ca_bundle.text().strip() or None),
            model_path=model_path,
            n_ctx=n_ctx,
            n_gpu_layers=n_gpu_layers,
            n_threads=n_threads,
            n_batch=n_batch,
            main_gpu=main_gpu,
            flash_attn=self.flash_attn.isChecked() if local else False,
            kv_type=str(self.kv_type.currentData()) if local else None,
        )
        return agent, errors

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
        key = None if agent.is_local else (self.api_key.text().strip() or None)
        carry_from = self._saved_key_endpoint() if self.saved_key_follows() else None
        self._save_task = start(
            self._save(agent, key, self.memory_key.isChecked(), carry_from),
            name="agent editor: save",
        )
        return self._save_task

    async def _save(
        self, agent: Agent, key: str | None, memory_ok: bool, carry_from: Agent | None
    ) -> bool:
        self._set_saving(True)
        saved: Agent | None = None
        try:
            saved = await run_blocking(self._store, agent, key, memory_ok, carry_from)
        except ValidationError as exc:
            self.show_errors(exc.fields)
        except SecretsUnavailable as exc:
            self.memory_key.show()
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
        self, agent: Agent, key: str | None, memory_ok: bool, carry_from: Agent | None
    ) -> Agent:
        """On a worker thread: the keyring check, the insert/update and the key write."""
        if key and not self._secrets.available:
            if not memory_ok:
                raise SecretsUnavailable(self._secrets.unavailable_message())
            self._secrets.allow_memory_fallback()
        if agent.id is None:
            return self._agents.create(agent, api_key=key)
        saved = self._agents.update(agent, api_key=key)
        # Same host, new endpoint (another path, port or kind): the key follows, unless the
        # endpoint it lands on already has one of its own.
        if (
            key is None
            and carry_from is not None
            and saved.key_ref is not None
            and saved.key_ref != carry_from.key_ref
            and not self._agents.api_key(saved)
        ):
            old_key = self._agents.api_key(carry_from)
            if old_key:
                self._secrets.set(saved.key_ref, old_key)
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
        for task in (self._fetch_task, self._test_task, self._probe_task):
            if task is not None and not task.done():
                task.cancel()
        super().done(result)


def _initial_preset(agent: Agent) -> str | None:
    """The stored preset when it fits the kind; else one whose URL matches; else None."""
    kind = agent.kind
    candidates = [p for p in presets_for(kind) if p.kind == kind]  # type: ignore[arg-type]
    if agent.preset and any(p.id == agent.preset for p in candidates):
        return agent.preset
    url = (agent.base_url or "").rstrip("/")
    for p in candidates:
        if p.base_url and p.base_url == url:
            return p.id
    return None


def _host(url: str | None) -> str | None:
    if not url:
        return None
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host.lower() if host else None


def _key_may_follow(old_url: str | None, new_url: str | None) -> bool:
    old_host, new_host = _host(old_url), _host(new_url)
    if old_host is None or old_host != new_host:
        return False
    downgraded = urlsplit(old_url or "").scheme == "https" and urlsplit(new_url or "").scheme == (
        "http"
    )
    return not downgraded


def _describe(report: ConnectionReport) -> str:
    if report.ok:
        return report.message
    if report.reachable and report.auth_ok is False:
        latency = f" in {report.latency_ms:.0f} ms" if report.latency_ms is not None else ""
        return f"Reached the server{latency}, but it refused the key: {report.message}"
    if report.reachable:
        return f"The server answered, but: {report.message}"
    return f"Could not reach the server: {report.message}"


def _restyle(label: QLabel, object_name: str) -> None:
    if label.objectName() != object_name:
        label.setObjectName(object_name)
        label.style().unpolish(label)
        label.style().polish(label)


def _show_number(value: float | None) -> str:
    """``30.0`` reads as ``30``; ``2.5`` stays."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else str(value)


def _show(value: object) -> str:
    return "" if value is None else str(value)


def attach_memory_estimate(dialog: AgentEditorDialog, view: QWidget) -> None:
    """Embed a ``MemoryEstimateView`` and keep it live as the local load fields change."""

    def update() -> None:
        view.update_for(  # type: ignore[attr-defined]
            dialog.model_path.text(),
            dialog.n_ctx.text(),
            dialog.kv_type.currentData(),
            dialog.n_gpu_layers.text(),
            flash_attn=dialog.flash_attn.isChecked(),
        )

    dialog.set_memory_view(view)
    dialog.model_path.textChanged.connect(update)
    dialog.n_ctx.textChanged.connect(update)
    dialog.n_gpu_layers.textChanged.connect(update)
    dialog.kv_type.currentIndexChanged.connect(update)
    dialog.flash_attn.toggled.connect(update)
    update()
