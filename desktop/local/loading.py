"""Loading a GGUF model into llama.cpp (in the worker process), and what llama.cpp said doing it.

``load_model`` checks the file's header first (a bad file gets a message naming it, never a
native crash), builds the model with the agent's load parameters and, when the GPU runs out of
memory, retries with half as many GPU layers until it fits, saying so in the model's notice.
``capture_llama_logs`` routes llama.cpp's own log lines into a short tail, so a failed load can
quote llama.cpp's complaint and the memory estimate can be checked against the sizes it logs.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from desktop.llm.errors import LocalModelError
from desktop.llm.events import RunInfo, Timing
from desktop.local.gpu import backend_name
from desktop.local.placement import LoadLog, LoadReport, Placement, WhereItRuns, where_it_runs

log = logging.getLogger("simi.local")

# ggml_type ids for the KV cache (ggml.h): F16 = 1, Q4_0 = 2, Q8_0 = 8.
KV_TYPE_IDS = {"f16": 1, "q4_0": 2, "q8_0": 8}
# The notice of a model whose chat template is missing, cannot be compiled, or fails to render:
# the reply is made with ChatML either way (the template's own error goes to the log).
CHATML_TEMPLATE_NOTE = "No usable chat template in the model file; using ChatML."

# llama.cpp's log is one per process, and so is its sink. The last lines llama.cpp logged, so a
# load failure can say what llama.cpp itself complained about instead of llama-cpp-python's
# bare "Failed to load".
LLAMA_LOG_TAIL: collections.deque[str] = collections.deque(maxlen=40)
# What llama.cpp itself reported about the last load, in MiB: "kv_cache", "compute" (summed
# over backends), "weights". Verbose loads log thousands of lines, so these are kept aside
# from the tail. Filled only once ``capture_llama_logs`` ran.
LLAMA_REPORTED_MIB: dict[str, float] = {}
_SIZE_PATTERNS = (
    # llama_kv_cache: size =   23.91 MiB (  2048 cells,  30 layers, ...)
    ("kv_cache", re.compile(r"llama_kv_cache: size = +([\d.]+) MiB")),
    # sched_reserve:        CPU compute buffer size =    98.25 MiB
    ("compute", re.compile(r"compute buffer size = +([\d.]+) MiB")),
    # load_tensors:   CPU_Mapped model buffer size =    92.10 MiB
    ("weights", re.compile(r"model buffer size = +([\d.]+) MiB")),
)
# Words llama.cpp and its GPU backends log when a buffer does not fit (CUDA: "cudaMalloc
# failed: out of memory", ggml: "failed to allocate CUDA0 buffer of size", Vulkan:
# "ErrorOutOfDeviceMemory", Metal: "failed to allocate buffer").
_OOM_WORDS = (
    "out of memory",
    "failed to allocate",
    "unable to allocate",
    "outofdevicememory",
    "insufficient memory",
    "not enough memory",
)

# Where the last load put the layers and buffers, per device (``desktop.local.placement``).
LLAMA_LOAD_LOG = LoadLog()

Loader = Callable[..., Any]  # llama_cpp.Llama's signature: keyword arguments -> a model


def _note_reported_size(line: str) -> None:
    for key, pattern in _SIZE_PATTERNS:
        m = pattern.search(line)
        if m:
            value = float(m.group(1))
            if key == "kv_cache":
                LLAMA_REPORTED_MIB[key] = value
            else:  # one line per backend buffer: sum them
                LLAMA_REPORTED_MIB[key] = LLAMA_REPORTED_MIB.get(key, 0.0) + value


@functools.cache
def capture_llama_logs() -> Any:
    """Route llama.cpp's own log lines into ``LLAMA_LOG_TAIL`` instead of stderr.

    Once per process; returns the callback, which the cache keeps alive (llama.cpp holds a
    raw pointer to it).
    """
    import llama_cpp

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator,unused-ignore]
    def _on_log(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        line = text.decode("utf-8", "replace").strip()
        if line:
            LLAMA_LOG_TAIL.append(line)
            if "size =" in line:
                _note_reported_size(line)
            LLAMA_LOAD_LOG.feed(line)

    llama_cpp.llama_log_set(_on_log, ctypes.c_void_p(0))
    return _on_log


def llama_complaint() -> str:
    """The first telling llama.cpp complaint since the log was cleared, or ''.

    llama.cpp logs the cause first ("tensor 'x' data is not within the file bounds") and then
    generic lines ("failed to load model"); the cause is what a person needs.
    """
    words = ("error", "failed", "invalid", "unknown", "corrupt", "must be", "not within")
    for line in LLAMA_LOG_TAIL:
        lowered = line.lower()
        if "failed to load model" in lowered or not any(w in lowered for w in words):
            continue
        said = _strip_log_prefixes(line)
        if said.lstrip().startswith("- ") or line.startswith("print_info"):
            continue  # the file's metadata listed ("- kv 28: tokenizer.ggml.unknown_token_id")
        return said
    return ""


def _strip_log_prefixes(line: str) -> str:
    # "llama_model_load: error loading model: tensor ..." -> "tensor ..."
    while True:
        head, sep, rest = line.partition(": ")
        if sep and (head.replace("_", "").isalnum() or head == "error loading model"):
            line = rest
            continue
        return line


def _looks_like_oom(exc: BaseException) -> bool:
    text = " ".join([str(exc), *LLAMA_LOG_TAIL]).lower().replace(" ", "").replace("_", "")
    return any(w.replace(" ", "") in text for w in _OOM_WORDS)


@dataclass(frozen=True, slots=True)
class LoadParams:
    model_path: str
    n_ctx: int = 2048
    n_gpu_layers: int = 0
    n_threads: int | None = None
    flash_attn: bool = False
    kv_type: str | None = None
    n_batch: int = 512
    main_gpu: int = 0
    # the vision projector (an "mmproj" GGUF) loaded with the model: it then sees images
    mmproj_path: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The parameters by name (a model without a projector: without ``mmproj_path``, so
        a text model's stats rows read as before)."""
        data = asdict(self)
        if data["mmproj_path"] is None:
            del data["mmproj_path"]
        return data


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (``taskset``, a container's cpuset, a
    test worker pinned to one core), not every core of the machine (``os.cpu_count``): more
    llama.cpp threads than cores spin against each other and decode many times slower."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def default_threads() -> int:
    return max(1, min(8, usable_cpus()))


def check_gguf_file(path: Path) -> None:
    """Checks before llama.cpp sees the file, so bad files get a clear message naming the file
    and what is wrong (``desktop.local.catalog.ModelFileError``), never a native crash: the
    whole GGUF header is read and every tensor must lie within the file."""
    from desktop.local.catalog import read_model_info

    read_model_info(path)


def read_perf(llm: Any) -> Any | None:
    """llama.cpp's perf counters of ``llm``'s context now (None when this build has none)."""
    import llama_cpp

    with contextlib.suppress(Exception):
        return llama_cpp.llama_perf_context(llm._ctx.ctx)
    return None


def perf_timing(perf: Any | None, load_ms: float | None, **more: Any) -> Timing:
    """A call's ``Timing`` from the perf counters ``read_perf`` gave (None: not known), with
    ``load_ms`` and ``more`` (a cache restore, the images' encoding)."""
    return Timing(
        prefill_ms=float(perf.t_p_eval_ms) if perf is not None else None,
        decode_ms=float(perf.t_eval_ms) if perf is not None else None,
        prompt_eval_tokens=int(perf.n_p_eval) if perf is not None else None,
        # the evaluations t_eval_ms covers: the decode speed is n_eval / t_eval
        decode_tokens=int(perf.n_eval) if perf is not None else None,
        load_ms=load_ms,
        reported_by="llama.cpp" if perf is not None else None,
        **more,
    )


class LoadedModel:
    """A model llama.cpp holds: its parameters, the ``llama_cpp.Llama``, and what is known
    about it (name, chat template, file size and stat, quantization, GPU layers used)."""

    def __init__(
        self,
        params: LoadParams,
        llm: Any,
        load_ms: float,
        gpu_layers_used: int | None = None,
        gpu_note: str | None = None,
    ) -> None:
        self.params = params
        self.llm = llm
        self.load_ms = load_ms
        # n_gpu_layers actually used (fewer than asked after an out-of-memory retry)
        self.gpu_layers_used = params.n_gpu_layers if gpu_layers_used is None else gpu_layers_used
        self.gpu_note = gpu_note
        self.path = Path(params.model_path)
        meta: dict[str, str] = dict(getattr(llm, "metadata", {}) or {})
        self.metadata = meta
        self.name = meta.get("general.name") or self.path.stem
        self.template: str | None = meta.get("tokenizer.chat_template")
        self.formatter: Any = None  # the compiled chat template, built on first use
        # the tokens every prompt with a system message begins with (``engine.template_opening``)
        self.opening: list[int] | None = None
        # Why the file's template cannot be used (it does not compile), once that is known.
        self.template_error: str | None = None
        try:
            st = self.path.stat()
            self.file_size: int | None = st.st_size
            self.file_stat: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
        except OSError:
            self.file_size = self.file_stat = None
        self.quantization = _quantization(meta, self.path)
        # the KV cache llama.cpp allocated (its "llama_kv_cache: size" line); None if unseen
        self.kv_cache_bytes: int | None = None
        # what llama.cpp said about where the layers and buffers went (None: its log was not
        # captured), and the stats row's device / offloaded_layers / vram_bytes from it
        self.placement: Placement | None = None
        self.where = WhereItRuns()
        # the vision projector loaded with it (``desktop.local.vision_run.Vision``), or None
        self.vision: Any = None

    @property
    def block_count(self) -> int | None:
        arch = self.metadata.get("general.architecture")
        raw = self.metadata.get(f"{arch}.block_count") if arch else None
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            return None

    @property
    def report(self) -> LoadReport:
        """What the worker tells the app about this load (``desktop.local.worker``)."""
        return LoadReport(
            str(self.params.model_path),
            self.placement,
            self.where,
            self.gpu_layers_used,
            self.gpu_note,
        )

    @property
    def template_note(self) -> str | None:
        return None if self.template and not self.template_error else CHATML_TEMPLATE_NOTE

    @property
    def notice(self) -> str | None:
        """What the person should know about how this model runs (RunInfo.notice)."""
        notes = [n for n in (self.gpu_note, self.template_note) if n]
        return " ".join(notes) or None

    def run_info(self, params: LoadParams, notice: str | None) -> RunInfo:
        """What ran, for a call's stats row: this model as loaded with ``params`` (the GPU
        layers it really got), where it runs, and ``notice``."""
        load_params = params.as_dict()
        load_params["n_gpu_layers"] = self.gpu_layers_used
        return RunInfo(
            model_reported=self.name,
            backend=backend_name(),
            context_window=int(self.llm.n_ctx()),
            load_params=load_params,
            model_file_size=self.file_size,
            quantization=self.quantization,
            notice=notice,
            kv_cache_bytes=self.kv_cache_bytes,
            device=self.where.device,
            offloaded_layers=self.where.offloaded_layers,
            vram_bytes=self.where.vram_bytes,
        )


def _quantization(meta: dict[str, str], path: Path) -> str | None:
    # llama.cpp's llama_ftype names (llama.h); the file name is the fallback people rely on.
    from desktop.local.gguf import FILE_TYPES as ftype_names

    raw = meta.get("general.file_type")
    if raw is not None:
        with contextlib.suppress(ValueError):
            name = ftype_names.get(int(raw))
            if name:
                return name
    stem = path.stem.upper()
    for name in sorted(ftype_names.values(), key=len, reverse=True):
        if name in stem:
            return name
    return None


def load_model(params: LoadParams, loader: Loader | None = None) -> LoadedModel:
    """Load ``params.model_path`` with ``loader`` (``llama_cpp.Llama`` unless a test injects
    another); out of GPU memory, retry with half the GPU layers until it fits (CPU at last).
    ``load_ms`` covers it all: checking the file's header, then llama.cpp's own load."""
    started = time.perf_counter()
    path = Path(params.model_path)
    check_gguf_file(path)
    if params.mmproj_path:  # not a projector at all: said before the model loads
        from desktop.local.vision import read_projector

        read_projector(params.mmproj_path)
    if loader is None:
        try:
            import llama_cpp
        except ImportError as exc:
            raise LocalModelError(
                "llama-cpp-python is not installed, so local models cannot run. Install "
                "it with `pip install llama-cpp-python`."
            ) from exc
        loader = llama_cpp.Llama
    kwargs: dict[str, Any] = dict(
        model_path=str(path),
        n_ctx=params.n_ctx,
        n_gpu_layers=params.n_gpu_layers,
        n_threads=params.n_threads or default_threads(),
        # llama-cpp-python's own default is every core of the machine, whatever the affinity
        n_threads_batch=usable_cpus(),
        n_batch=params.n_batch,
        main_gpu=params.main_gpu,
        flash_attn=params.flash_attn,
        verbose=False,
    )
    if params.kv_type and params.kv_type != "f16":
        kwargs["type_k"] = KV_TYPE_IDS[params.kv_type]
        kwargs["type_v"] = KV_TYPE_IDS[params.kv_type]
    layers = params.n_gpu_layers
    tried: list[int] = []
    while True:
        LLAMA_LOG_TAIL.clear()
        LLAMA_REPORTED_MIB.clear()
        LLAMA_LOAD_LOG.clear()
        kwargs["n_gpu_layers"] = layers
        try:
            with _tolerant_chat_templates():
                llm = loader(**kwargs)
            break
        except (ValueError, RuntimeError, OSError, MemoryError) as exc:
            if layers != 0 and _looks_like_oom(exc):
                tried.append(layers)
                layers = _fewer_layers(path, layers)
                log.warning(
                    "%s did not fit with %s GPU layers; retrying with %s",
                    path.name,
                    tried[-1],
                    layers,
                )
                continue
            said = llama_complaint()
            detail = f" llama.cpp said: “{said}”." if said else ""
            raise LocalModelError(
                f"llama.cpp could not load the model file {path}.{detail} The file may be "
                "damaged, incomplete, or made for a newer llama.cpp; try downloading it "
                "again, another file, or a smaller context size."
            ) from exc
    load_ms = (time.perf_counter() - started) * 1000
    kv_mib = LLAMA_REPORTED_MIB.get("kv_cache")
    note = None
    if tried:
        asked = "all" if tried[0] < 0 else str(tried[0])
        where = f"{layers} layers on the GPU" if layers else "the CPU only"
        note = (
            f"Not enough GPU memory for {asked} layers; loaded with {where} "
            f"(slower). Lower n_ctx or use a smaller quantization to fit more."
        )
    log.info("loaded %s in %.0f ms (%s GPU layers)", path.name, load_ms, layers)
    model = LoadedModel(params, llm, load_ms, gpu_layers_used=layers, gpu_note=note)
    model.kv_cache_bytes = round(kv_mib * 1024 * 1024) if kv_mib is not None else None
    model.placement = LLAMA_LOAD_LOG.placement()
    model.where = _where(model)
    return model


def _where(model: LoadedModel) -> WhereItRuns:
    """The stats row's device, offloaded layers and GPU memory for ``model``. Never fails a
    load: a build whose devices cannot be listed names them by ggml's name alone."""
    from desktop.local import gpu

    placement = model.placement
    try:
        devices = gpu.devices() if placement is not None and placement.devices else ()
    except Exception:  # the device API is optional (gpu.py degrades the same way)
        devices = ()
    return where_it_runs(placement, gpu.backend_name(), model.block_count, devices)


@contextlib.contextmanager
def _tolerant_chat_templates() -> Iterator[None]:
    """While ``llama_cpp.Llama`` loads, a chat template in the file that does not compile
    must not fail the load: the constructor compiles every template in the metadata (for its
    own chat handlers, which SIMI does not use; ``LocalEngine.format_prompt`` renders the
    template itself and falls back to ChatML). A broken one becomes a handler that says so."""
    try:
        from llama_cpp import llama_chat_format
    except ImportError:
        yield
        return
    real = llama_chat_format.Jinja2ChatFormatter

    class Tolerant:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._error: Exception | None = None
            try:
                self._formatter: Any = real(*args, **kwargs)
            except Exception as exc:  # jinja2.TemplateError and whatever a template raises
                self._error = exc

        def to_chat_handler(self) -> Any:
            if self._error is None:
                return self._formatter.to_chat_handler()
            error = self._error

            def broken(*_args: Any, **_kwargs: Any) -> Any:
                raise LocalModelError(f"The model's chat template does not work: {error}")

            return broken

    llama_chat_format.Jinja2ChatFormatter = Tolerant  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        llama_chat_format.Jinja2ChatFormatter = real  # type: ignore[misc]


def _fewer_layers(path: Path, layers: int) -> int:
    """Half as many GPU layers ("all" counts as the model's layers plus its output)."""
    if layers < 0:
        from desktop.local.catalog import read_model_info

        layers = (read_model_info(path).block_count or 0) + 1
    return layers // 2
