"""Local models that see images: a GGUF model with its vision projector (an "mmproj" GGUF).

What is decided here, Qt-free and without loading llama.cpp:

- ``handler_for``: which of llama-cpp-python's multimodal chat handlers renders the prompt.
  A model whose file has a chat template gets the generic libmtmd handler (``MTMDChatHandler``,
  the template renders the images' places); one without gets the handler of its family, known
  by its name or architecture (LLaVA 1.5/1.6, Moondream, nanoLLaVA, MiniCPM-V 2.6,
  Qwen2.5-VL, ...).
- ``sees_images`` / ``cannot_see_message``: a local agent sees images only with a projector
  file that exists; otherwise the words that say so before anything is sent.
- ``read_projector`` / ``projector_problem``: a projector is a GGUF whose
  ``general.architecture`` is ``clip`` (or that has ``clip.*`` keys) with a vision encoder; its
  header alone is read (``desktop.local.gguf``), never its weights.
- ``is_projector_name`` / ``best_projector`` / ``projector_beside``: which projector file goes
  with a model: one from the same folder (or, for a hub download, the same repository), the
  f16 one before q8_0, bf16 and f32.

The worker runs the handler (``desktop.local.loading.attach_projector``, the vision path of
``desktop.local.engine``); ``refuse_images`` is the check every layer repeats before any work.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import Any, Protocol

from desktop.llm.errors import LocalModelError
from desktop.local.gguf import GGUFError, read_header_from
from desktop.local.starter import resolve_model_path

PROJECTOR_ARCHITECTURE = "clip"
MTMD_HANDLER = "MTMDChatHandler"
# The handler llama-cpp-python's LLaVA 1.5 prompt ("USER: ... ASSISTANT:") gives a model
# without a chat template whose family is not known: the most common format of the old ones.
FALLBACK_HANDLER = "Llava15ChatHandler"
# Projector precision, best first: f16 is what llama.cpp's converter writes and the hub's
# ggml-org repositories ship; q8_0 is close to it and half the size; f32 is twice it.
PRECISION_ORDER = ("f16", "q8_0", "bf16", "f32")

# (what the normalised names contain, handler, why): the first that matches wins. Names are
# lower-case letters and digits only ("Qwen2.5-VL-7B" -> "qwen25vl7b").
_BY_NAME: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("minicpmv26",), "MiniCPMv26ChatHandler", "MiniCPM-V 2.6"),
    (("qwen25vl", "qwen2vl"), "Qwen25VLChatHandler", "Qwen2.5-VL"),
    (("nanollava",), "NanoLlavaChatHandler", "nanoLLaVA"),
    (("moondream",), "MoondreamChatHandler", "Moondream"),
    (("llama3visionalpha",), "Llama3VisionAlphaChatHandler", "Llama 3 Vision Alpha"),
    (("obsidian",), "ObsidianChatHandler", "Obsidian"),
    (("llavav16", "llava16", "llavanext"), "Llava16ChatHandler", "LLaVA 1.6"),
    (("llava", "bakllava"), "Llava15ChatHandler", "LLaVA 1.5"),
)
# clip.projector_type -> handler, for a model whose names say nothing.
_BY_PROJECTOR = {
    "qwen2vl_merger": ("Qwen25VLChatHandler", "Qwen2.5-VL"),
    "qwen2.5vl_merger": ("Qwen25VLChatHandler", "Qwen2.5-VL"),
    "mlp": ("Llava15ChatHandler", "LLaVA 1.5"),
}

_QUANT_SUFFIX = re.compile(
    r"[.\-_ ](?:ud-)?(?:i?q[1-8](?:_[0-9a-z]{1,3}){0,3}|tq[12]_0|bf16|f16|f32|fp16|fp32|mxfp4)$",
    re.IGNORECASE,
)
_SPLIT_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$", re.IGNORECASE)


def _normal(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def handler_for(
    model_path: str | os.PathLike[str],
    mmproj_path: str | os.PathLike[str] | None,
    metadata: Mapping[str, Any],
    projector_metadata: Mapping[str, Any] | None = None,
) -> tuple[str, str]:
    """The name of the ``llama_cpp.llama_chat_format`` handler class for a model (its GGUF
    ``metadata``) and its projector, and why, in words for the log and a notice."""
    template = metadata.get("tokenizer.chat_template")
    if isinstance(template, str) and template.strip():
        return MTMD_HANDLER, "the model's own chat template places the images (libmtmd)"
    names = [
        str(metadata.get(key) or "")
        for key in ("general.name", "general.basename", "general.architecture")
    ]
    names += [Path(model_path).stem]
    if mmproj_path:
        names.append(Path(mmproj_path).stem)
    known = " ".join(_normal(n) for n in names if n)
    for needles, handler, family in _BY_NAME:
        if any(n in known for n in needles):
            return handler, f"no chat template in the model; its name says {family}"
    proj = projector_metadata or {}
    if proj.get("clip.minicpmv_version") == 3:
        return "MiniCPMv26ChatHandler", "no chat template; the projector is MiniCPM-V 2.6's"
    if isinstance(proj.get("clip.vision.image_grid_pinpoints"), list):
        return "Llava16ChatHandler", "no chat template; the projector tiles images as LLaVA 1.6"
    kind = proj.get("clip.projector_type")
    if isinstance(kind, str) and kind in _BY_PROJECTOR:
        handler, family = _BY_PROJECTOR[kind]
        return handler, f"no chat template; the projector is {family}'s ({kind})"
    return (
        FALLBACK_HANDLER,
        "no chat template and no known model family: LLaVA 1.5's prompt format",
    )


# agents ----------------------------------------------------------------------------------------
class VisionAgent(Protocol):
    """What is read of an agent (``desktop.store.agents.Agent``) here."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def model_path(self) -> str | None: ...

    @property
    def mmproj_path(self) -> str | None: ...


def model_label(model_path: str | os.PathLike[str] | None, fallback: str = "This model") -> str:
    """A model's name as a person knows it, from its file: "SmolLM2-135M-Instruct" for
    ``SmolLM2-135M-Instruct.Q4_1.gguf`` (the quantization and split suffixes left out)."""
    path = resolve_model_path(str(model_path)) if model_path else None
    if path is None and model_path and str(model_path).startswith("starter:"):
        path = Path(str(model_path).removeprefix("starter:"))
    if path is None:
        return fallback
    stem = path.name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    stem = _SPLIT_SUFFIX.sub("", stem)
    stem = _QUANT_SUFFIX.sub("", stem)
    return stem or path.name or fallback


def sees_images(agent: VisionAgent) -> bool:
    """Whether the agent can be sent images: a remote agent is taken to (its server says
    otherwise in words of its own); a local one only with a projector file that exists."""
    if agent.kind != "local":
        return True
    return _projector_file(agent.mmproj_path) is not None


def _projector_file(mmproj_path: str | None) -> Path | None:
    if not mmproj_path:
        return None
    path = Path(mmproj_path).expanduser()
    return path if path.is_file() else None


def cannot_see_message(agent: VisionAgent, images: int = 1) -> str:
    """Why a local agent cannot be sent images, and what to do, e.g. "SmolLM2-135M-Instruct
    cannot read images: choose a vision model (one with a projector, “mmproj” file) or remove
    the image." """
    label = model_label(agent.model_path, agent.model or agent.name or "This model")
    return cannot_see_words(label, agent.mmproj_path, images)


def cannot_see_words(label: str, mmproj_path: str | None, images: int = 1) -> str:
    """``cannot_see_message`` for a model called ``label``."""
    which = "the image" if images == 1 else "the images"
    if mmproj_path and _projector_file(mmproj_path) is None:
        return (
            f"{label} cannot read images: its vision projector {mmproj_path} is missing. "
            f"Choose the projector again in the agent, or remove {which}."
        )
    return (
        f"{label} cannot read images: choose a vision model (one with a projector, “mmproj” "
        f"file) or remove {which}."
    )


class CannotSeeImages(LocalModelError):
    """Images sent to a local model loaded without a projector (the chat layer checks first:
    this is the same check repeated where the model runs)."""


class _Request(Protocol):
    @property
    def messages(self) -> Any: ...


class _Params(Protocol):
    @property
    def model_path(self) -> str: ...

    @property
    def mmproj_path(self) -> str | None: ...


def image_count(request: _Request) -> int:
    return sum(len(getattr(m, "images", ())) for m in request.messages)


def refuse_images(params: _Params, request: _Request) -> None:
    """``CannotSeeImages`` when ``request`` carries images and ``params`` no projector file."""
    count = image_count(request)
    if count and _projector_file(params.mmproj_path) is None:
        label = model_label(params.model_path)
        raise CannotSeeImages(cannot_see_words(label, params.mmproj_path, count))


# projector files -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ProjectorInfo:
    """What a projector's header says (weights never read)."""

    path: str
    projector_type: str | None  # clip.projector_type: "mlp", "idefics3", "gemma3", ...
    projection_dim: int | None  # the width of what it hands the language model
    metadata: dict[str, Any]


class ProjectorError(LocalModelError):
    """A file chosen as a vision projector that is not one (the message names the file)."""


def is_projector_metadata(metadata: Mapping[str, Any]) -> bool:
    """A GGUF header of a projector: ``general.architecture`` ``clip``, or ``clip.*`` keys."""
    if metadata.get("general.architecture") == PROJECTOR_ARCHITECTURE:
        return True
    return any(str(k).startswith("clip.") for k in metadata)


def read_projector(path: str | os.PathLike[str]) -> ProjectorInfo:
    """Read a projector's header; ``ProjectorError`` names the file and what is wrong."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ProjectorError(
            f"The vision projector {p} does not exist; choose the model's “mmproj” .gguf file."
        )
    if not p.is_file():
        raise ProjectorError(f"{p} is not a file; choose the model's “mmproj” .gguf file.")
    try:
        with p.open("rb") as fh:
            header = read_header_from(fh, os.fstat(fh.fileno()).st_size)
    except GGUFError as exc:
        raise ProjectorError(f"{p} cannot be a vision projector ({exc}).") from exc
    except OSError as exc:
        raise ProjectorError(f"{p} cannot be read ({exc.strerror or exc}).") from exc
    meta = header.metadata
    if not is_projector_metadata(meta):
        arch = header.architecture or "unknown"
        raise ProjectorError(
            f"{p.name} is a model (architecture “{arch}”), not a vision projector: choose "
            "the “mmproj” file that belongs to the model."
        )
    if meta.get("clip.has_vision_encoder") is False:
        raise ProjectorError(
            f"{p.name} is a projector for sound, not images: choose the model's vision projector."
        )
    kind = meta.get("clip.projector_type")
    dim = meta.get("clip.vision.projection_dim")
    return ProjectorInfo(
        str(p),
        kind if isinstance(kind, str) else None,
        dim if isinstance(dim, int) and not isinstance(dim, bool) else None,
        dict(meta),
    )


def projector_problem(
    mmproj_path: str | os.PathLike[str] | None,
    model_path: str | os.PathLike[str] | None = None,
) -> str | None:
    """Why ``mmproj_path`` cannot be a projector (for ``model_path``, when its width is known
    on both sides), in words for the agent editor; None when it can (or none is chosen)."""
    if not mmproj_path or not str(mmproj_path).strip():
        return None
    try:
        info = read_projector(str(mmproj_path).strip())
    except ProjectorError as exc:
        return exc.user_message
    width = _model_width(model_path)
    if width is not None and info.projection_dim is not None and info.projection_dim != width:
        label = model_label(model_path)
        return (
            f"{Path(info.path).name} is a projector for another model: it gives "
            f"{info.projection_dim:,}-wide embeddings and {label} takes {width:,}. Choose the "
            "“mmproj” file from the model's own repository."
        )
    return None


def _model_width(model_path: str | os.PathLike[str] | None) -> int | None:
    path = resolve_model_path(str(model_path)) if model_path else None
    if path is None or not path.is_file():
        return None
    try:
        with path.open("rb") as fh:
            header = read_header_from(fh, os.fstat(fh.fileno()).st_size)
    except (GGUFError, OSError):
        return None  # the model field says what is wrong with it
    width = header.arch_value("embedding_length")
    return width if isinstance(width, int) and not isinstance(width, bool) else None


# which projector goes with a model --------------------------------------------------------------
def is_projector_name(name: str) -> bool:
    """A projector file by its name, as the hub and llama.cpp's converter name them
    ("mmproj-model-f16.gguf", "SmolVLM-256M-Instruct-mmproj-f16.gguf")."""
    return "mmproj" in PurePath(name).name.lower()


def _precision(name: str) -> int:
    stem = PurePath(name).name.lower().removesuffix(".gguf")
    tail = re.split(r"[.\-_]", stem)
    joined = "_".join(tail)
    for rank, word in enumerate(PRECISION_ORDER):
        if f"_{word}_" in f"_{joined}_":
            return rank
    return len(PRECISION_ORDER)


def _affinity(model: str, projector: str) -> int:
    """1 when the projector's name, without "mmproj" and its precision, is part of the
    model's (or says nothing else): "mmproj-SmolVLM-256M-Instruct-f16" for
    "SmolVLM-256M-Instruct-Q8_0"."""
    core = PurePath(projector).name.lower().removesuffix(".gguf").replace("mmproj", "")
    core = _QUANT_SUFFIX.sub("", "-" + core.strip(".-_ "))
    core = _normal(core.replace("model", ""))
    return 1 if not core or core in _normal(PurePath(model).name) else 0


def best_projector(model: str, candidates: Iterable[str], posix: bool = True) -> str | None:
    """The projector for the model at path ``model`` among ``candidates`` (paths in the same
    repository or library folder): those in the model's folder first, then in the folders
    above it (nearest first), then anywhere; among them one whose name matches the model's,
    then by precision (f16, q8_0, bf16, f32, others), then by name. None when there is none."""
    kind = PurePosixPath if posix else PurePath
    folder = kind(model).parent
    ranked: list[tuple[int, int, int, str]] = []
    for cand in candidates:
        if not is_projector_name(cand):
            continue
        where = kind(cand).parent
        if where == folder:
            distance = 0
        elif where in folder.parents:
            distance = 1 + list(folder.parents).index(where)
        else:
            distance = 1000
        ranked.append((distance, -_affinity(model, cand), _precision(cand), cand))
    return min(ranked)[3] if ranked else None


def projector_beside(
    model_path: str | os.PathLike[str] | None, root: str | os.PathLike[str] | None = None
) -> Path | None:
    """The projector file beside a model on disk: in its folder, else in the folders above it
    up to (not including) ``root`` (a library folder: a download keeps its repository's
    folders below it). Lists folders, reads no file. None when there is none."""
    path = resolve_model_path(str(model_path)) if model_path else None
    if path is None:
        return None
    path = path.expanduser()
    stop = Path(root).expanduser() if root else None
    candidates: list[str] = []
    folder = path.parent
    for _level in range(8):
        try:
            names = os.listdir(folder)
        except OSError:
            names = []
        candidates += [
            str(folder / n)
            for n in names
            if n.lower().endswith(".gguf") and is_projector_name(n) and not n.startswith(".")
        ]
        parent = folder.parent
        if stop is None or parent in (folder, stop) or folder == stop:
            break
        if stop not in parent.parents:
            break
        folder = parent
    found = best_projector(str(path), candidates, posix=False)
    return Path(found) if found else None
