"""How much memory a local agent's model will need, shown live in the agent editor.

Built on the Qt-free ``desktop.local.memory.estimate``; the GGUF header is read once per file
(path + mtime + size, ``desktop.local.catalog.InfoCache``), off the GUI thread when a loop
runs, so changing n_ctx or the KV type re-estimates in microseconds. The llama.cpp build and
its devices (``desktop.local.gpu.detect``) are asked once, off the GUI thread too: the line
under the table names the GPU the GPU column means and its free memory, and a note says when
the GPU part does not fit there (``desktop.local.gpu_text``). An empty GPU layers field is
estimated as saving fills it (``desktop.local.memory.gpu_layers_for``: all when they fit).
"""

from __future__ import annotations

import asyncio
import logging
import os
from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from desktop.local.catalog import InfoCache, ModelFileError, ModelInfo
from desktop.local.context_size import automatic_n_ctx, available_ram
from desktop.local.gpu import Device, GpuSupport, detect
from desktop.local.gpu_text import free_gpu_memory, gpu_column_text, gpu_shortfall, real_gpus
from desktop.local.memory import MemoryEstimate, estimate, format_bytes, gpu_layers_for
from desktop.local.starter import resolve_model_path
from desktop.ui.kit.async_door import loop_running, run_blocking, start
from desktop.ui.kit.widgets import plain, rich_label

log = logging.getLogger("simi.ui.memory")

_ROWS = (("Weights", "weights"), ("KV cache", "kv"), ("Compute", "compute"), ("Total", "total"))


def _int(value: int | str | None, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, int):
        return value
    text = value.strip().split()[0] if value.strip() else ""
    try:
        return int(text)
    except ValueError:
        return default


def _layers(value: int | str | None) -> int | None:
    """The GPU layers field: None when empty (automatic: saving fills it), else its number
    (0 for text that is not one: validation says so)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _int(value, 0)


def _automatic_note(est: MemoryEstimate, devices: tuple[Device, ...]) -> str:
    """What an empty GPU layers field gives, and why."""
    if est.gpu_layers:
        return f"GPU layers automatic: all {est.gpu_layers} fit the GPU."
    if not real_gpus(devices):
        why = "no GPU with memory of its own"
    elif free_gpu_memory(devices) is None:
        why = "the GPU does not say its free memory"
    else:
        why = "the whole model does not fit the GPU's free memory"
    return f"GPU layers automatic: none ({why})."


def _system_ram() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class MemoryEstimateView(QWidget):
    """Weights / KV cache / compute buffers, in RAM and on the GPU, for the fields as typed.

    ``gpu``: the llama.cpp build and its devices (``detect()`` off the GUI thread when not
    given; tests pass figures).

    Signals: estimate_changed(object): the new ``MemoryEstimate``, or None when there is none
    (no file, unreadable file; ``message`` says why).
    """

    estimate_changed = Signal(object)

    def __init__(
        self,
        cache: InfoCache | None = None,
        gpu: GpuSupport | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("MemoryEstimateView")
        self._cache = cache or InfoCache()
        self._gpu = gpu
        self._args: tuple[str | None, int, str | None, int | None] | None = None
        self._pending: asyncio.Task[object] | None = None
        self._flash_attn = False
        self.current: MemoryEstimate | None = None
        self.info: ModelInfo | None = None
        self.message = ""

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.title = QLabel("Memory estimate")
        self.title.setObjectName("MemoryEstimateTitle")
        layout.addWidget(self.title)
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(1)
        for col, head in enumerate(("", "RAM", "GPU")):
            label = rich_label(f"<b>{head}</b>" if head else "")
            label.setAlignment(Qt.AlignmentFlag.AlignRight)
            grid.addWidget(label, 0, col)
        self.cells: dict[tuple[str, str], QLabel] = {}
        for row, (name, key) in enumerate(_ROWS, start=1):
            grid.addWidget(plain(QLabel(name)), row, 0)
            for col, where in enumerate(("ram", "gpu"), start=1):
                cell = rich_label("–")  # the app's figures; a total in bold
                cell.setAlignment(Qt.AlignmentFlag.AlignRight)
                cell.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
                self.cells[(key, where)] = cell
                grid.addWidget(cell, row, col)
        layout.addLayout(grid)
        self.gpu_label = plain(QLabel(""))  # which GPU the GPU column means, its free memory
        self.gpu_label.setObjectName("MemoryEstimateGpu")
        self.gpu_label.setWordWrap(True)
        self.gpu_label.hide()
        layout.addWidget(self.gpu_label)
        self.notes = plain(QLabel(""))  # about the model's file
        self.notes.setObjectName("MemoryEstimateNotes")
        self.notes.setWordWrap(True)
        layout.addWidget(self.notes)

    # public ----------------------------------------------------------------------------------
    def update_for(
        self,
        model_path: str | None,
        n_ctx: int | str | None,
        kv_type: str | None,
        n_gpu_layers: int | str | None,
        *,
        flash_attn: bool = False,
    ) -> None:
        """Re-estimate for these field values (raw line-edit text is fine: "4096", "-1"; an
        empty GPU layers field is what saving gives: all when they fit the GPU, else none).
        ``flash_attn`` drops the attention-score buffer from the compute estimate."""
        self._flash_attn = flash_attn
        resolved = resolve_model_path(model_path.strip()) if model_path else None
        path = str(resolved) if resolved else None
        # an empty context field: 0, the automatic size (worked out once the header is read)
        args = (path, max(0, _int(n_ctx, 0)), kv_type or "f16", _layers(n_gpu_layers))
        self._args = args
        if path is None:
            self._show(None, None, "Choose a model file to see how much memory it needs.")
            return
        hit = self._cache.peek(path)
        if (hit is None or self._gpu is None) and loop_running():  # the build: asked once
            self._show_reading()
            if self._pending is None or self._pending.done():
                self._pending = start(self._read(path), name="memory-estimate-read")
            return
        self._render(hit if hit is not None else self._read_now(path))

    # internals -------------------------------------------------------------------------------
    def _read_now(self, path: str) -> ModelInfo | ModelFileError:
        try:
            return self._cache.get(path)
        except ModelFileError as exc:
            return exc

    async def _read(self, path: str) -> None:
        result = await run_blocking(self._read_now, path)
        if self._gpu is None:
            self._gpu = await run_blocking(detect)  # with its devices: their names, memory
        if self._args is not None and self._args[0] == path:
            self._render(result)
        elif self._args is not None:  # the path changed while reading: read that one next
            self.update_for(*self._args)

    def _render(self, result: ModelInfo | ModelFileError) -> None:
        assert self._args is not None
        _path, n_ctx, kv_type, layers = self._args
        if isinstance(result, ModelFileError):
            self._show(None, None, result.user_message)
            return
        if not n_ctx:  # what saving the agent with the field empty gives it (/proc: µs)
            n_ctx = automatic_n_ctx(result, available_ram())
        if self._gpu is None:  # no loop ran to ask it off the GUI thread
            self._gpu = detect(with_devices=False)
        offload = self._gpu.gpu_offload
        devices = self._gpu.devices
        automatic = layers is None
        try:
            if layers is None:  # what saving the agent with the field empty gives it
                free = free_gpu_memory(devices)
                layers = gpu_layers_for(
                    result, n_ctx, offload, free, kv_type, flash_attn=self._flash_attn
                )
            est = estimate(
                result, n_ctx, kv_type, layers, flash_attn=self._flash_attn, gpu_offload=offload
            )
        except ValueError as exc:
            self._show(None, result, str(exc))
            return
        notes = []
        if result.context_length and n_ctx > result.context_length:
            notes.append(
                f"n_ctx {n_ctx:,} is beyond the {result.context_length:,} tokens the model "
                "was trained on; replies may degrade past that."
            )
        if layers and not offload:
            notes.append("This llama.cpp build is CPU-only: n_gpu_layers is ignored.")
        elif automatic and offload:
            notes.append(_automatic_note(est, devices))
        elif est.gpu_layers:
            notes.append(f"{est.gpu_layers} of {est.block_count + 1} layers on the GPU.")
        shortfall = gpu_shortfall(est.vram, devices) if offload else ""
        if shortfall:
            notes.append(shortfall)
        ram = _system_ram()
        if ram and est.ram > 0.9 * ram:
            notes.append(f"That is more than this computer's {format_bytes(ram)} of RAM.")
        if result.template_note:
            notes.append(f"{result.name}: {result.template_note}.")
        self._show(est, result, " ".join(notes))

    def _show_reading(self) -> None:
        for cell in self.cells.values():
            cell.setText("…")
        self.notes.setText("Reading the model header…")

    def _show(self, est: MemoryEstimate | None, info: ModelInfo | None, message: str) -> None:
        self.current, self.info, self.message = est, info, message
        values: dict[tuple[str, str], int | None] = {}
        if est is not None:
            values = {
                ("weights", "ram"): est.weights_cpu,
                ("weights", "gpu"): est.weights_gpu,
                ("kv", "ram"): est.kv_cpu,
                ("kv", "gpu"): est.kv_gpu,
                ("compute", "ram"): est.compute_cpu,
                ("compute", "gpu"): est.compute_gpu,
                ("total", "ram"): est.ram,
                ("total", "gpu"): est.vram,
            }
        for key, cell in self.cells.items():
            value = values.get(key)
            text = "–" if value is None or (key[1] == "gpu" and not value) else format_bytes(value)
            cell.setText(f"<b>{escape(text)}</b>" if key[0] == "total" else escape(text))
        self.notes.setText(message)
        gpu_line = gpu_column_text(self._gpu) if est is not None else ""
        self.gpu_label.setText(gpu_line)
        self.gpu_label.setVisible(bool(gpu_line))
        self.estimate_changed.emit(est)
