"""Prompt-set runs: a list of prompts × chosen agents × N repetitions, measured like any reply.

A person types prompts (one per line; lines of ``---`` separate prompts of several lines) or
loads a .txt/.jsonl file (``prompt_runs.parse_prompts``), ticks agents, sets Repeat and
presses Start. The run is stored (``services.compare.create_run``) and driven by a
``PromptRunner``; its progress shows as a bar and a line ("12 of 30 · 1 error · Prompt 3 of
10 · Claude · run 2 of 3"), the per-agent table (``runs_table.RunsTable``, from
``summarise``) fills in as calls are stored. Pause lets the running calls finish and stops;
Resume (also a run cut off by a crash, reopened from the saved runs) does only the calls not
stored yet; Cancel stops the running calls and ends the run. Export CSV… / JSON… write on a
worker thread (folder used last, else Documents). Store reads run off the GUI thread.
Signals: finished(str): a run ended with that status; status(str): a line for the window.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QWidget,
)

from desktop.chat import prompt_runs
from desktop.chat.file_places import import_folder, remember
from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.ui.compare.runs_table import (
    PROMPTS_HINT,
    RESUMABLE,
    STATUS_WORDS,
    AgentChecklist,
    RunsTable,
    done_words,
    export_proposal,
    load_run,
    plural,
    progress_line,
    prompts_text,
    run_label,
    run_title,
    write_export,
)
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.file_export import export_in_background, export_row
from desktop.ui.kit.widgets import FlowLayout, hbox, vbox

log = logging.getLogger("simi.ui.runs")

MAX_REPEAT = 20


class RunsView(QWidget):
    finished = Signal(str)
    status = Signal(str)

    def __init__(
        self,
        services: Services,
        *,
        ask_save_path: Callable[[str, str, str], str | None] | None = None,
        ask_open_path: Callable[[str, str, str], str | None] | None = None,
        runner_factory: Callable[..., Any] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("RunsView")
        self._services = services
        self._ask_save_path = ask_save_path or (
            lambda t, where, f: QFileDialog.getSaveFileName(self, t, where, f)[0]
        )
        self._ask_open_path = ask_open_path or (
            lambda t, f, where: QFileDialog.getOpenFileName(self, t, where, f)[0]
        )
        self._runner_factory = runner_factory or prompt_runs.PromptRunner
        self.runner: Any = None
        self.run_task: asyncio.Task[str] | None = None
        self.task: asyncio.Task[None] | None = None  # the latest load / export / file read
        self.run_id: int | None = None  # the run shown
        self.run: Any = None
        self._pausing = False
        self._want_table: int | None = None
        self._table_task: asyncio.Task[None] | None = None

        layout = vbox(self, (16, 12, 16, 8), 8)
        layout.addLayout(self._build_saved_row())
        layout.addLayout(self._build_inputs(), 1)
        layout.addLayout(self._build_controls())
        self.progress_label = ElidedLabel("")
        self.progress_label.setObjectName("EmptyHint")
        layout.addWidget(self.progress_label)
        section = QLabel("RESULTS PER AGENT")
        section.setObjectName("SectionLabel")
        layout.addWidget(section)
        self.table = RunsTable()
        layout.addWidget(self.table, 2)
        exports, self.csv_button, self.json_button, self.message = export_row(
            "Save every call of this run (JSON: with the per-agent summary)", self.export
        )
        layout.addLayout(exports)
        self.reload_agents()
        self._update_buttons()

    # building --------------------------------------------------------------------------------
    def _build_saved_row(self) -> Any:
        row = hbox(spacing=6)
        label = QLabel("Saved runs")
        self.saved_box = QComboBox()
        self.saved_box.setAccessibleName("Saved runs")
        self.saved_box.setToolTip("Reopen an earlier run with its results")
        self.saved_box.addItem("New run", None)
        self.saved_box.activated.connect(self._saved_chosen)
        label.setBuddy(self.saved_box)
        row.addWidget(label)
        row.addWidget(self.saved_box, 1)
        return row

    def _build_inputs(self) -> Any:
        row = hbox(spacing=10)
        left = vbox(spacing=4)
        title = QLabel("Prompts")
        title.setObjectName("SectionLabel")
        self.prompts_edit = QPlainTextEdit()
        # a loaded .jsonl's files, by prompt text: a prompt kept as loaded is sent with them
        self._files_by_prompt: dict[str, tuple[str, ...]] = {}
        self.prompts_edit.setAccessibleName("Prompts")
        self.prompts_edit.setPlaceholderText(PROMPTS_HINT)
        self.prompts_edit.textChanged.connect(self._update_buttons)
        left.addWidget(title)
        left.addWidget(self.prompts_edit, 1)
        right = vbox(spacing=4)
        agents_title = QLabel("Agents")
        agents_title.setObjectName("SectionLabel")
        self.agent_list = AgentChecklist()
        self.agent_list.itemChanged.connect(lambda _i: self._update_buttons())
        repeat_row = hbox(spacing=6)
        repeat_label = QLabel("Repeat")
        self.repeat_box = QSpinBox()
        self.repeat_box.setRange(1, MAX_REPEAT)
        self.repeat_box.setAccessibleName("Repeat each prompt")
        self.repeat_box.setToolTip("How many times each agent answers each prompt")
        self.repeat_box.setSuffix(" ×")
        repeat_label.setBuddy(self.repeat_box)
        repeat_row.addWidget(repeat_label)
        repeat_row.addWidget(self.repeat_box)
        repeat_row.addStretch(1)
        right.addWidget(agents_title)
        right.addWidget(self.agent_list, 1)
        right.addLayout(repeat_row)
        row.addLayout(left, 3)
        row.addLayout(right, 2)
        return row

    def _build_controls(self) -> Any:
        self.load_button = QPushButton("Load file…")
        self.load_button.setToolTip("Read prompts from a .txt (one per line) or .jsonl file")
        self.load_button.clicked.connect(lambda: self.load_file())
        self.start_button = QPushButton("Start")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(lambda: self.start_run())
        self.pause_button = QPushButton("Pause")
        self.pause_button.setToolTip("Let the running calls finish, then stop")
        self.pause_button.clicked.connect(self.pause)
        self.resume_button = QPushButton("Resume")
        self.resume_button.setToolTip("Go on with the calls not done yet")
        self.resume_button.clicked.connect(lambda: self.resume())
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the running calls and end the run")
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QProgressBar()
        self.progress.setAccessibleName("Run progress")
        self.progress.setTextVisible(False)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        flow = FlowLayout(buttons := QWidget(), spacing=6)  # wraps in a narrow window
        for w in (self.load_button, self.start_button, self.pause_button, self.resume_button):
            flow.addWidget(w)
        flow.addWidget(self.cancel_button)
        column = vbox(spacing=6)
        column.addWidget(buttons)
        column.addWidget(self.progress)
        return column

    # the inputs ------------------------------------------------------------------------------
    def reload_agents(self) -> None:
        """The agent list, ticks kept (called when shown: agents may have changed)."""
        self.agent_list.reload(self._services.agents.list())
        self._update_buttons()

    def checked_agent_ids(self) -> list[int]:
        return self.agent_list.checked_ids()

    def set_checked(self, agent_ids: list[int] | tuple[int, ...]) -> None:
        self.agent_list.set_checked(agent_ids)

    def prompts(self) -> list[str]:
        return prompt_runs.parse_prompts(self.prompts_edit.toPlainText())

    def load_file(self) -> asyncio.Task[None] | None:
        """Load file…: prompts from a .txt or .jsonl file into the text box."""
        folder = import_folder(self._services.prefs)
        path = self._ask_open_path("Load prompts", "Prompts (*.txt *.jsonl);;All files (*)", folder)
        if not path:
            return None
        remember(self._services.prefs, path)

        async def read() -> None:
            try:
                text = await run_blocking(Path(path).read_text, encoding="utf-8")
                items = prompt_runs.parse_prompt_set(text, str(path))
            except (OSError, UnicodeDecodeError) as exc:
                self._say(f"Could not read {Path(path).name}: {exc}")
                return
            except UserError as exc:
                self._say(f"{Path(path).name}: {exc}")
                return
            if not items:
                self._say(f"No prompts in {Path(path).name}.")
                return
            self._files_by_prompt = {
                item.text: tuple(str(p) for p in item.attachments)
                for item in items
                if item.attachments
            }
            self.prompts_edit.setPlainText(prompts_text([item.text for item in items]))
            with_files = len(self._files_by_prompt)
            also = f" ({with_files} with attached files)" if with_files else ""
            self._say(f"Loaded {plural(len(items), 'prompt')}{also} from {Path(path).name}")

        self.task = start(read(), name="runs-load-file")
        return self.task

    # running ---------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """A run is going on (its runner is set from Start/Resume until it returns)."""
        return self.runner is not None

    def start_run(self) -> asyncio.Task[str] | None:
        """Start: a new run of the prompts × ticked agents × Repeat."""
        if self.busy:
            return None
        try:
            prompts = self.prompts()
        except UserError as exc:
            self._say(str(exc))
            return None
        by_id = {a.id: a for a in self._services.agents.list()}
        agents = [by_id[i] for i in self.checked_agent_ids() if i in by_id]
        if not prompts or not agents:
            self._say("Type at least one prompt and tick at least one agent.")
            return None
        repeat = self.repeat_box.value()
        # a loaded prompt keeps its files while its text is as loaded
        files = [list(self._files_by_prompt.get(p, ())) for p in prompts]
        run = self._services.compare.create_run(
            prompts,
            [(a.id, a.name) for a in agents],
            repeat=repeat,
            title=run_title(prompts),
            attachments=files if any(files) else None,
        )
        self._add_saved(run, select=True)
        return self._drive(run, agents)

    def resume(self) -> asyncio.Task[str] | None:
        """Resume the shown run (paused, or cut off): only the calls not stored yet."""
        run = self.run
        if self.busy or run is None or run.status not in RESUMABLE:
            return None
        try:
            agents = prompt_runs.agents_for_run(self._services, run)
        except UserError as exc:
            self._say(str(exc))
            return None
        return self._drive(run, agents)

    def _drive(self, run: Any, agents: list[Any]) -> asyncio.Task[str]:
        self.run_id, self.run = run.id, run
        self.runner = self._runner_factory(
            self._services, run.id, agents, on_progress=self._on_progress
        )
        self._pausing = False
        self.progress.setRange(0, max(1, len(run.prompts) * len(agents) * run.repeat))
        self.progress.setValue(0)  # the runner's first report says what is done already
        self.run_task = start(self._run(self.runner), name="prompt-run")
        self._update_buttons()
        return self.run_task

    async def _run(self, runner: Any) -> str:
        self._set_status("running")
        status = "interrupted"
        try:
            status = await runner.run()
        finally:
            self.runner = None
            self._set_status(status)
            self._update_buttons()
        await self._reload_run(say_done=True)
        self.finished.emit(status)
        return status

    def _on_progress(self, p: Any) -> None:
        self.progress.setRange(0, max(1, p.total))
        self.progress.setValue(p.done)
        self.progress_label.setText(progress_line(p.done, p.total, p.errors, p.current))
        self.refresh_table()

    def pause(self) -> None:
        if self.runner is not None and not self._pausing:
            self._pausing = True
            self.runner.pause()
            self._say("Pausing: the running calls finish first.")
            self._update_buttons()

    def cancel(self) -> None:
        """Cancel: stop the running calls and end the run (a paused one ends as it is)."""
        if self.runner is not None:
            self.runner.cancel()
            self._say("Cancelling…")
        elif self.run is not None and self.run.status in RESUMABLE:
            self._services.compare.set_run_status(self.run.id, "cancelled")
            self._set_status("cancelled")
            self._refresh_saved_label()
            self._say("Run cancelled.")
        self._update_buttons()

    def _set_status(self, status: str) -> None:
        if self.run is not None and self.run.status != status:
            self.run = dataclasses.replace(self.run, status=status)

    # saved runs ------------------------------------------------------------------------------
    def reload_saved(self) -> asyncio.Task[None]:
        """The drop-down of saved runs, read again (off the GUI thread)."""

        async def read() -> None:
            runs = await run_blocking(self._services.compare.runs)
            keep = self.run_id
            if self.run is not None and all(r.id != self.run.id for r in runs):
                runs.insert(0, self.run)  # started while the list was being read
            self.saved_box.blockSignals(True)
            self.saved_box.clear()
            self.saved_box.addItem("New run", None)
            for run in runs:
                self.saved_box.addItem(run_label(run), run.id)
            index = self.saved_box.findData(keep) if keep is not None else 0
            self.saved_box.setCurrentIndex(max(0, index))
            self.saved_box.blockSignals(False)

        self.task = start(read(), name="runs-saved")
        return self.task

    def _add_saved(self, run: Any, select: bool) -> None:
        self.saved_box.insertItem(1, run_label(run), run.id)
        if select:
            self.saved_box.setCurrentIndex(1)

    def _refresh_saved_label(self) -> None:
        if self.run is not None:
            index = self.saved_box.findData(self.run.id)
            if index > 0:
                self.saved_box.setItemText(index, run_label(self.run))

    def _saved_chosen(self, index: int) -> None:
        if self.busy:  # the running run stays shown
            self.saved_box.setCurrentIndex(max(0, self.saved_box.findData(self.run_id)))
            self._say("A run is going on: pause or cancel it first.")
            return
        run_id = self.saved_box.itemData(index)
        if run_id is None:
            self.new_run()
        else:
            self.open_run(int(run_id))

    def new_run(self) -> None:
        self.run_id, self.run = None, None
        self.table.set_summaries([])
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress_label.setText("")
        self._update_buttons()

    def open_run(self, run_id: int) -> asyncio.Task[None]:
        """Show a saved run: its prompts, agents, Repeat, table and progress."""
        self.run_id = run_id
        self.task = start(self._reload_run(fill_inputs=True), name="runs-open")
        return self.task

    async def _reload_run(self, fill_inputs: bool = False, say_done: bool = False) -> None:
        run_id = self.run_id
        if run_id is None:
            return
        try:
            run, calls, summaries = await run_blocking(load_run, self._services, run_id)
        except (sqlite3.Error, UserError) as exc:
            self._say(f"Could not read the run ({exc}).")
            return
        if run is None or run_id != self.run_id:
            return
        self.run = run
        done = sum(1 for c in calls if c.status != "cancelled")
        errors = sum(1 for c in calls if c.status == "error")
        total = len(run.prompts) * len(run.agent_ids) * run.repeat
        if fill_inputs:
            self.prompts_edit.setPlainText(prompts_text(run.prompts))
            self.set_checked(run.agent_ids)
            self.repeat_box.setValue(run.repeat)
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        self.progress_label.setText(
            progress_line(done, total, errors, STATUS_WORDS.get(run.status, run.status))
        )
        self._fill_table(summaries)
        self._refresh_saved_label()
        self._update_buttons()
        if say_done:
            self._say(done_words(run.status, done, total, errors))
        elif fill_inputs and run.status in RESUMABLE:
            self._say(f"This run is {STATUS_WORDS[run.status]}: Resume does the missing calls.")

    def refresh_table(self) -> None:
        """Read the shown run's summary again (one read at a time, the newest wins)."""
        self._want_table = self.run_id
        if self._table_task is None or self._table_task.done():
            self._table_task = start(self._table_answer(), name="runs-table")

    async def _table_answer(self) -> None:
        while self._want_table is not None:
            run_id, self._want_table = self._want_table, None
            try:
                summaries = await run_blocking(prompt_runs.summarise, self._services, run_id)
            except (sqlite3.Error, UserError) as exc:
                log.warning("run summary failed: %s", exc)
                return
            if self._want_table is None and run_id == self.run_id:
                self._fill_table(summaries)

    def _fill_table(self, summaries: list[Any]) -> None:
        self.table.set_summaries(summaries)
        self._update_buttons()

    # export ----------------------------------------------------------------------------------
    def export(self, fmt: str) -> asyncio.Task[None] | None:
        """Export CSV… / JSON…: the shown run's calls, written off the GUI thread."""
        run = self.run
        if run is None:
            self._say("Nothing to export: start a run or reopen a saved one.")
            return None
        suggested, filters = export_proposal(self._services.prefs, run, fmt)
        path = self._ask_save_path("Export run", suggested, filters)
        if not path:
            return None
        remember(self._services.prefs, path)
        write = functools.partial(write_export, self._services, run.id, fmt)
        self.task = export_in_background(
            path, write, lambda count: plural(count, "call"), self._say, "runs-export"
        )
        return self.task

    # state -----------------------------------------------------------------------------------
    def _update_buttons(self) -> None:
        busy = self.busy
        status = self.run.status if self.run is not None else None
        has_input = bool(self.prompts_edit.toPlainText().strip()) and bool(self.checked_agent_ids())
        self.start_button.setEnabled(not busy and has_input)
        self.pause_button.setEnabled(busy and not self._pausing)
        self.resume_button.setEnabled(not busy and status in RESUMABLE)
        self.cancel_button.setEnabled(busy or status in RESUMABLE)
        for w in (self.prompts_edit, self.agent_list, self.repeat_box, self.load_button):
            w.setEnabled(not busy)
        can_export = self.run is not None and self.table.rowCount() > 0
        self.csv_button.setEnabled(can_export)
        self.json_button.setEnabled(can_export)

    def _say(self, text: str) -> None:
        self.message.setText(text)
        self.status.emit(text)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self.busy:
            self.reload_agents()
        self.reload_saved()
