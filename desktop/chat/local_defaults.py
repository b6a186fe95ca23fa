"""What a new local agent gets for the fields nobody filled in: the context size and the reply
length set in Settings ("New local agents"), the context "Automatic" by default
(``desktop.local.context_size``: from the model's trained context and the memory estimate).

Blocking (reads the model file's header): call it off the GUI thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from desktop.local.catalog import ModelFileError, read_model_info
from desktop.local.context_size import FALLBACK_N_CTX, automatic_n_ctx, available_ram
from desktop.local.starter import resolve_model_path
from desktop.settings.prefs import Preferences, new_local_max_tokens, new_local_n_ctx
from desktop.store.agents import Agent


def default_n_ctx(
    prefs: Preferences, model_path: str | None, ram: Callable[[], int | None] | None = None
) -> int:
    """The context size Settings gives a new local agent of this model file. ``ram``: the
    bytes of memory available (``available_ram`` when not given)."""
    chosen = new_local_n_ctx(prefs)
    if chosen is not None:
        return chosen
    path = resolve_model_path(model_path)
    if path is None:
        return FALLBACK_N_CTX
    try:
        info = read_model_info(path)
    except ModelFileError:  # the editor or the CLI says what is wrong with the file
        return FALLBACK_N_CTX
    return automatic_n_ctx(info, (ram or available_ram)())


def new_local_fields(
    prefs: Preferences, agent: Agent, ram: Callable[[], int | None] | None = None
) -> dict[str, Any]:
    """The changes that give a new local agent Settings' defaults; a value that was chosen
    (not None) is never replaced. Empty for a remote agent."""
    if not agent.is_local:
        return {}
    changes: dict[str, Any] = {}
    if agent.n_ctx is None:
        changes["n_ctx"] = default_n_ctx(prefs, agent.model_path, ram)
    if agent.max_tokens is None:
        changes["max_tokens"] = new_local_max_tokens(prefs)
    return changes
