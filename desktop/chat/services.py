"""Everything below the UI, built from the app folder. Used by the window and the CLI."""

from __future__ import annotations

import logging
import logging.handlers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from desktop.chat.agents import AgentService
from desktop.chat.attachments import AttachmentService
from desktop.chat.knowledge import KnowledgeService
from desktop.chat.local_defaults import new_local_fields
from desktop.chat.price_book import PriceBook
from desktop.chat.providers import ProviderFactory
from desktop.chat.session import ChatService
from desktop.chat.tool_loop import ToolRunner
from desktop.hub.service import HubService
from desktop.local.prompt_cache import (
    DEFAULT_PROMPT_CACHE_MB,
    DEFAULT_SAVED_STATES_MB,
    PREF_PROMPT_CACHE_MB,
    PREF_SAVED_STATES_MB,
)
from desktop.local.provider import LocalRuntime
from desktop.settings.paths import AppPaths
from desktop.settings.prefs import Preferences
from desktop.settings.secrets import RedactingFilter, SecretStore
from desktop.store.agents import Agent, AgentStore
from desktop.store.attachments import AttachmentStore
from desktop.store.compare import CompareStore
from desktop.store.conversations import ConversationStore
from desktop.store.db import open_database
from desktop.store.knowledge import KnowledgeStore
from desktop.store.owners import Heartbeat, Owner, OwnerStore
from desktop.store.search import SearchStore
from desktop.store.stats import StatsStore
from desktop.store.tool_steps import ToolStepStore
from desktop.store.tools import ToolStore
from desktop.tools.config import McpConfig
from desktop.tools.manager import McpManager

if TYPE_CHECKING:
    import sqlite_utils

log = logging.getLogger("simi")


PREF_IDLE_UNLOAD_MIN = "local.idle_unload_minutes"


def idle_unload_seconds(prefs: Preferences) -> float | None:
    """The "unload an idle local model after N minutes" setting (None: keep it loaded)."""
    try:
        minutes = float(prefs.get(PREF_IDLE_UNLOAD_MIN, 0) or 0)
    except (TypeError, ValueError):
        return None
    return minutes * 60 if minutes > 0 else None


def cache_budgets(prefs: Preferences) -> tuple[int, int]:
    """Settings' prompt-state cache budgets in MB: (memory per loaded model, saved system
    prompts on disk); 0 turns one off; a value that is not a number is the default."""

    def mb(key: str, default: int) -> int:
        try:
            return max(0, int(prefs.get(key, default)))
        except (TypeError, ValueError):
            return default

    return (
        mb(PREF_PROMPT_CACHE_MB, DEFAULT_PROMPT_CACHE_MB),
        mb(PREF_SAVED_STATES_MB, DEFAULT_SAVED_STATES_MB),
    )


def setup_logging(paths: AppPaths, level: int = logging.INFO) -> None:
    """Log to ``<logs>/simi.log`` (rotating), with every known secret blanked out."""
    root = logging.getLogger("simi")
    if any(getattr(h, "_simi", False) for h in root.handlers):
        return
    handler = logging.handlers.RotatingFileHandler(
        paths.log_path, maxBytes=2_000_000, backupCount=3, encoding="utf-8"
    )
    handler._simi = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    root.addHandler(handler)
    root.setLevel(level)


@dataclass
class Services:
    paths: AppPaths
    db: sqlite_utils.Database
    prefs: Preferences
    secrets: SecretStore
    agents: AgentService
    conversations: ConversationStore
    stats: StatsStore
    chat: ChatService
    local: LocalRuntime
    search: SearchStore
    compare: CompareStore
    hub: HubService
    # MCP tools (issue 18): servers and grants (``tools.tools``), their running connections
    # (``tools.manager``: started on first use, stopped by ``aclose``) and every tool step
    tools: ToolRunner
    # files attached to messages: made ready, checked against an agent, viewed, collected
    # (``chat/attachments.py``; its ``store``: the files in the data folder and their rows)
    attachments: AttachmentService
    # this process's owner row (store/owners.py): stamped on what it streams, runs and trashes,
    # so another process's start-up recovery leaves that alone; its row goes at ``close``
    owners: OwnerStore | None = None
    owner: Owner | None = None
    heartbeat: Heartbeat | None = field(default=None, repr=False)
    # knowledge collections: their folders, indexes (a file each) and the turns' searches
    knowledge: KnowledgeService | None = None

    @classmethod
    def open(cls, paths: AppPaths, secrets: SecretStore | None = None) -> Services:
        """Open the app folder. Raises ``StoreUnavailable`` with text for the person."""
        paths.ensure()
        setup_logging(paths)
        db = open_database(paths.db_path)
        owners = OwnerStore(db)
        owner = owners.register()
        heartbeat = Heartbeat(paths.db_path, owner).start() if Heartbeat.needed(owner) else None
        secrets = secrets or SecretStore()
        prefs = Preferences(paths.settings_path)
        agents = AgentService(
            AgentStore(db), secrets, local_defaults=lambda a: new_local_fields(prefs, a)
        )
        conversations = ConversationStore(db, owner_id=owner.id)
        stats = StatsStore(db)
        local = LocalRuntime(idle_unload_s=idle_unload_seconds(prefs))
        local.set_cache_folder(paths.prompt_states_dir)
        local.set_cache_budgets(*cache_budgets(prefs))
        agents.on_deleted.append(lambda agent: local.forget_saved_states(str(agent.id)))
        factory = ProviderFactory(agents, local)
        prices = PriceBook.in_folder(paths.data_dir)
        tool_store = ToolStore(db)
        tools = ToolRunner(
            McpManager(McpConfig(tool_store, secrets)),
            tool_store,
            ToolStepStore(db, owner_id=owner.id),
        )
        attachments = AttachmentService(AttachmentStore(db, paths.attachments_dir), conversations)
        knowledge = KnowledgeService(KnowledgeStore(db), paths.knowledge_dir)
        chat = ChatService(
            conversations,
            stats,
            factory,
            agents=agents,
            prices=prices,
            tools=tools,
            attachments=attachments.store,
            knowledge=knowledge,
        )

        # a cloned agent may use the same tools ("always" grants stay with the original) and
        # searches the same knowledge collections
        def copy_tools(src: Agent, copy: Agent) -> None:
            if src.id is not None and copy.id is not None:
                tool_store.set_agent_tools(copy.id, tool_store.agent_tools(src.id))
                knowledge.copy_agent(src.id, copy.id)  # and the same collections

        agents.on_cloned.append(copy_tools)
        compare = CompareStore(db, owner_id=owner.id)
        # What a crash cut off, of processes that are gone only: a window open beside this
        # process (or a `simi` command beside the window) keeps its live work.
        dead = owners.dead_ids()
        if tools.steps.mark_interrupted(dead):
            log.info("tool calls cut off by a crash are marked cancelled")
        stale = conversations.mark_stale_streaming(dead)
        if stale:
            log.info("marked %d replies cut off by a crash as interrupted", stale)
        cut_runs = compare.mark_interrupted_runs(dead)
        if cut_runs:
            log.info("marked %d prompt-set runs cut off by a crash as interrupted", cut_runs)
        # Conversations a process that is gone deleted, whose undo was not used, are gone for good.
        conversations.purge_trash(dead)
        attachments.collect()  # files no message uses any more (a purged conversation's)
        # from now on a conversation deleted for good (the window's Undo ran out) takes its
        # last files with it, on a thread of their own
        conversations.on_deleted.append(attachments.collect_soon)
        owners.forget(dead)
        agents.ensure_starter()
        return cls(
            paths,
            db,
            prefs,
            secrets,
            agents,
            conversations,
            stats,
            chat,
            local,
            SearchStore(db),
            compare,
            HubService(paths, secrets),
            tools,
            attachments,
            owners,
            owner,
            heartbeat,
            knowledge,
        )

    async def aclose(self) -> None:
        """What runs on the loop at exit: the HTTP clients kept across turns, the MCP servers."""
        await self.chat.providers.aclose()
        await self.tools.manager.aclose()

    def close(self) -> None:
        self.local.close()
        if self.knowledge is not None:
            self.knowledge.close()  # its indexes, and the embedding models' processes
        self.attachments.close()  # a collection under way ends before the database closes
        if self.heartbeat is not None:
            self.heartbeat.stop()
        if self.owners is not None and self.owner is not None:
            try:
                self.owners.end(self.owner.id)
            except Exception:  # the file went away or is unwritable: the next start knows
                log.exception("could not remove this process's owner row")
        self.db.close()  # every thread's connection
