"""Settings → Local models: the prompt-state caches (``desktop.local.prompt_cache``).

Two budgets (the memory cache per loaded model, the saved system prompts on disk; Off turns
one off), a line with what they hold now ("In memory: 210 MB (3 states) · On disk: 140 MB
(2 files)", read from the runtime off the GUI thread when the dialog opens) and **Clear
caches**. Saving stores the budgets and hands them to the runtime (from its next request on).
Without a runtime (a dialog opened with prefs only) the budgets are still stored, and the
sizes line and the button are hidden.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol

from PySide6.QtWidgets import QFormLayout, QLabel

from desktop.chat.services import cache_budgets
from desktop.errors import UserError
from desktop.local.prompt_cache import PREF_PROMPT_CACHE_MB, PREF_SAVED_STATES_MB, CacheSizes
from desktop.settings.prefs import Preferences
from desktop.ui.agents.form import row, say
from desktop.ui.kit.async_door import loop_running, start
from desktop.ui.kit.widgets import push_button
from desktop.ui.settings.parts import choice_box, note

MEMORY_CHOICES = (
    (0, "Off"),
    (256, "256 MB"),
    (512, "512 MB"),
    (1024, "1 GB"),
    (2048, "2 GB"),
    (4096, "4 GB"),
)
SAVED_CHOICES = ((0, "Off"), (512, "512 MB"), (1024, "1 GB"), (2048, "2 GB"), (5120, "5 GB"))
CACHE_NOTE = (
    "Returning to a conversation after visiting another one reuses what the model already "
    "read of it, from memory; a long system prompt (512 tokens or more) is read once and "
    "kept on disk, so the first reply after a restart starts sooner. Deleting an agent "
    "deletes its saved prompt."
)
MB = 1024 * 1024


class CacheRuntime(Protocol):
    """What the section needs of ``LocalRuntime``."""

    async def cache_sizes(self) -> CacheSizes: ...

    async def clear_caches(self) -> None: ...

    def set_cache_budgets(self, memory_mb: int, saved_mb: int) -> None: ...


def mb_text(size_bytes: int) -> str:
    """ "0 MB", "210 MB", "1.5 GB" (MB = 2^20 bytes, as the budgets are)."""
    mb = size_bytes / MB
    if mb >= 1024:
        return f"{mb / 1024:.1f} GB"
    return f"{mb:.1f} MB" if 0 < mb < 10 else f"{round(mb)} MB"


def sizes_text(sizes: CacheSizes) -> str:
    """ "In memory: 210 MB (3 states) · On disk: 140 MB (2 files)"."""
    states = "state" if sizes.memory_states == 1 else "states"
    files = "file" if sizes.saved_files == 1 else "files"
    return (
        f"In memory: {mb_text(sizes.memory_bytes)} ({sizes.memory_states} {states}) · "
        f"On disk: {mb_text(sizes.saved_bytes)} ({sizes.saved_files} {files})"
    )


def _mb(value: int) -> str:
    return f"{value / 1024:g} GB" if value >= 1024 else f"{value} MB"


class CacheSection:
    """The rows it adds to the Local models form. It holds no reference to the dialog (no
    cycle keeps a closed dialog's wrapper alive); the dialog calls ``cancel`` as it closes."""

    def __init__(self, form: QFormLayout, prefs: Preferences, local: CacheRuntime | None) -> None:
        self._local = local
        self.tasks: list[asyncio.Task[Any]] = []
        memory_mb, saved_mb = cache_budgets(prefs)
        self.memory = choice_box(
            "Prompt cache in memory", MEMORY_CHOICES, memory_mb, _mb(memory_mb)
        )
        self.memory.setToolTip(
            "Memory kept per loaded model for conversations it has read, so going back to one "
            "does not read it again (Off: every switch reads the whole conversation again)"
        )
        self.saved = choice_box(
            "Saved system prompts on disk", SAVED_CHOICES, saved_mb, _mb(saved_mb)
        )
        self.saved.setToolTip(
            "Disk space for the read state of long system prompts, kept across restarts in "
            "your cache folder (oldest out first)"
        )
        form.addRow("Prompt cache in memory", self.memory)
        form.addRow("Saved system prompts on disk", self.saved)
        self.sizes: QLabel = note("", "CacheSizes")
        self.sizes.setAccessibleName("Prompt cache sizes")
        self.clear_button = push_button(
            "Clear caches",
            self.clear,
            accessible="Clear the prompt caches",
            tip="Empty the memory caches and delete the saved system prompts (they are made "
            "again as you chat)",
        )
        form.addRow(row(self.sizes, self.clear_button))
        form.addRow(note(CACHE_NOTE))
        if local is None:
            self.clear_button.hide()
        if self.refresh() is None:
            self.sizes.hide()

    def _start(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = start(coro, name=name)
        self.tasks.append(task)
        return task

    def cancel(self) -> None:
        """The dialog closes: what is still being read is shown nowhere."""
        for task in self.tasks:
            task.cancel()

    def prefs(self) -> dict[str, int]:
        """The budgets as picked, for ``Preferences.update``."""
        return {
            PREF_PROMPT_CACHE_MB: int(self.memory.currentData()),
            PREF_SAVED_STATES_MB: int(self.saved.currentData()),
        }

    def apply(self) -> None:
        """Hand the picked budgets to the runtime (the next request on follows them)."""
        if self._local is not None:
            picked = self.prefs()
            self._local.set_cache_budgets(
                picked[PREF_PROMPT_CACHE_MB], picked[PREF_SAVED_STATES_MB]
            )

    def refresh(self) -> asyncio.Task[Any] | None:
        """Read what the caches hold now, off the GUI thread; None without a loop or runtime."""
        if self._local is None or not loop_running():
            return None
        say(self.sizes, "Reading the cache sizes…", "muted")
        return self._start(self._show_sizes(), "settings: cache sizes")

    def clear(self) -> asyncio.Task[Any] | None:
        """Empty the caches, then show their sizes again (0)."""
        if self._local is None or not loop_running():
            return None
        self.clear_button.setEnabled(False)
        say(self.sizes, "Clearing the caches…", "muted")
        return self._start(self._clear(), "settings: clear caches")

    async def _show_sizes(self) -> None:
        assert self._local is not None
        try:
            sizes = await self._local.cache_sizes()
        except UserError as exc:
            say(self.sizes, exc.user_message, "error")
            return
        say(self.sizes, sizes_text(sizes), "")

    async def _clear(self) -> None:
        assert self._local is not None
        try:
            await self._local.clear_caches()
        except UserError as exc:
            say(self.sizes, exc.user_message, "error")
            return
        finally:
            self.clear_button.setEnabled(True)
        await self._show_sizes()
