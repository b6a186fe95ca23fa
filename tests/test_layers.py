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
    "chat": {"errors", "llm", "local", "store", "settings", "hub", "tools"},
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
# conversation; the pages built on it; shell: the window that holds them all.
UI_ORDER = (
    ("kit",),
    ("markdown",),
    ("stats",),
    ("agents",),
    ("conversation",),
    ("compare", "models", "settings"),
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
