"""Create or edit an agent: every field validated by ``AgentService.validate``, with the
message shown in red under its field; the dialog stays open until the agent is valid.

Keyring calls (``AgentService.create/update`` with a key) run directly in the Save handler.
Secret Service answers in milliseconds when unlocked; a locked keyring may show its own
unlock prompt, which is modal anyway. Moving them behind an async door is a later step.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
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
    QVBoxLayout,
    QWidget,
)

from desktop.chat.agents import DEFAULT_BASE_URLS, KIND_LABELS, AgentService, is_plain_http_remote
from desktop.llm.errors import SecretsUnavailable, ValidationError
from desktop.local.starter import resolve_model_path
from desktop.settings.secrets import SecretStore
from desktop.store.agents import KV_TYPES, PROVIDER_KINDS, Agent

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
LABEL_WIDTH_PX = 120
PLAIN_HTTP_WARNING = (
    "This address uses plain http:// to another machine: the API key and your messages "
    "travel unencrypted. Use https:// unless you trust the network."
)


class AgentEditorDialog(QDialog):
    """New / edit agent. After ``accept()``, ``saved_agent`` holds the stored agent."""

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
        self.setWindowTitle("Edit agent" if agent and agent.id else "New agent")
        self.setModal(True)
        self.resize(600, 760)

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
        self.base_url = QLineEdit()
        self.base_url_warning = QLabel(PLAIN_HTTP_WARNING)
        self.base_url_warning.setObjectName("FieldWarning")
        self.base_url_warning.setWordWrap(True)
        self.base_url_warning.hide()
        self._add(basics, "base_url", "Base URL", self.base_url, extra=self.base_url_warning)
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText(
            "Leave empty to keep the saved key"
            if agent and agent.id
            else "Paste the key; it is kept in the system keyring"
        )
        self.memory_key = QCheckBox("Keep the key in memory for this run only")
        self.memory_key.setToolTip(secrets.unavailable_message())
        self.memory_key.setVisible(not secrets.available)
        self._add(basics, "api_key", "API key", self.api_key, extra=self.memory_key)
        self.model = QLineEdit()
        self._add(basics, "model", "Model", self.model)
        column.addWidget(basics)

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
        self.flash_attn = QCheckBox("Flash attention")
        self._add(self.local_group, "flash_attn", "", self.flash_attn)
        self.kv_type = QComboBox()
        for kv in KV_TYPES:
            self.kv_type.addItem(kv, kv)
        self._add(self.local_group, "kv_type", "KV cache type", self.kv_type)
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

        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.setContentsMargins(20, 8, 20, 16)
        self.save_button = buttons.button(QDialogButtonBox.StandardButton.Save)
        self.save_button.setObjectName("PrimaryButton")
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save)
        buttons.rejected.connect(self.reject)
        outer.addWidget(buttons)

        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.base_url.textChanged.connect(self._check_http)
        self._load(agent or Agent(name="", kind="local"))
        self._kind_changed()

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
        error = QLabel()
        error.setObjectName("FieldError")
        error.setWordWrap(True)
        error.hide()
        layout.addWidget(error)
        self._errors[field] = error
        form.addRow(label, box)
        label_widget = form.labelForField(box)
        if label_widget is not None:
            label_widget.setMinimumWidth(LABEL_WIDTH_PX)  # one column across the groups
        self._rows[field] = (form, box)

    def _load(self, agent: Agent) -> None:
        self.name.setText(agent.name)
        index = self.kind.findData(agent.kind)
        self.kind.setCurrentIndex(max(0, index))
        default_url = DEFAULT_BASE_URLS.get(agent.kind)
        self.base_url.setText("" if agent.base_url == default_url else agent.base_url or "")
        self.model.setText(agent.model)
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
        self.flash_attn.setChecked(agent.flash_attn)
        self.kv_type.setCurrentIndex(max(0, self.kv_type.findData(agent.kv_type or "f16")))

    # behaviour -----------------------------------------------------------------------------
    @property
    def current_kind(self) -> str:
        return str(self.kind.currentData())

    def _kind_changed(self) -> None:
        kind = self.current_kind
        local = kind == "local"
        for field in ("base_url", "api_key"):
            form, box = self._rows[field]
            form.setRowVisible(box, not local)
        self.local_group.setVisible(local)
        self.base_url.setPlaceholderText(BASE_URL_PLACEHOLDERS.get(kind, "https://…"))
        self.model.setPlaceholderText(MODEL_PLACEHOLDERS.get(kind, ""))
        self._check_http()

    def _check_http(self) -> None:
        url = self.base_url.text().strip()
        self.base_url_warning.setVisible(self.current_kind != "local" and is_plain_http_remote(url))

    @property
    def http_warning_shown(self) -> bool:
        return not self.base_url_warning.isHidden()

    def _browse(self) -> None:
        current = resolve_model_path(self.model_path.text().strip() or None)
        start = str(current.parent) if current else str(Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose a GGUF model", start, "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.model_path.setText(path)

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
        n_ctx = n_gpu_layers = n_threads = None
        if local:
            n_ctx = number("n_ctx", self.n_ctx, True, "Context size")
            n_gpu_layers = number("n_gpu_layers", self.n_gpu_layers, True, "GPU layers")
            n_threads = number("n_threads", self.n_threads, True, "Threads")
        stop = tuple(line for line in self.stop.toPlainText().split("\n") if line != "")

        model = self.model.text().strip()
        model_path = self.model_path.text().strip() or None if local else None
        if local and not model and model_path:
            resolved = resolve_model_path(model_path)
            model = resolved.stem if resolved else ""

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
            model_path=model_path,
            n_ctx=n_ctx,
            n_gpu_layers=n_gpu_layers,
            n_threads=n_threads,
            flash_attn=self.flash_attn.isChecked() if local else False,
            kv_type=str(self.kv_type.currentData()) if local else None,
        )
        return agent, errors

    def save(self) -> bool:
        """Validate and store; on failure show messages and keep the dialog open."""
        agent, errors = self.collect()
        errors = {**self._agents.validate(agent), **errors}
        key = self.api_key.text().strip() or None
        if agent.is_local:
            key = None
        if errors:
            self.show_errors(errors)
            return False
        if key and not self._secrets.available:
            if not self.memory_key.isChecked():
                self.memory_key.show()
                self.show_errors({"api_key": self._secrets.unavailable_message()})
                return False
            self._secrets.allow_memory_fallback()
        try:
            if agent.id is None:
                saved = self._agents.create(agent, api_key=key)
            else:
                saved = self._agents.update(agent, api_key=key)
        except ValidationError as exc:
            self.show_errors(exc.fields)
            return False
        except SecretsUnavailable as exc:
            self.memory_key.show()
            self.show_errors({"api_key": exc.user_message})
            return False
        self.show_errors({})
        self.saved_agent = saved
        self.accept()
        return True


def _show(value: object) -> str:
    return "" if value is None else str(value)
