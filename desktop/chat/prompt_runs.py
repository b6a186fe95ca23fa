"""Prompt-set runs: prompts x agents x repetitions, each call measured like any reply (Qt-free).

CONTRACT (written by the lead; the implementer keeps these names and fields):

- ``parse_prompts(text, filename=None) -> list[str]``: a typed list (one prompt per line; a line
  of ``---`` separates multi-line prompts when present), a ``.txt`` file (same rules) or a
  ``.jsonl`` file (each line a JSON string, or an object with "prompt" or "text"); blank
  entries dropped; a bad JSONL line raises ``UserError`` naming the line number.
  ``parse_prompt_set`` reads the same with each prompt's files: an object's "attachments", a
  list of paths relative to the file (issue 29), sent with that prompt to every agent.
- ``PromptRunner(services, run_id, agents, on_progress=None)``: ``await runner.run()`` does
  every (prompt, agent, repetition) not yet in ``prompt_run_calls`` (so a paused, interrupted or
  reopened run resumes where it stopped), in that order; remote agents' calls for one prompt
  go in parallel, local ones one at a time (one llama.cpp worker); each call streams through
  ``ChatService.ask_once`` (no conversation is created; its stats row gets
  ``prompt_run_id``), is stored with ``CompareStore.add_call``, and reports
  ``on_progress(Progress)``. ``pause()`` lets running calls finish and stops before the next
  (status "paused"); ``cancel()`` stops running calls (stored as "cancelled") and ends the run
  ("cancelled"); a finished run is "complete". Errors in one call never stop the run.
- ``summarise(services, run_id) -> list[AgentSummary]``: per agent, from the stored calls and
  their stats rows: calls, errors, median and p95 TTFT (ms), median decode tok/s, median
  prefill tok/s, median output tokens, total cost (None when any call's cost is unknown).
- ``export_rows(services, run_id) -> list[dict]`` and ``summary_dicts``: what CSV/JSON export
  writes (one row per call: prompt index, prompt, agent, repetition, status, TTFT, decode,
  prefill, tokens, cost, error).

How the implementation reads that:

- "Not yet in prompt_run_calls" means not stored as ``complete`` or ``error``: a call stored
  ``cancelled`` (stopped by Cancel, or by the app closing) is done again when the run resumes,
  and ``add_call`` replaces its row. The order is prompt by prompt; within a prompt, repetition
  by repetition; within a repetition the remote agents' calls run at once, alongside the local
  agents' calls one after another.
- The run's task cancelled from outside (the window closes, the CLI's loop ends): running calls
  are stored ``cancelled``, the run ``interrupted`` (resumable), and the cancellation goes on.
- ``summarise``, ``export_rows``, ``summary_dicts`` and ``AgentSummary`` live in
  ``chat/prompt_results.py`` (how figures, percentiles and cost are taken) and are imported
  from here as the contract names them. ``export_rows``: keys ``EXPORT_KEYS``, with
  ``prompt_index`` and ``repetition`` counted from 1 (stored from 0); ``summary_dicts``: keys
  ``SUMMARY_KEYS`` (the ``AgentSummary`` fields).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desktop.chat.call_stats import CallStats
from desktop.chat.prompt_results import (  # noqa: F401  (re-exported: part of the contract)
    EXPORT_KEYS,
    SUMMARY_KEYS,
    AgentSummary,
    export_rows,
    nearest_rank_value,
    summarise,
    summary_dicts,
)
from desktop.errors import UserError

log = logging.getLogger("simi.prompt_runs")

DONE = ("complete", "error")  # a stored call in one of these states is not done again


@dataclass(frozen=True, slots=True)
class Progress:
    done: int
    total: int
    errors: int
    current: str  # "Prompt 3 of 10 · Claude Sonnet · run 2 of 3"
    # The call that just ended (None for the report made when the run starts or resumes):
    # its place (from 0, as stored), agent, how it ended, time to first token, and error text.
    prompt_index: int | None = None
    agent_name: str = ""
    repetition: int | None = None
    status: str = ""  # complete / error / cancelled
    ttft_ms: float | None = None
    decode_tok_s: float | None = None
    error_text: str | None = None


# parsing ----------------------------------------------------------------------------------------
SEPARATOR = "---"


@dataclass(frozen=True, slots=True)
class PromptItem:
    """One prompt of a set and the files sent with it (absolute paths)."""

    text: str
    attachments: tuple[Path, ...] = field(default=())


def parse_prompts(text: str, filename: str | None = None) -> list[str]:
    return [item.text for item in parse_prompt_set(text, filename, check_files=False)]


def parse_prompt_set(
    text: str, filename: str | None = None, *, check_files: bool = True
) -> list[PromptItem]:
    """``parse_prompts`` with each prompt's files: in a .jsonl or .json file, an object's
    "attachments" (a list of paths, relative to the file's folder, or absolute). With
    ``check_files``, a path that is not a file is a ``UserError`` naming its line."""
    name = (filename or "").casefold()
    base = Path(filename).parent if filename else Path()
    if name.endswith(".jsonl"):
        return _jsonl_prompts(text, filename or "", base, check_files)
    if name.endswith(".json"):
        return _json_prompts(text, filename or "", base, check_files)
    return [PromptItem(p) for p in _text_prompts(text)]


def _text_prompts(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if any(line.strip() == SEPARATOR for line in lines):
        chunks: list[list[str]] = [[]]
        for line in lines:
            if line.strip() == SEPARATOR:
                chunks.append([])
            else:
                chunks[-1].append(line)
        prompts = ["\n".join(chunk).strip() for chunk in chunks]
    else:
        prompts = [line.strip() for line in lines]
    return [p for p in prompts if p]


def _prompt_of(value: Any) -> str | None:
    """A prompt from one JSON value: a string, or an object's "prompt" (or "text") string."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("prompt", "text"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return None


def _files_of(value: Any, where: str, base: Path, check: bool) -> tuple[Path, ...]:
    """An object's "attachments": paths relative to ``base`` (the prompt file's folder)."""
    listed = value.get("attachments") if isinstance(value, dict) else None
    if listed is None:
        return ()
    if not isinstance(listed, list) or not all(isinstance(p, str) and p for p in listed):
        raise UserError(f'{where}: "attachments" must be a list of file paths.')
    paths = tuple(base / Path(p).expanduser() for p in listed)
    if check:
        for given, path in zip(listed, paths, strict=True):
            if not path.is_file():
                raise UserError(f"{where}: the attachment {given} is not a file ({path}).")
    return tuple(p.absolute() for p in paths)


def _jsonl_prompts(text: str, filename: str, base: Path, check: bool) -> list[PromptItem]:
    where = filename or "the JSONL text"
    prompts: list[PromptItem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise UserError(f"{where}, line {number}: not JSON ({_reason(exc)}).") from None
        prompt = _prompt_of(value)
        if prompt is None:
            raise UserError(
                f"{where}, line {number}: expected a string or an object with "
                '"prompt" (or "text") as a string.'
            )
        files = _files_of(value, f"{where}, line {number}", base, check)
        if prompt.strip():
            prompts.append(PromptItem(prompt.strip(), files))
    return prompts


def _json_prompts(text: str, filename: str, base: Path, check: bool) -> list[PromptItem]:
    """A ``.json`` file: a list of prompts (strings or objects), as a JSONL file's lines."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{filename} is not JSON ({_reason(exc)}).") from None
    if not isinstance(value, list):
        raise UserError(f"{filename}: expected a list of prompts.")
    prompts: list[PromptItem] = []
    for number, item in enumerate(value, start=1):
        prompt = _prompt_of(item)
        if prompt is None:
            raise UserError(f"{filename}, item {number}: expected a string or an object with "
                            '"prompt" (or "text").')  # fmt: skip
        files = _files_of(item, f"{filename}, item {number}", base, check)
        if prompt.strip():
            prompts.append(PromptItem(prompt.strip(), files))
    return prompts


def _reason(exc: ValueError) -> str:
    msg = getattr(exc, "msg", None)
    return str(msg or exc).rstrip(".")


# running ----------------------------------------------------------------------------------------
def agents_for_run(services: Any, run: Any) -> list[Any]:
    """The agents of a stored run as they are now (by id, else by name), for resuming it.
    ``UserError`` naming any that no longer exist."""
    found: list[Any] = []
    missing: list[str] = []
    for agent_id, name in zip(run.agent_ids, run.agent_names, strict=True):
        agent = services.agents.get(agent_id) if agent_id is not None else None
        agent = agent or services.agents.by_name(name)
        if agent is None:
            missing.append(name)
        else:
            found.append(agent)
    if missing:
        names = ", ".join(f"“{n}”" for n in missing)
        raise UserError(f"This run cannot go on: {names} no longer exist.")
    return found


@dataclass(frozen=True, slots=True)
class _Slot:
    prompt_index: int
    agent: Any
    repetition: int


class PromptRunner:
    def __init__(
        self,
        services: Any,
        run_id: int,
        agents: list[Any],
        on_progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self._services = services
        self._run_id = run_id
        self._agents = list(agents)
        self._on_progress = on_progress
        self._pausing = False
        self._cancelling = False
        self._running: set[asyncio.Task[None]] = set()
        self._done = 0
        self._errors = 0
        self._total = 0
        self._prompts: tuple[str, ...] = ()
        self._files: tuple[tuple[str, ...], ...] = ()
        self._repeat = 1
        self._names: dict[int, str] = {}
        # per prompt: its files made ready (once per run), or why they cannot be
        self._ready: dict[int, list[Any] | UserError] = {}
        self._preparing: dict[int, asyncio.Future[list[Any] | UserError]] = {}

    @property
    def run_id(self) -> int:
        return self._run_id

    async def run(self) -> str:
        """Returns the run's final status."""
        store = self._services.compare
        stored = store.run(self._run_id)
        if stored is None:
            raise UserError(f"There is no prompt-set run {self._run_id}.")
        self._prompts, self._repeat = tuple(stored.prompts), max(1, int(stored.repeat))
        self._files = tuple(stored.attachments_of(i) for i in range(len(self._prompts)))
        self._pausing = self._cancelling = False
        # An agent renamed since the run began keeps the run's name for it (its calls are
        # stored, found and summarised under the name the run was made with).
        by_id = {
            i: n for i, n in zip(stored.agent_ids, stored.agent_names, strict=True) if i is not None
        }
        self._names = {id(a): by_id.get(a.id) or a.name for a in self._agents}
        names = {_key(n) for n in self._names.values()}
        finished = {
            (c.prompt_index, _key(c.agent_name), c.repetition): c
            for c in store.calls(self._run_id)
            if c.status in DONE and _key(c.agent_name) in names
        }
        plan = [
            _Slot(p, agent, r)
            for p in range(len(self._prompts))
            for r in range(self._repeat)
            for agent in self._agents
        ]
        self._total = len(plan)
        self._done = sum(1 for s in plan if self._slot_key(s) in finished)
        self._errors = sum(
            1 for s in plan if (c := finished.get(self._slot_key(s))) and c.status == "error"
        )
        todo = [s for s in plan if self._slot_key(s) not in finished]
        store.set_run_status(self._run_id, "running")
        self._report(None, "", None)
        try:
            try:
                for group in _groups(todo):
                    if self._pausing or self._cancelling:
                        break
                    await self._run_group(group)
            finally:
                self._release_files()
        except asyncio.CancelledError:
            self._cancel_running()
            with contextlib.suppress(Exception):
                store.set_run_status(self._run_id, "interrupted")
            raise
        except BaseException:
            with contextlib.suppress(Exception):
                store.set_run_status(self._run_id, "interrupted")
            raise
        if self._cancelling:
            status = "cancelled"
        elif self._done >= self._total:
            status = "complete"
        else:
            status = "paused"
        store.set_run_status(self._run_id, status)
        return status

    def pause(self) -> None:
        """Running calls finish; no new one starts; the run ends as "paused"."""
        self._pausing = True

    def cancel(self) -> None:
        """Running calls stop (stored "cancelled"); the run ends as "cancelled"."""
        self._cancelling = True
        self._cancel_running()

    # one group: the calls of one (prompt, repetition) ----------------------------------------
    async def _run_group(self, group: list[_Slot]) -> None:
        remote = [s for s in group if not s.agent.is_local]
        local = [s for s in group if s.agent.is_local]

        async def locals_in_turn() -> None:
            for slot in local:
                if self._pausing or self._cancelling:
                    return
                await self._spawn(slot)

        await asyncio.gather(*(self._spawn(s) for s in remote), locals_in_turn())

    async def _spawn(self, slot: _Slot) -> None:
        if self._cancelling:
            return
        task = asyncio.ensure_future(self._call(slot))
        self._running.add(task)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is None or not me.cancelling():
                return  # Cancel reached the call before it began: nothing was sent
            # the run's own task was cancelled (not Cancel): stop the call, let it store itself
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            raise
        finally:
            self._running.discard(task)

    def _cancel_running(self) -> None:
        for task in list(self._running):
            task.cancel()

    async def _attachments(self, prompt_index: int) -> list[Any]:
        """The prompt's files, checked and stored once for the run (on a worker thread);
        ``UserError`` (for each of its calls) when one cannot be attached."""
        if not self._files or not self._files[prompt_index]:
            return []
        if prompt_index not in self._preparing:
            paths = self._files[prompt_index]
            self._preparing[prompt_index] = asyncio.ensure_future(
                asyncio.to_thread(self._prepare_files, paths)
            )
        ready = await asyncio.shield(self._preparing[prompt_index])
        self._ready[prompt_index] = ready
        if isinstance(ready, UserError):
            raise ready
        return ready

    def _prepare_files(self, paths: tuple[str, ...]) -> list[Any] | UserError:
        attachments = self._services.attachments
        done: list[Any] = []
        for path in paths:
            try:
                done.append(attachments.prepare(Path(path)).attachment)
            except UserError as exc:
                for attachment in done:
                    attachments.release(attachment)
                return exc  # it names the file
        return done

    def _release_files(self) -> None:
        """The run's files may go once no message uses them (nothing stores them for it)."""
        for ready in self._ready.values():
            if isinstance(ready, list):
                for attachment in ready:
                    self._services.attachments.release(attachment)
        self._ready.clear()
        self._preparing.clear()

    async def _call(self, slot: _Slot) -> None:
        agent = slot.agent
        prompt = self._prompts[slot.prompt_index]
        chat = self._services.chat
        text, status, error_text, stats_id, stats = "", "cancelled", None, None, None
        outside = False
        try:
            try:
                files = await self._attachments(slot.prompt_index)
            except UserError as exc:  # not sent: the call is this error
                files, status, error_text = None, "error", exc.user_message
            if files is not None:
                one = await chat.ask_once(
                    agent, prompt, prompt_run_id=self._run_id, attachments=files
                )
                text, status, error_text = one.text, one.status, one.error_text
                stats_id, stats = one.stats_id, one.stats
        except asyncio.CancelledError:
            outside = not self._cancelling  # not our Cancel: the cancellation goes on
        except Exception as exc:  # a bug in one call: recorded on it, the others go on
            log.exception("prompt-run call failed")
            status, error_text = "error", f"Something went wrong inside SIMI Multi: {exc!r}"
        if status not in ("complete", "error", "cancelled"):
            status = "complete"
        self._services.compare.add_call(
            self._run_id,
            slot.prompt_index,
            (agent.id, self._name(slot)),
            slot.repetition,
            status,
            reply=text or "",
            error_text=error_text,
            stats_id=stats_id,
        )
        if status in DONE:
            self._done += 1
            self._errors += status == "error"
        self._report(slot, status, stats, error_text)
        if outside:
            raise asyncio.CancelledError

    def _name(self, slot: _Slot) -> str:
        return self._names.get(id(slot.agent)) or str(slot.agent.name)

    def _slot_key(self, slot: _Slot) -> tuple[int, str, int]:
        return slot.prompt_index, _key(self._name(slot)), slot.repetition

    def _report(
        self,
        slot: _Slot | None,
        status: str,
        stats: CallStats | None,
        error_text: str | None = None,
    ) -> None:
        if self._on_progress is None:
            return
        if slot is None:
            progress = Progress(self._done, self._total, self._errors, "")
        else:
            progress = Progress(
                self._done,
                self._total,
                self._errors,
                describe(
                    slot.prompt_index,
                    len(self._prompts),
                    self._name(slot),
                    slot.repetition,
                    self._repeat,
                ),
                prompt_index=slot.prompt_index,
                agent_name=self._name(slot),
                repetition=slot.repetition,
                status=status,
                ttft_ms=stats.ttft_ms if stats is not None else None,
                decode_tok_s=stats.decode_tok_s if stats is not None else None,
                error_text=error_text,
            )
        try:
            self._on_progress(progress)
        except Exception:
            log.exception("progress report failed")


def describe(prompt_index: int, prompts: int, agent_name: str, repetition: int, repeat: int) -> str:
    """ "Prompt 3 of 10 · Claude Sonnet · run 2 of 3" (indexes from 0, as stored)."""
    run = f"run {repetition + 1} of {repeat}"
    return f"Prompt {prompt_index + 1} of {prompts} · {agent_name} · {run}"


def _groups(todo: list[_Slot]) -> Iterable[list[_Slot]]:
    """The slots of each (prompt, repetition), in order."""
    group: list[_Slot] = []
    for slot in todo:
        if group and (group[0].prompt_index, group[0].repetition) != (
            slot.prompt_index,
            slot.repetition,
        ):
            yield group
            group = []
        group.append(slot)
    if group:
        yield group


def _key(name: str) -> str:
    return name.casefold()
