"""The layers of docs/ARCHITECTURE.md: the Qt-free core imports no Qt, and imports point
downwards only (errors < llm < local < chat; store and settings below chat)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

DESKTOP = Path(__file__).resolve().parents[1] / "desktop"

# What each package may import from desktop (besides itself). ``desktop.errors`` is the
# bottom: every layer may import it, it imports nothing of ours.
ALLOWED = {
    "errors": set(),
    "llm": {"errors"},
    "local": {"errors", "llm"},
    "store": {"errors"},
    "settings": {"errors", "store"},
    "hub": {"errors", "local", "settings"},
    "tools": {"errors", "settings", "store"},
    "attach": {"errors", "llm", "store", "settings"},
    "knowledge": {"errors", "attach"},
    "chat": {"errors", "llm", "local", "store", "settings", "hub", "tools", "attach", "knowledge"},
    "serve": {
        "errors",
        "llm",
        "local",
        "store",
        "settings",
        "hub",
        "tools",
        "attach",
        "knowledge",
        "chat",
    },
}


def test_qt_free_core_imports_no_pyside6() -> None:
    code = (
        "import sys\n"
        "import desktop.chat.services, desktop.chat.session, desktop.chat.agents\n"
        "import desktop.chat.kinds, desktop.chat.agent_rules, desktop.errors\n"
        "import desktop.llm.openai_compat, desktop.local.provider, desktop.local.engine\n"
        "import desktop.store.db, desktop.settings.secrets, desktop.cli\n"
        "import desktop.hub.service, desktop.hub.files, desktop.hub.downloads\n"
        "import desktop.tools.manager, desktop.tools.config, desktop.cli_mcp\n"
        "import desktop.serve.server, desktop.serve.app, desktop.cli_serve\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6', 'qasync')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"Qt-free packages imported: {out.stdout}"


def _imports(path: Path) -> set[str]:
    """Every ``desktop.*`` module the file imports, at the top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("desktop."))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("desktop"):
            module = node.module or ""
            found.update(
                f"{module}.{a.name}" if module == "desktop" else module for a in node.names
            )
    return found


def _layer(module: str) -> str:
    return module.split(".")[1]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_point_downwards(layer: str) -> None:
    files = (
        [DESKTOP / "errors.py"] if layer == "errors" else sorted((DESKTOP / layer).rglob("*.py"))
    )
    assert files
    wrong = []
    for path in files:
        module = ".".join(path.relative_to(DESKTOP.parent).with_suffix("").parts)
        for imported in _imports(path):
            target = _layer(imported)
            if target == layer or target in ALLOWED[layer]:
                continue
            wrong.append(f"{module} imports {imported}")
    assert wrong == []


def test_every_error_a_person_sees_is_a_user_error_in_its_own_home() -> None:
    from desktop.chat.export import ExportError
    from desktop.errors import UserError, ValidationError
    from desktop.llm import errors as llm_errors
    from desktop.settings.secrets import SecretsUnavailable
    from desktop.store.errors import StoreUnavailable
    from desktop.tools.errors import ToolServerError, ToolTimeout

    for cls in (ValidationError, StoreUnavailable, SecretsUnavailable, ExportError):
        assert issubclass(cls, UserError), cls
    assert issubclass(ToolTimeout, ToolServerError) and issubclass(ToolServerError, UserError)
    assert StoreUnavailable.__module__ == "desktop.store.errors"
    assert SecretsUnavailable.__module__ == "desktop.settings.secrets"
    assert ValidationError.__module__ == UserError.__module__ == "desktop.errors"
    # Provider errors stay in llm/errors.py (built on the one UserError); nothing else does.
    assert llm_errors.AuthError.__module__ == "desktop.llm.errors"
    assert issubclass(llm_errors.AuthError, UserError)
    assert not hasattr(llm_errors, "StoreUnavailable")
    assert not hasattr(llm_errors, "SecretsUnavailable")


def _module_graph() -> dict[str, set[str]]:
    """Every desktop module and the desktop modules it imports (anywhere in the file, type-only
    imports too: a circle drawn for the type checker is still a circle to a reader)."""
    modules: dict[str, Path] = {}
    for path in DESKTOP.rglob("*.py"):
        parts = path.relative_to(DESKTOP.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # "from desktop.ui.kit import theme" names the module desktop.ui.kit.theme
                for a in node.names:
                    whole = f"{node.module}.{a.name}"
                    named.add(whole if whole in modules else node.module)
        graph[name] = {
            m for m in named if m in modules and m != name and not name.startswith(m + ".")
        }
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The import circles of ``graph``: its strongly connected parts of two or more modules."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(frozenset(part))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return found


# None left: the last (chat/session <-> one_shot <-> turn_calls, two model-call paths that
# each took ChatService back) went when both came to use chat/call.py.
KNOWN_CIRCLES: set[frozenset[str]] = set()


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [frozenset({"a", "b", "c"})]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    import sys as _sys

    _sys.setrecursionlimit(max(_sys.getrecursionlimit(), 5000))
    found = set(circles(_module_graph()))
    assert found - KNOWN_CIRCLES == set(), sorted(sorted(c) for c in found - KNOWN_CIRCLES)
    assert found == KNOWN_CIRCLES, "a known circle is gone: take it off KNOWN_CIRCLES"


# ui/'s feature packages, bottom to top: each may import those before it (and the core), never
# one after it. kit: shared widgets; markdown: reply text; stats: charts and the timeline (a
# bubble opens it); agents: the editor (Models opens it, Settings reuses its form rows);
# conversation; the pages built on it (knowledge imports only kit; a page among pages, so
# that it may show an agent's or a reply's part later); shell: the window that holds them all.
UI_ORDER = (
    ("kit",),
    ("markdown",),
    ("stats",),
    ("agents",),
    ("conversation",),
    ("compare", "models", "settings", "server", "knowledge"),
    ("shell",),
)


def test_ui_packages_point_downwards() -> None:
    rank = {name: level for level, names in enumerate(UI_ORDER) for name in names}
    ui = DESKTOP / "ui"
    assert {p.name for p in ui.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(rank)
    assert sorted(p.name for p in ui.glob("*.py")) == ["__init__.py"]  # every module has a home
    wrong = []
    for name, targets in _module_graph().items():
        if not name.startswith("desktop.ui."):
            continue
        here = name.split(".")[2]
        for target in targets:
            if target.startswith("desktop.ui.") and target.count(".") >= 2:
                there = target.split(".")[2]
                if there != here and rank[there] >= rank[here]:
                    wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_every_ui_package_says_what_it_owns() -> None:
    for init in sorted((DESKTOP / "ui").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{init} has no docstring saying what the package owns"


# Every ui/ package reaches the core through chat/'s services (``Services`` and the Qt-free
# modules beside it). What they may import from below
# chat/ is a thin read model: a data type, a constant, a pure function of words or numbers, or
# the type of an object ``Services`` hands them. Module -> the names, and why; a new name (an
# operation: a scan, a probe, a download, the keyring) fails here until it goes through chat/.
UI_SERVICE_CLIENTS = tuple(name for names in UI_ORDER for name in names)
UI_READ_MODELS: dict[str, tuple[frozenset[str], str]] = {
    "desktop.store.agents": (
        frozenset({"Agent", "KV_TYPES"}),
        "the agent record the editor fills and the lists show, its KV cache types: data",
    ),
    "desktop.store.conversations": (
        frozenset({"Conversation", "Message", "Versions"}),
        "a conversation, a message and its versions, as the presenter was handed them: data",
    ),
    "desktop.store.tool_steps": (
        frozenset({"ToolStep"}),
        "one tool call of a reply (its card): data",
    ),
    "desktop.store.stats": (
        frozenset({"StatsFilter", "StatsStore", "rows_to_csv", "rows_to_json"}),
        "the Stats page's filter (data), services.stats' type, rows as CSV/JSON text (pure)",
    ),
    "desktop.store.compare": (
        frozenset({"CompareStore"}),
        "the type of services.compare",
    ),
    "desktop.store.search": (
        frozenset({"HIT_END", "HIT_START"}),
        "the markers around a search hit in a snippet: constants",
    ),
    "desktop.llm.events": (
        frozenset({"ReasoningDelta", "StreamEvent", "TextDelta"}),
        "the stream events a presenter receives from ChatService.run: data",
    ),
    "desktop.store.tools": (
        frozenset({"ALL_TOOLS", "DEFAULT_TIMEOUT_S", "McpServer", "ToolGrant"}),
        "MCP server and grant records, the all-tools marker, the default timeout: data",
    ),
    "desktop.store.watch": (
        frozenset({"ChangeWatch"}),
        "one pragma read on the GUI thread's connection: did another door commit? (a read model)",
    ),
    "desktop.local.catalog": (
        frozenset({"InfoCache", "ModelEntry", "ModelFileError", "ModelInfo"}),
        "a library row, a header's facts, a file's error: data; InfoCache: services.local's type",
    ),
    "desktop.local.context_size": (
        frozenset({"CONTEXT_STEPS", "RAM_SHARE"}),
        "the automatic context's steps and RAM share, named in Settings' note: constants",
    ),
    "desktop.local.gpu": (
        frozenset({"GpuSupport"}),
        "a llama.cpp build and its devices, as the probe found them (chat/ probes): data",
    ),
    "desktop.local.gpu_text": (
        frozenset({"backend_text"}),
        "a build and its devices in words: a pure function",
    ),
    "desktop.local.memory": (
        frozenset({"MemoryEstimate", "format_bytes"}),
        "an estimate's figures and bytes in words: data and a pure function",
    ),
    "desktop.local.placement": (
        frozenset({"LoadReport", "buffers_text"}),
        "where a loaded model runs (LocalRuntime.placement_of) and its buffers in words",
    ),
    "desktop.local.prompt_cache": (
        frozenset({"CacheSizes", "PREF_PROMPT_CACHE_MB", "PREF_SAVED_STATES_MB"}),
        "the cache sizes LocalRuntime reports, the budgets' preference keys: data",
    ),
    "desktop.local.starter": (
        frozenset({"STARTER_AGENT_NAME", "resolve_model_path"}),
        "the starter's name; an agent's model_path ('starter:' or a path) as a path, unread",
    ),
    "desktop.hub.client": (
        frozenset({"HubAuthError", "HubClient", "RepoSummary"}),
        "a search result, the hub's token refusal: data; HubClient: services.hub.client()'s type",
    ),
    "desktop.hub.downloads": (
        frozenset({"DownloadHandle", "DownloadProgress", "PendingDownload"}),
        "a download's progress, an unfinished one: data; the handle services.hub.downloads gives",
    ),
    "desktop.hub.files": (
        frozenset({"Fit", "GgufModel", "fit_of", "info_for"}),
        "a repository's model and its fit mark from sizes and headers already read: pure",
    ),
    "desktop.llm.connection": (
        frozenset({"ConnectionReport"}),
        "what Test connection found (chat/endpoint_probe.py asks): data",
    ),
    "desktop.llm.presets": (
        frozenset({"Preset", "preset"}),
        "the endpoint presets the editor offers: data",
    ),
    "desktop.settings.paths": (
        frozenset({"AppPaths"}),
        "where the app's files live, from the environment (nothing is read): data",
    ),
    "desktop.settings.prefs": (
        frozenset(
            {
                "PREF_NEW_LOCAL_MAX_TOKENS",
                "PREF_NEW_LOCAL_N_CTX",
                "PREF_TEXT_SIZE",
                "PREF_THEME",
                "Preferences",
                "TEXT_SIZES",
                "new_local_max_tokens",
                "new_local_n_ctx",
                "text_size_choice",
                "theme_choice",
            }
        ),
        "preference keys and their readers; Preferences: the type of services.prefs",
    ),
    "desktop.settings.secrets": (
        frozenset({"SecretStore", "SecretsUnavailable", "redact"}),
        "services.secrets' type, its error, known secrets blanked from a text (pure)",
    ),
    "desktop.store.knowledge": (
        frozenset({"Collection", "Source"}),
        "a knowledge collection (name, folders, embedding model) and a passage found: data",
    ),
    "desktop.knowledge": (
        frozenset({"IndexControl", "IndexProgress", "IndexReport"}),
        "an index run's progress and report: data; IndexControl: the thread-safe pause and "
        "cancel flags KnowledgeService.index takes (imported when a run starts: numpy)",
    ),
    "desktop.store.attachments": (
        frozenset({"Attachment"}),
        "an attachment of a message (name, kind, size, its file's hash): data",
    ),
    "desktop.attach.prepare": (
        frozenset({"Prepared"}),
        "a file made ready to send (its attachment, size in pixels or characters): data",
    ),
    "desktop.attach.errors": (
        frozenset({"AttachError"}),
        "why a file cannot be attached, in words for its chip: data",
    ),
    "desktop.tools.config": (
        frozenset({"McpConfig", "validate_server"}),
        "services.tools.manager.config's type; a server's field checks (pure)",
    ),
    "desktop.tools.results": (
        frozenset({"ServerState", "ToolInfo"}),
        "a server's state and a tool's name and description: data",
    ),
}


def test_ui_pages_reach_the_core_through_chat_services() -> None:
    below_chat = {"store", "local", "hub", "settings", "tools", "llm", "attach", "knowledge"}
    used: set[tuple[str, str]] = set()
    wrong = []
    for package in UI_SERVICE_CLIENTS:
        for path in sorted((DESKTOP / "ui" / package).rglob("*.py")):
            module = ".".join(path.relative_to(DESKTOP.parent).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    wrong += [
                        f"{module} imports {a.name}"
                        for a in node.names
                        if a.name.startswith("desktop.") and a.name.split(".")[1] in below_chat
                    ]
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("desktop"):
                    parts = (node.module or "").split(".")
                    if parts == ["desktop"]:  # from desktop import store
                        wrong += [
                            f"{module} imports desktop.{a.name}"
                            for a in node.names
                            if a.name in below_chat
                        ]
                        continue
                    if parts[1] not in below_chat:
                        continue
                    allowed = UI_READ_MODELS.get(node.module or "", (frozenset(), ""))[0]
                    for a in node.names:
                        if a.name in allowed:
                            used.add((node.module or "", a.name))
                        else:
                            wrong.append(f"{module} imports {node.module}.{a.name}")
    assert wrong == [], "call a chat/ service, or list a thin read model in UI_READ_MODELS"
    listed = {(m, name) for m, (names, _why) in UI_READ_MODELS.items() for name in names}
    assert listed - used == set(), "nothing imports these any more: take them off UI_READ_MODELS"
