"""How much memory a local agent's model will need, shown live in the agent editor.

The figures and the notes are ``desktop.chat.memory_estimate.MemoryEstimator``'s (Qt-free):
the GGUF header is read once per file (path + mtime + size, the runtime's header cache), off
the GUI thread when a loop runs, so changing n_ctx or the KV type re-estimates in
microseconds. The llama.cpp build and its devices are asked once, off the GUI thread too: the
line under the table names the GPU the GPU column means and its free memory, and a note says
when the GPU part does not fit there. An empty GPU layers field is estimated as saving fills it
(all layers when they fit the GPU, else none).
"""

from __future__ import annotations

import asyncio
import logging
from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from desktop.chat.memory_estimate import EstimateArgs, MemoryEstimator, estimate_args
from desktop.local.catalog import InfoCache, ModelFileError, ModelInfo
from desktop.local.gpu import GpuSupport
from desktop.local.memory import MemoryEstimate, format_bytes
from desktop.ui.kit.async_door import loop_running, run_blocking, start
from desktop.ui.kit.widgets import plain, rich_label

log = logging.getLogger("simi.ui.memory")

_ROWS = (("Weights", "weights"), ("KV cache", "kv"), ("Compute", "compute"), ("Total", "total"))


class MemoryEstimateView(QWidget):
    """Weights / KV cache / compute buffers, in RAM and on the GPU, for the fields as typed.

    ``cache``: the runtime's header cache (``services.local.model_info``); ``gpu``: the
    llama.cpp build and its devices (asked off the GUI thread when not given; tests pass
    figures). ``estimator`` does the work.

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
        self.estimator = MemoryEstimator(cache, gpu)
        self._args: EstimateArgs | None = None
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
        args = estimate_args(model_path, n_ctx, kv_type, n_gpu_layers)
        self._args = args
        path = args[0]
        if path is None:
            self._show(None, None, "Choose a model file to see how much memory it needs.")
            return
        estimator = self.estimator
        hit = estimator.peek(path)
        if (hit is None or estimator.gpu is None) and loop_running():  # the build: asked once
            self._show_reading()
            if self._pending is None or self._pending.done():
                self._pending = start(self._read(path), name="memory-estimate-read")
            return
        self._render(hit if hit is not None else estimator.read(path))

    # internals -------------------------------------------------------------------------------
    async def _read(self, path: str) -> None:
        estimator = self.estimator
        result = await run_blocking(estimator.read, path)
        if estimator.gpu is None:  # with its devices: their names, memory
            estimator.gpu = await run_blocking(estimator.probe_gpu)
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
        est, notes = self.estimator.estimate(
            result, n_ctx, kv_type, layers, flash_attn=self._flash_attn
        )
        self._show(est, result, notes)

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
        gpu_line = self.estimator.gpu_line() if est is not None else ""
        self.gpu_label.setText(gpu_line)
        self.gpu_label.setVisible(bool(gpu_line))
        self.estimate_changed.emit(est)
