"""The agent editor's local section: the GGUF file and llama.cpp load parameters, with room
for the live memory estimate (``attach_memory_estimate``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGroupBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.local.starter import resolve_model_path
from desktop.store.agents import KV_TYPES, Agent
from desktop.ui.agent_form import FieldForm, form_of, line, row, show_value


class LocalSection:
    """The "Local model (llama.cpp)" group: ``model_path`` (with Browse…), ``n_ctx``,
    ``n_gpu_layers``, ``n_threads``, ``n_batch``, ``main_gpu``, ``flash_attn``, ``kv_type``,
    and a hidden slot row that ``set_memory_view`` fills."""

    def __init__(self, form: FieldForm, parent: QWidget) -> None:
        self._parent = parent
        self.group: QGroupBox = form.group("Local model (llama.cpp)")
        self.model_path = line("/path/to/model.gguf")
        self.browse = QPushButton("Browse…")
        self.browse.clicked.connect(self._browse)
        form.add(self.group, "model_path", "Model file", row(self.model_path, self.browse))
        self.n_ctx = line("automatic (from the model and memory)")
        self.n_gpu_layers = line("0  (-1 = all layers)")
        self.n_threads = line("automatic")
        self.n_batch = line("512")
        self.main_gpu = line("0  (first GPU)")
        # Agent field -> its edit and row label (numbers parse with desktop.chat.agent_rules).
        self.numbers = {
            "n_ctx": (self.n_ctx, "Context (tokens)"),
            "n_gpu_layers": (self.n_gpu_layers, "GPU layers"),
            "n_threads": (self.n_threads, "Threads"),
            "n_batch": (self.n_batch, "Batch size"),
            "main_gpu": (self.main_gpu, "Main GPU"),
        }
        for field, (edit, label) in self.numbers.items():
            form.add(self.group, field, label, edit)
        self.flash_attn = QCheckBox("Flash attention")
        form.add(self.group, "flash_attn", "", self.flash_attn)
        self.kv_type = QComboBox()
        for kv in KV_TYPES:
            self.kv_type.addItem(kv, kv)
        form.add(self.group, "kv_type", "KV cache type", self.kv_type)
        # The memory estimate's row stays hidden while empty so it adds no gap.
        self.memory_slot_host = QWidget()
        self.memory_slot = QVBoxLayout(self.memory_slot_host)
        self.memory_slot.setContentsMargins(0, 0, 0, 0)
        self.memory_slot.setSpacing(4)
        form_of(self.group).addRow(self.memory_slot_host)
        form_of(self.group).setRowVisible(self.memory_slot_host, False)

    def number_texts(self) -> dict[str, str]:
        """The numeric fields as typed, by ``Agent`` field name."""
        return {field: edit.text() for field, (edit, _label) in self.numbers.items()}

    def values(self) -> dict[str, Any]:
        """The non-numeric fields, as ``Agent`` changes."""
        return {
            "model_path": self.model_path.text().strip() or None,
            "flash_attn": self.flash_attn.isChecked(),
            "kv_type": str(self.kv_type.currentData()),
        }

    def load(self, agent: Agent) -> None:
        self.model_path.setText(agent.model_path or "")
        for field, (edit, _label) in self.numbers.items():
            edit.setText(show_value(getattr(agent, field)))
        self.flash_attn.setChecked(agent.flash_attn)
        self.kv_type.setCurrentIndex(max(0, self.kv_type.findData(agent.kv_type or "f16")))

    def set_memory_view(self, widget: QWidget) -> None:
        self.memory_slot.addWidget(widget)
        form_of(self.group).setRowVisible(self.memory_slot_host, True)

    def _browse(self) -> None:
        current = resolve_model_path(self.model_path.text().strip() or None)
        start_dir = str(current.parent) if current else str(Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self._parent, "Choose a GGUF model", start_dir, "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.model_path.setText(path)


def attach_memory_estimate(dialog: Any, view: QWidget) -> None:
    """Embed a ``MemoryEstimateView`` in an ``AgentEditorDialog`` and keep it live as the
    local load fields change."""
    local: LocalSection = dialog.local_section

    def update() -> None:
        view.update_for(  # type: ignore[attr-defined]
            local.model_path.text(),
            local.n_ctx.text(),
            local.kv_type.currentData(),
            local.n_gpu_layers.text(),
            flash_attn=local.flash_attn.isChecked(),
        )

    dialog.set_memory_view(view)
    local.model_path.textChanged.connect(update)
    local.n_ctx.textChanged.connect(update)
    local.n_gpu_layers.textChanged.connect(update)
    local.kv_type.currentIndexChanged.connect(update)
    local.flash_attn.toggled.connect(update)
    update()
