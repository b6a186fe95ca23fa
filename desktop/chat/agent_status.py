"""What to say about an agent in a list, a header or a status line: its kind and model, and for
a local agent its model's state and what is wrong with (or missing in) its model file.

Read through the local runtime's public methods; nothing here starts a worker or reads a file
(``model_note`` asks the header cache only; reading a header is the caller's background job).
"""

from __future__ import annotations

from desktop.chat.format import short_model_name
from desktop.chat.kinds import kind_label, load_params_for
from desktop.errors import UserError
from desktop.local.provider import LocalRuntime
from desktop.store.agents import Agent


def model_path_of(agent: Agent) -> str | None:
    """The resolved GGUF path of a local agent; None for a remote one or a missing file."""
    if not agent.is_local:
        return None
    try:
        return load_params_for(agent).model_path
    except UserError:
        return None


def model_state(runtime: LocalRuntime, agent: Agent) -> str | None:
    """For a local agent: its model's state (unloaded / loading / ready / busy / error)."""
    if not agent.is_local:
        return None
    path = model_path_of(agent)
    return "error" if path is None else runtime.state_of(path)


def model_note(runtime: LocalRuntime, agent: Agent) -> str | None:
    """What the person should know about a local agent's model file (from the cached header):
    no chat template (ChatML is used), or what is wrong with the file."""
    if not agent.is_local:
        return None
    try:
        path = load_params_for(agent).model_path
    except UserError as exc:
        return exc.user_message
    info = runtime.model_info.peek(path)
    if info is None:
        return None
    if isinstance(info, Exception):
        return getattr(info, "user_message", str(info))
    return info.template_note


def subtitle(runtime: LocalRuntime, agent: Agent, full: bool = False) -> str:
    """ "Local (llama.cpp) · model.gguf · ready": kind, model and (local) model state. The
    model by its short name (a path's file name, a long id elided), or whole with ``full``
    (for the tooltip next to it)."""
    kind = kind_label(agent.kind)
    model = agent.model if full else short_model_name(agent.model)
    text = f"{kind} · {model}" if model else kind
    state = model_state(runtime, agent)
    return f"{text} · {state}" if state else text


def idle_status(runtime: LocalRuntime, agent: Agent) -> str:
    """The status line while nothing streams: whether the first message will load a model."""
    state = model_state(runtime, agent)
    if state == "unloaded":
        return f"{agent.name} · model loads with the first message"
    if state in (None, "ready"):
        return f"{agent.name} · ready"
    return f"{agent.name} · model {state}"
