"""The agent editor's local section: the GGUF file, its vision projector (``vision.py``) and
llama.cpp load parameters, with room for the live memory estimate
(``attach_memory_estimate``).

The model file is an editable combo box: its list is the model library (name, quantization and
size; ``attach_model_picker`` fills it off the GUI thread), a path may still be typed or
chosen with Browse…, and what is stored is the file's path. ``model_path`` is the combo's line
edit, so the text is the path whichever way it got there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QStringListModel, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QCompleter,
    QFileDialog,
    QGroupBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.local.catalog import ModelEntry
from desktop.local.memory import format_bytes
from desktop.local.starter import resolve_model_path
from desktop.store.agents import KV_TYPES, Agent
from desktop.ui.agents.form import FieldForm, form_of, line, row, show_value
from desktop.ui.agents.vision import ProjectorField, library_projector


class LocalSection:
    """The "Local model (llama.cpp)" group: ``model_path`` (with Browse…), ``n_ctx``,
    ``n_gpu_layers``, ``n_threads``, ``n_batch``, ``main_gpu``, ``flash_attn``, ``kv_type``,
    and a hidden slot row that ``set_memory_view`` fills."""

    def __init__(self, form: FieldForm, parent: QWidget) -> None:
        self._parent = parent
        self.group: QGroupBox = form.group("Local model (llama.cpp)")
        self.model_picker = ModelPicker()
        self.model_path = self.model_picker.path_edit
        self.browse = QPushButton("Browse…")
        self.browse.clicked.connect(self._browse)
        self.projector = ProjectorField(self.model_path, parent)
        self.projector.known = library_projector(self.model_picker.entries_now)
        form.add(
            self.group,
            "model_path",
            "Model file",
            row(self.model_picker, self.browse),
            self.projector.status,  # "Sees images" / "Text only"
        )
        self.mmproj_path = self.projector.edit
        form.add(
            self.group,
            "mmproj_path",
            "Vision projector",
            row(self.mmproj_path, self.projector.browse),
        )

        def show_error(text: str) -> None:
            form.show_errors({"mmproj_path": text}, only=("mmproj_path",))

        self.projector.show_error = show_error
        self.n_ctx = line("automatic (from the model and memory)")
        # empty: all layers when the model fits the GPU's free memory, else none
        self.n_gpu_layers = line("automatic  (-1 = all, 0 = none)")
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
            "mmproj_path": self.projector.value(),
            "flash_attn": self.flash_attn.isChecked(),
            "kv_type": str(self.kv_type.currentData()),
        }

    def load(self, agent: Agent) -> None:
        self.model_path.setText(agent.model_path or "")
        self.projector.load(agent)
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


PATH_ROLE = Qt.ItemDataRole.UserRole


def picker_label(entry: ModelEntry) -> str:
    """How the library lists a file: "name · quantization · size" (the starter marked)."""
    name = Path(entry.path).name
    if entry.starter:
        name += " (starter)"
    if entry.info is None:
        return f"{name} · cannot be used"
    bits = [name, entry.info.quantization or "", format_bytes(entry.info.file_size)]
    return " · ".join(b for b in bits if b)


class ModelPicker(QComboBox):
    """An editable combo of the library's files. Choosing one puts its path in the line edit
    (``path_edit``); typing filters the paths that contain what was typed.

    Signal library_shown(): the list was filled (``set_entries``)."""

    library_shown = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ModelPicker")
        self.setEditable(True)
        self.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(12)
        edit = self.lineEdit()
        assert edit is not None
        self.path_edit = edit
        edit.setPlaceholderText("/path/to/model.gguf, or pick from the library")
        self._paths = QStringListModel(self)
        completer = QCompleter(self._paths, self)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        self.setCompleter(completer)
        self.entries: list[ModelEntry] = []
        self.activated.connect(self._chosen)

    def entries_now(self) -> list[ModelEntry]:
        """The library's files as last shown (read from any thread: a list replaced whole)."""
        return self.entries

    def set_entries(self, entries: Sequence[ModelEntry]) -> None:
        """The library's files, the usable ones; the typed text is kept."""
        text = self.path_edit.text()
        self.entries = [e for e in entries if e.info is not None]
        self.blockSignals(True)
        self.clear()
        for entry in self.entries:
            self.addItem(picker_label(entry), entry.path)
            self.setItemData(self.count() - 1, entry.path, Qt.ItemDataRole.ToolTipRole)
        self.setCurrentIndex(-1)
        self.blockSignals(False)
        self.path_edit.setText(text)
        self._paths.setStringList([e.path for e in self.entries])
        self.library_shown.emit()

    def choose(self, index: int) -> None:
        """Pick the library's ``index``-th file, as a click in the list does."""
        self.setCurrentIndex(index)
        self._chosen(index)

    def _chosen(self, index: int) -> None:
        path = self.itemData(index, PATH_ROLE)
        if isinstance(path, str) and path:
            self.path_edit.setText(path)  # the path is what is stored, not the label
            self.path_edit.setToolTip(path)


def attach_model_picker(
    dialog: Any, entries: Callable[[], list[ModelEntry]]
) -> asyncio.Task[None] | None:
    """List the library in the editor's model field: ``entries`` (blocking: it reads GGUF
    headers, from a cache) runs off the GUI thread; without a running loop it runs here."""
    from desktop.ui.kit.async_door import run_blocking, start

    picker: ModelPicker = dialog.local_section.model_picker

    async def fill() -> None:
        found = await run_blocking(entries)
        picker.set_entries(found)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        picker.set_entries(entries())
        return None
    return start(fill(), name="agent editor: model library")


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
