"""Settings, in the groups people look for: Appearance (theme, text size: applied as they are
picked, undone by Cancel), Conversations (the per-message statistics line), Local models
(unloading an idle model; the context and reply length new local agents get; the prompt
caches' budgets, sizes and Clear caches: ``settings_cache.py``), Prices (which
prices costs are counted at; "Update prices" is the one network call this dialog makes, and
only when pressed), Data (where everything is kept, with "Open folder") and Privacy (what the
app sends, and when). It scrolls when the screen is too small for it. Given the MCP servers
(``tools``) and the agents, those groups are the "General" tab and the servers and "always
allow" grants are the "Tools" tab (``settings_tools.ToolsPage``; stored as they change)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QGroupBox,
    QHBoxLayout,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.agents import AgentService
from desktop.chat.price_book import PriceBook, PricesInfo
from desktop.chat.services import PREF_IDLE_UNLOAD_MIN, Services, idle_unload_seconds
from desktop.chat.tool_loop import ToolRunner
from desktop.errors import UserError
from desktop.local.context_size import CONTEXT_STEPS, RAM_SHARE
from desktop.settings.paths import AppPaths
from desktop.settings.prefs import (
    PREF_NEW_LOCAL_MAX_TOKENS,
    PREF_NEW_LOCAL_N_CTX,
    PREF_TEXT_SIZE,
    PREF_THEME,
    Preferences,
    new_local_max_tokens,
    new_local_n_ctx,
    text_size_choice,
    theme_choice,
)
from desktop.ui.agents.form import row, say
from desktop.ui.conversation.warm_local import PREF_KEEP_READY, keep_ready
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.widgets import column_scroll, push_button
from desktop.ui.settings import appearance
from desktop.ui.settings.appearance import FOOTER_CHOICES, PREF_FOOTER, footer_mode
from desktop.ui.settings.cache import CacheRuntime, CacheSection
from desktop.ui.settings.parts import PathLabel, choice_box, group_box, note, same_widths
from desktop.ui.settings.tools import ToolsPage

IDLE_CHOICES = (
    (0, "Never"),
    (5, "After 5 minutes idle"),
    (15, "After 15 minutes idle"),
    (60, "After 1 hour idle"),
)
N_CTX_CHOICES = (0, 2048, 4096, 8192, 16384, 32768)  # 0: automatic
MAX_TOKENS_CHOICES = (256, 512, 1024, 2048, 4096)
_steps = ", ".join(f"{n:,}" for n in CONTEXT_STEPS[:-1]) + f" or {CONTEXT_STEPS[-1]:,}"
AUTOMATIC_NOTE = (
    f"Automatic: the largest of {_steps} tokens that the model was trained for and that fits "
    f"in {'half' if RAM_SHARE == 0.5 else f'{RAM_SHARE:.0%}'} of the free memory. Agents you "
    "already have keep their own settings."
)
PRIVACY_TEXT = (
    "SIMI Multi sends nothing anywhere on its own: there is no telemetry. It connects only to "
    "the services you set up in your agents (when you chat, fetch their models or test a "
    "connection), and to GitHub when you press Update prices."
)
DATA_NOTE = (
    "The data folder holds your conversations, agents and statistics. API keys are kept in "
    "your system's keyring, never in these files."
)
MARGIN = 24  # room kept around the dialog on a small screen or over a small window


def _tokens(n: int) -> str:
    return f"{n:,} tokens"


class SettingsDialog(QDialog):
    """Signals: prices_updated(bool): "Update prices" ended (True: the new prices are in
    use; False: ``prices_status`` says what went wrong, and the old prices stay)."""

    prices_updated = Signal(bool)

    def __init__(
        self,
        prefs: Preferences,
        parent: QWidget | None = None,
        *,
        prices: PriceBook | None = None,
        paths: AppPaths | None = None,
        local: CacheRuntime | None = None,
        tools: ToolRunner | None = None,
        agents: AgentService | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("SettingsDialog")
        self.setWindowTitle("Settings")
        self._prefs = prefs
        self._paths = paths or AppPaths.from_env()
        self._prices = prices or PriceBook.in_folder(self._paths.data_dir)
        self._local = local  # the local runtime: its prompt caches' sizes and budgets
        self._tasks: list[asyncio.Task[Any]] = []
        self._saved_look = (theme_choice(prefs), text_size_choice(prefs))

        self.body = QWidget()
        self.body.setObjectName("SettingsBody")
        self.groups = [
            self._appearance_group(),
            self._conversations_group(),
            self._local_group(),
            self._prices_group(),
            self._data_group(),
            self._privacy_group(),
        ]
        self.scroll_area = column_scroll("SettingsScroll")
        self.scroll_area.setWidget(self.body)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout = self._outer = QVBoxLayout(self)
        self.tools_page: ToolsPage | None = None
        self.tabs: QTabWidget | None = None
        if tools is not None and agents is not None:
            self.tools_page = ToolsPage(tools, agents)
            self.tabs = QTabWidget()
            self.tabs.setObjectName("SettingsTabs")
            self.tabs.addTab(self.scroll_area, "General")
            self.tabs.addTab(self.tools_page, "Tools")
            layout.addWidget(self.tabs, 1)
        else:
            layout.addWidget(self.scroll_area, 1)
        layout.addWidget(self.buttons)
        self._parts: list[list[QGroupBox]] = []
        self.refit_timer = QTimer(self)  # a text size change: lay out again, once
        self.refit_timer.setSingleShot(True)
        self.refit_timer.setInterval(0)
        self.refit_timer.timeout.connect(self._refit)
        self.columns = self._arrange()
        self.resize(self._fitting_size())
        if self.tabs is not None:  # the servers' table wants room for a command line
            self.resize(self.size().expandedTo(QSize(760, 640)).boundedTo(self._room()))

    @classmethod
    def for_services(cls, services: Services, parent: QWidget | None = None) -> SettingsDialog:
        """The window's Settings: its preferences, prices, app folder, local runtime, MCP
        servers."""
        return cls(
            services.prefs,
            parent,
            prices=services.chat.prices,
            paths=services.paths,
            local=services.local,
            tools=services.tools,
            agents=services.agents,
        )

    def _arrange(self, columns: int | None = None) -> int:
        """One column of groups, or two side by side when the screen (and the window) is wide
        enough and one column would not fit its height. Returns the number of columns."""
        if columns is None:
            room = self._room()
            one_high = sum(g.sizeHint().height() for g in self.groups) + 200
            widest = max(g.sizeHint().width() for g in self.groups)
            wide = 2 * widest + 120 <= room.width()
            columns = 2 if one_high > room.height() and wide else 1
        sides = self.body.layout()
        if not isinstance(sides, QHBoxLayout):
            sides = QHBoxLayout(self.body)
            sides.setContentsMargins(4, 0, 8, 4)
            sides.setSpacing(16)
        while (taken := sides.takeAt(0)) is not None:  # arranged before: groups move on
            stack = taken.layout()
            if stack is not None:
                while stack.count():
                    stack.takeAt(0)
                stack.deleteLater()
        self._parts = []
        split = 3 if columns == 2 else len(self.groups)
        for part in (self.groups[:split], self.groups[split:]):
            if not part:
                continue
            same_widths(part)
            self._parts.append(part)
            stack = QVBoxLayout()
            stack.setSpacing(4)
            for group in part:
                stack.addWidget(group)
            stack.addStretch(1)
            sides.addLayout(stack, 1)
        return columns

    # sections ---------------------------------------------------------------------------------
    def _appearance_group(self) -> QGroupBox:
        group, form = group_box("Appearance")
        self.theme = choice_box("Theme", appearance.THEME_CHOICES, self._saved_look[0])
        self.theme.setToolTip("Light or dark; “Same as the system” follows your computer")
        self.text_size = choice_box("Text size", appearance.TEXT_SIZE_CHOICES, self._saved_look[1])
        for box in (self.theme, self.text_size):
            box.currentIndexChanged.connect(self._show_look)
        form.addRow("Theme", self.theme)
        form.addRow("Text size", self.text_size)
        return group

    def _conversations_group(self) -> QGroupBox:
        group, form = group_box("Conversations")
        self.footer = choice_box("Message statistics", FOOTER_CHOICES, footer_mode(self._prefs))
        form.addRow("Message statistics", self.footer)
        form.addRow(
            note(
                "The line under each reply: time to first token, speed, tokens and cost. "
                "Hover it to see the whole record, or press Timeline to see where the time went."
            )
        )
        return group

    def _local_group(self) -> QGroupBox:
        group, form = group_box("Local models")
        minutes = (idle_unload_seconds(self._prefs) or 0) / 60
        self.idle_unload = choice_box(
            "Unload when idle", IDLE_CHOICES, minutes, f"After {minutes:g} minutes idle"
        )
        self.idle_unload.setToolTip("Free a local model's memory when it has not been used")
        form.addRow("Unload when idle", self.idle_unload)
        self.keep_ready = QCheckBox("Keep local models ready")
        self.keep_ready.setChecked(keep_ready(self._prefs))
        self.keep_ready.setToolTip(
            "Start llama.cpp when the window opens and load an agent's model when you click "
            "in its message box, so the first reply starts at once (never when the model "
            "would not fit in memory)"
        )
        form.addRow("", self.keep_ready)
        n_ctx = new_local_n_ctx(self._prefs) or 0
        self.new_n_ctx = choice_box(
            "Context for new agents",
            [(n, _tokens(n) if n else "Automatic (from the model)") for n in N_CTX_CHOICES],
            n_ctx,
            _tokens(n_ctx),
        )
        self.new_n_ctx.setToolTip(
            "How much conversation a new local agent can hold; each agent can change it"
        )
        form.addRow("Context for new agents", self.new_n_ctx)
        max_tokens = new_local_max_tokens(self._prefs)
        self.new_max_tokens = choice_box(
            "Max tokens for new agents",
            [(n, _tokens(n)) for n in MAX_TOKENS_CHOICES],
            max_tokens,
            _tokens(max_tokens),
        )
        self.new_max_tokens.setToolTip("The longest reply a new local agent writes")
        form.addRow("Max tokens for new agents", self.new_max_tokens)
        form.addRow(note(AUTOMATIC_NOTE))
        self.cache = CacheSection(form, self._prefs, self._local)
        return group

    def _prices_group(self) -> QGroupBox:
        group, form = group_box("Prices")
        self.prices_info = note("Prices: checking…")
        self.update_prices_button = push_button(
            "Update prices",
            self.update_prices,
            accessible="Update prices",
            tip="Download the latest model prices (genai-prices, from GitHub) once. Costs of "
            "new calls use them; calls already made keep the cost they were given.",
        )
        self.prices_status = note("", "")
        self.prices_status.hide()
        self._show_prices_in_use()
        form.addRow(self.prices_info)
        form.addRow(row(self.update_prices_button, stretch=True))
        form.addRow(self.prices_status)
        return group

    def _data_group(self) -> QGroupBox:
        group, form = group_box("Data")
        paths = self._paths
        self.data_folder = self._path_label(paths.data_dir, "Data folder")
        self.open_folder_button = push_button(
            "Open folder",
            self.open_data_folder,
            accessible="Open the data folder",
            tip="Show the data folder in your file manager",
        )
        form.addRow("Data folder", row(self.data_folder, self.open_folder_button))
        self.settings_file = self._path_label(paths.settings_path, "Settings file")
        self.log_folder = self._path_label(paths.log_dir, "Log folder")
        form.addRow("Settings file", self.settings_file)
        form.addRow("Logs", self.log_folder)
        form.addRow(note(DATA_NOTE))
        return group

    @staticmethod
    def _path_label(path: Path, name: str) -> ElidedLabel:
        label = PathLabel(str(path), Qt.TextElideMode.ElideMiddle)
        label.setAccessibleName(f"{name}: {path}")
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setToolTip(str(path))
        return label

    def _privacy_group(self) -> QGroupBox:
        group, form = group_box("Privacy")
        self.privacy = note(PRIVACY_TEXT, "PrivacyText")
        form.addRow(self.privacy)
        return group

    # size -------------------------------------------------------------------------------------
    def _body_least(self) -> int:
        layout = self.body.layout()
        return layout.minimumSize().width() if layout is not None else 0

    def _chrome_width(self) -> int:
        """What the dialog adds around the groups: its margins and the scroll bar."""
        margins = self._outer.contentsMargins()
        bar = self.scroll_area.verticalScrollBar().sizeHint().width()
        return margins.left() + margins.right() + bar + 2 * self.scroll_area.frameWidth()

    def _fitting_size(self) -> QSize:
        """Its natural size, within the window it belongs to and the screen (it scrolls)."""
        natural = self.body.sizeHint()
        bar = self.scroll_area.verticalScrollBar().sizeHint().width()
        margins = self._outer.contentsMargins()
        least = 1040 if self.columns == 2 else 560  # two columns: room for the paths
        width = max(natural.width() + bar, least) + margins.left() + margins.right()
        height = (
            natural.height()
            + self.buttons.sizeHint().height()
            + self._outer.spacing()
            + margins.top()
            + margins.bottom()
        )
        room = self._room()
        return QSize(min(width, room.width()), min(height, room.height()))

    def _room(self) -> QSize:
        parent = self.parentWidget()
        window = parent.window() if parent is not None else None
        screen = (window.screen() if window is not None else None) or (
            QGuiApplication.primaryScreen()
        )
        room = screen.availableGeometry().size() if screen is not None else QSize(1280, 800)
        if window is not None and window.isVisible():
            room = room.boundedTo(window.size())
        return QSize(max(320, room.width() - MARGIN), max(240, room.height() - MARGIN))

    # appearance -------------------------------------------------------------------------------
    def _show_look(self) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            appearance.apply(app, self.theme.currentData(), self.text_size.currentData())
            self.refit_timer.start()  # once the new font has reached every widget

    def changeEvent(self, event: QEvent) -> None:
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self.refit_timer.start()
        super().changeEvent(event)

    def _refit(self) -> None:
        """After a text size change: line the fields up again and take the room they need
        (within the window and the screen; it scrolls beyond)."""
        for part in self._parts:
            same_widths(part)
        if self.columns == 2 and self._chrome_width() + self._body_least() > self._room().width():
            self.columns = self._arrange(1)  # two columns no longer fit side by side
        self.body.adjustSize()
        wanted = self._fitting_size()
        self.resize(self.size().expandedTo(wanted).boundedTo(self._room()))

    def _restore_look(self) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            appearance.apply(app, *self._saved_look)

    # data -------------------------------------------------------------------------------------
    def open_data_folder(self) -> bool:
        """Show the data folder in the system's file manager."""
        return QDesktopServices.openUrl(QUrl.fromLocalFile(str(self._paths.data_dir)))

    # prices -----------------------------------------------------------------------------------
    def _show_prices_in_use(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no event loop (nothing to keep responsive): read it now
            self._show_info(self._prices.info())
            return
        self._start(self._read_prices_in_use(), "settings: prices in use")

    async def _read_prices_in_use(self) -> None:
        self._show_info(await run_blocking(self._prices.info))

    def _show_info(self, info: PricesInfo) -> None:
        self.prices_info.setText(info.describe() + ".")

    def update_prices(self) -> asyncio.Task[Any]:
        """Fetch the price list once, off the GUI thread; ``prices_updated`` tells the end."""
        self.update_prices_button.setEnabled(False)
        say(self.prices_status, "Downloading the latest prices…", "muted")
        return self._start(self._update_prices(), "settings: update prices")

    async def _update_prices(self) -> bool:
        try:
            info = await run_blocking(self._prices.update)
        except UserError as exc:
            say(self.prices_status, exc.user_message, "error")
            return self._updated(False)
        self._show_info(info)
        say(self.prices_status, "New calls are priced with these prices.", "ok")
        return self._updated(True)

    def _updated(self, ok: bool) -> bool:
        self.update_prices_button.setEnabled(True)
        self.prices_updated.emit(ok)
        return ok

    def _start(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = start(coro, name=name)
        self._tasks.append(task)
        return task

    # closing ----------------------------------------------------------------------------------
    def done(self, result: int) -> None:
        for task in self._tasks:  # the dialog closes: it shows nothing more
            task.cancel()
        self.cache.cancel()
        if self.tools_page is not None:
            self.tools_page.detach()
        if result != QDialog.DialogCode.Accepted:
            shown = (self.theme.currentData(), self.text_size.currentData())
            if shown != self._saved_look:
                self._restore_look()  # Cancel undoes what was only tried
        super().done(result)

    def save(self) -> None:
        self._prefs.update(
            {
                PREF_THEME: self.theme.currentData(),
                PREF_TEXT_SIZE: self.text_size.currentData(),
                PREF_FOOTER: self.footer.currentData(),
                PREF_IDLE_UNLOAD_MIN: self.idle_unload.currentData(),
                PREF_KEEP_READY: self.keep_ready.isChecked(),
                PREF_NEW_LOCAL_N_CTX: self.new_n_ctx.currentData(),
                PREF_NEW_LOCAL_MAX_TOKENS: self.new_max_tokens.currentData(),
                **self.cache.prefs(),
            }
        )
        self.cache.apply()
        self._saved_look = (self.theme.currentData(), self.text_size.currentData())
        self.accept()
