"""The model library: GGUF files in the models folder and in folders the person added.

Added folders are linked in place (never copied); their list lives in Preferences under
``model_folders``. Each file is described from its GGUF header alone (``desktop.local.gguf``),
so listing a library of 40 GiB models reads a few MiB.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from desktop.llm.errors import LocalModelError
from desktop.local.gguf import FILE_TYPES, ArraySummary, GGUFError, GGUFHeader, read_header
from desktop.local.starter import starter_model_path
from desktop.local.vision import best_projector, is_projector_name

log = logging.getLogger("simi.local")

PREF_MODEL_FOLDERS = "model_folders"
# Folders below a library folder that are searched: models_dir/publisher/model/file.gguf
# (LM Studio's layout) and the app's downloads, models_dir/<owner>/<name>/ plus up to four
# folders of the repository's own ("Q4_K_M/model-00001-of-00002.gguf"; desktop/hub/names.py).
MAX_SCAN_DEPTH = 6
NO_TEMPLATE_NOTE = "no chat template: using ChatML"
# What `simi models list --json` shows of a ModelInfo, in this order.
PUBLIC_INFO_FIELDS = (
    "path",
    "name",
    "architecture",
    "parameter_count",
    "quantization",
    "file_size",
    "gguf_version",
    "context_length",
    "block_count",
    "head_count",
    "head_count_kv",
    "embedding_length",
    "chat_template_present",
)


class ModelFileError(LocalModelError):
    """A model file that cannot be used; the message names the file and what is wrong."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"The model file {path} cannot be used: {reason}.")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What a GGUF header says about a model (weights never loaded)."""

    path: str
    name: str
    architecture: str
    parameter_count: int
    quantization: str | None
    file_size: int
    gguf_version: int
    context_length: int | None  # trained context ({arch}.context_length)
    block_count: int | None  # layers
    head_count: int | None
    head_count_kv: int | None
    embedding_length: int | None
    vocab_size: int | None
    key_length: int | None  # per-head K dimension
    value_length: int | None  # per-head V dimension
    chat_template_present: bool
    # bytes of weights: per repeating layer (blk.N.*), token embeddings, and the rest (output
    # head and final norm), so a memory estimate can split them between CPU and GPU by layers
    layer_bytes: tuple[int, ...] = ()
    embedding_bytes: int = 0
    output_bytes: int = 0
    # no output head of its own (tied embeddings: SmolLM2, Llama 3.2, Qwen2.5, Gemma): llama.cpp
    # uses the token embeddings as the head and loads a second copy where the head runs
    output_tied: bool = False

    @property
    def template_note(self) -> str | None:
        """What to show under an agent using this model, or None when all is well."""
        return None if self.chat_template_present else NO_TEMPLATE_NOTE

    @property
    def parameters_label(self) -> str:
        n = self.parameter_count
        for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
            if n >= div:
                return f"{n / div:.1f}{unit}".replace(".0", "")
        return str(n)

    def to_public_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in PUBLIC_INFO_FIELDS}


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One row of the library: a file and either its info or what is wrong with it."""

    path: str
    folder: str | None  # the library folder it was found in; None for the starter model
    info: ModelInfo | None = None
    error: str | None = None
    starter: bool = False
    # the vision projector ("mmproj" GGUF) beside it, from the same folder or repository
    # (``desktop.local.vision.best_projector``): with it the model sees images
    mmproj: str | None = None

    def to_public_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "folder": self.folder, "starter": self.starter}
        data["info"] = self.info.to_public_dict() if self.info else None
        data["error"] = self.error
        data["mmproj"] = self.mmproj
        return data


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return max(value)  # per-layer values (some hybrid models): the largest bounds memory
    return None


def info_from_header(path: Path, header: GGUFHeader) -> ModelInfo:
    """Describe a model from its header; raises ``ModelFileError`` when it is not usable."""
    arch = header.architecture
    if not arch:
        raise ModelFileError(path, "the header has no general.architecture")
    if arch == "clip":
        raise ModelFileError(
            path, "it is a vision projector (mmproj) for another model, not a chat model"
        )
    from desktop.local.gpu import architecture_supported

    if architecture_supported(arch) is False:
        raise ModelFileError(
            path, f"its architecture “{arch}” is unknown to the installed llama.cpp"
        )
    meta = header.metadata
    blocks = _int(header.arch_value("block_count"))
    if blocks is None:
        raise ModelFileError(
            path, f"its header has no {arch}.block_count, so llama.cpp cannot load it"
        )
    heads = _int(header.arch_value("attention.head_count"))
    heads_kv = _int(header.arch_value("attention.head_count_kv")) or heads
    embd = _int(header.arch_value("embedding_length"))
    key_len = _int(header.arch_value("attention.key_length"))
    value_len = _int(header.arch_value("attention.value_length"))
    if embd and heads and not key_len:
        key_len = embd // heads
    if embd and heads and not value_len:
        value_len = embd // heads
    vocab = _int(header.arch_value("vocab_size"))
    tokens = meta.get("tokenizer.ggml.tokens")
    if vocab is None and isinstance(tokens, ArraySummary | list):
        vocab = tokens.count if isinstance(tokens, ArraySummary) else len(tokens)
    if vocab is None:
        embd_tensor = next((t for t in header.tensors if t.name == "token_embd.weight"), None)
        vocab = embd_tensor.shape[-1] if embd_tensor and len(embd_tensor.shape) > 1 else None

    layer_bytes = [0] * blocks
    embedding_bytes = output_bytes = 0
    has_head = False
    by_type: collections.Counter[str] = collections.Counter()
    for t in header.tensors:
        nbytes = t.n_bytes
        if len(t.shape) >= 2:
            by_type[t.type_name] += nbytes
        if t.name.startswith("blk."):
            idx = t.name.split(".", 2)[1]
            if idx.isdigit() and int(idx) < blocks:
                layer_bytes[int(idx)] += nbytes
                continue
        if t.name.startswith("token_embd"):
            embedding_bytes += nbytes
        else:
            output_bytes += nbytes
            has_head = has_head or t.name == "output.weight"
    # a part of a split file lists only its own tensors: its head may be in another part
    whole = (_int(meta.get("split.count")) or 1) <= 1
    ftype = meta.get("general.file_type")
    quant = FILE_TYPES.get(ftype) if isinstance(ftype, int) else None
    if quant is None and by_type:
        quant = by_type.most_common(1)[0][0]
    name = meta.get("general.name")
    template = meta.get("tokenizer.chat_template")
    return ModelInfo(
        path=str(path),
        name=name if isinstance(name, str) and name.strip() else path.stem,
        architecture=arch,
        parameter_count=sum(t.n_elements for t in header.tensors),
        quantization=quant,
        file_size=header.file_size,
        gguf_version=header.version,
        context_length=_int(header.arch_value("context_length")),
        block_count=blocks,
        head_count=heads,
        head_count_kv=heads_kv,
        embedding_length=embd,
        vocab_size=vocab,
        key_length=key_len,
        value_length=value_len,
        chat_template_present=isinstance(template, str) and bool(template.strip()),
        layer_bytes=tuple(layer_bytes),
        embedding_bytes=embedding_bytes,
        output_bytes=output_bytes,
        output_tied=whole and embedding_bytes > 0 and not has_head,
    )


def read_model_info(path: str | os.PathLike[str]) -> ModelInfo:
    """Read and describe one model file. Raises ``ModelFileError`` naming the file."""
    p = Path(path)
    if not p.exists():
        raise ModelFileError(p, "the file does not exist (was it moved or deleted?)")
    if not p.is_file():
        raise ModelFileError(p, "it is not a file")
    try:
        header = read_header(p)
    except GGUFError as exc:
        raise ModelFileError(p, str(exc)) from exc
    except OSError as exc:
        raise ModelFileError(p, f"it cannot be read ({exc.strerror or exc})") from exc
    return info_from_header(p, header)


class InfoCache:
    """``read_model_info`` remembered per (path, mtime, size): cheap enough to call on every
    keystroke of an editor, and a replaced file is read again. Thread-safe; errors cached too.
    Callers asking for the same file at once share one read: picking a local agent asks from
    two worker threads (its pane's header, loading it ahead), and two reads of a header in
    Python took the GIL from the GUI thread for 13 ms (bench/frames.py, the first switch)."""

    def __init__(self, capacity: int = 128) -> None:
        self._items: collections.OrderedDict[tuple[str, int, int], ModelInfo | ModelFileError]
        self._items = collections.OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()
        self._reading: dict[tuple[str, int, int], threading.Lock] = {}  # one read per file

    def _read_once(self, p: Path, key: tuple[str, int, int]) -> ModelInfo | ModelFileError:
        """Read the file and remember the answer; a caller asking meanwhile waits for it."""
        with self._lock:
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:
            with self._lock:
                hit = self._items.get(key)
            if hit is None:
                try:
                    hit = read_model_info(p)
                except ModelFileError as exc:
                    hit = exc
                with self._lock:
                    self._items[key] = hit
                    while len(self._items) > self._capacity:
                        self._items.popitem(last=False)
        with self._lock:
            if self._reading.get(key) is reading and not reading.locked():
                del self._reading[key]  # the last one out
        return hit

    def peek(self, path: str | os.PathLike[str]) -> ModelInfo | ModelFileError | None:
        """The remembered answer for the file as it is now, or None (never reads the file)."""
        p = Path(path)
        try:
            st = p.stat()
        except OSError:
            return None
        with self._lock:
            return self._items.get((str(p), st.st_mtime_ns, st.st_size))

    def get(self, path: str | os.PathLike[str]) -> ModelInfo:
        p = Path(path)
        try:
            st = p.stat()
        except OSError:
            return read_model_info(p)  # raises the clear "does not exist" error
        key = (str(p), st.st_mtime_ns, st.st_size)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
        if hit is None:
            hit = self._read_once(p, key)
        if isinstance(hit, ModelFileError):
            raise ModelFileError(hit.path, hit.reason)
        return hit


class PreferencesLike(Protocol):
    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...


class PathsLike(Protocol):
    @property
    def models_dir(self) -> Path: ...


class ModelCatalog:
    """The library: ``entries()`` lists every GGUF file with its info or its error."""

    def __init__(
        self, paths: PathsLike, prefs: PreferencesLike, cache: InfoCache | None = None
    ) -> None:
        self._paths = paths
        self._prefs = prefs
        self.cache = cache or InfoCache()

    # folders ---------------------------------------------------------------------------------
    @property
    def models_dir(self) -> Path:
        return self._paths.models_dir

    def added_folders(self) -> list[Path]:
        raw = self._prefs.get(PREF_MODEL_FOLDERS) or []
        if not isinstance(raw, list):
            return []
        return [Path(p) for p in raw if isinstance(p, str) and p]

    def folders(self) -> list[Path]:
        """The models folder first, then the added folders, without duplicates."""
        seen: dict[str, Path] = {str(self.models_dir): self.models_dir}
        for folder in self.added_folders():
            seen.setdefault(str(folder), folder)
        return list(seen.values())

    def add_folder(self, folder: str | os.PathLike[str]) -> Path:
        """Link a folder into the library (its files stay where they are)."""
        p = Path(folder).expanduser()
        if not p.exists():
            raise LocalModelError(f"The folder {p} does not exist.")
        if not p.is_dir():
            raise LocalModelError(f"{p} is not a folder; choose the folder that holds .gguf files.")
        p = p.resolve()
        if self.models_dir.exists() and p == self.models_dir.resolve():
            return p  # always in the library
        current = [str(f) for f in self.added_folders()]
        if str(p) not in current:
            self._prefs.set(PREF_MODEL_FOLDERS, [*current, str(p)])
        return p

    def remove_folder(self, folder: str | os.PathLike[str]) -> Path:
        """Unlink a folder from the library; its files are not touched."""
        p = Path(folder).expanduser()
        current = [str(f) for f in self.added_folders()]
        candidates = {str(p)}
        if p.exists():
            candidates.add(str(p.resolve()))
        kept = [f for f in current if f not in candidates]
        if len(kept) == len(current):
            if str(p) == str(self.models_dir):
                raise LocalModelError(f"{p} is the built-in models folder; it cannot be removed.")
            listed = ", ".join(current) or "none"
            raise LocalModelError(f"{p} is not in the model library (added folders: {listed}).")
        self._prefs.set(PREF_MODEL_FOLDERS, kept)
        return p

    # files -----------------------------------------------------------------------------------
    def files(self) -> list[tuple[Path, Path]]:
        """(file, folder) for every .gguf model file, first parts of split models only (vision
        projectors are not models: ``projectors``)."""
        return self._scan()[0]

    def _scan(self) -> tuple[list[tuple[Path, Path]], list[Path]]:
        found: dict[str, tuple[Path, Path]] = {}
        projectors: dict[str, Path] = {}
        for folder in self.folders():
            for path in _gguf_files(folder):
                if is_projector_name(path.name):
                    projectors.setdefault(str(path), path)
                else:
                    found.setdefault(str(path), (path, folder))
        files = sorted(found.values(), key=lambda pf: (str(pf[1]), pf[0].name.lower()))
        return files, list(projectors.values())

    def entries(self) -> list[ModelEntry]:
        """Every model in the library; the starter model (when installed) always first. An
        entry names the projector from its folder (or its repository's, above it)."""
        entries: list[ModelEntry] = []
        starter = starter_model_path()
        if starter is not None:
            entries.append(self.entry(starter, None, starter=True))
        files, projectors = self._scan()
        for path, folder in files:
            if starter is not None and path == starter:
                continue
            entry = self.entry(path, folder)
            near = [str(p) for p in projectors if _beside(p, path, folder)]
            mmproj = best_projector(str(path), near, posix=False) if near else None
            entries.append(replace(entry, mmproj=mmproj) if mmproj else entry)
        return entries

    def entry(self, path: Path, folder: Path | None, starter: bool = False) -> ModelEntry:
        try:
            info = self.cache.get(path)
        except ModelFileError as exc:
            return ModelEntry(
                str(path), str(folder) if folder else None, error=exc.reason, starter=starter
            )
        return ModelEntry(str(path), str(folder) if folder else None, info=info, starter=starter)


def _beside(projector: Path, model: Path, library: Path) -> bool:
    """The projector is in the model's folder, or in a folder above it below the library
    folder (a download keeps its repository's folders: owner/name/Q4_K_M/model.gguf)."""
    where = projector.parent
    if where == model.parent:
        return True
    return where in model.parents and library in where.parents


def _gguf_files(folder: Path) -> Iterable[Path]:
    if not folder.is_dir():
        return []
    out: list[Path] = []
    base_depth = len(folder.parts)
    for root, dirs, names in os.walk(folder, onerror=lambda e: log.info("cannot scan: %s", e)):
        if len(Path(root).parts) - base_depth >= MAX_SCAN_DEPTH:
            dirs[:] = []
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            if not name.lower().endswith(".gguf") or name.startswith("."):
                continue
            if _is_later_split_part(name):
                continue
            out.append(Path(root) / name)
    return out


def _is_later_split_part(name: str) -> bool:
    # llama.cpp's gguf-split names parts "<stem>-00002-of-00003.gguf"; part 1 stands for all.
    stem = name[: -len(".gguf")]
    parts = stem.rsplit("-", 3)
    return (
        len(parts) == 4
        and parts[2] == "of"
        and parts[1].isdigit()
        and parts[3].isdigit()
        and int(parts[1]) > 1
    )
