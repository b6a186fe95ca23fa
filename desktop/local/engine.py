"""llama.cpp hosting for local agents.

Foundation version: models are loaded in this process and run on one dedicated thread, so the
GUI thread never blocks (llama.cpp releases the GIL while it computes). The local-engine work
moves the same ``generate`` loop into an isolated worker process; keep everything that talks to
llama.cpp in this module so that move stays small.
"""

from __future__ import annotations

import codecs
import collections
import contextlib
import ctypes
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from desktop.llm.errors import ContextTooLong, LocalModelError
from desktop.llm.events import Finished, RunInfo, StreamEvent, TextDelta, Timing, Usage
from desktop.llm.provider import ChatMessage, ChatRequest

log = logging.getLogger("simi.local")

GGUF_MAGIC = b"GGUF"
# ggml_type ids for the KV cache (ggml.h): F16 = 1, Q4_0 = 2, Q8_0 = 8.
KV_TYPE_IDS = {"f16": 1, "q4_0": 2, "q8_0": 8}
CHATML_TEMPLATE_NOTE = "No chat template in the model file; using ChatML."


# The last lines llama.cpp logged (in the worker process), so a load failure can say what
# llama.cpp itself complained about instead of llama-cpp-python's bare "Failed to load".
LLAMA_LOG_TAIL: collections.deque[str] = collections.deque(maxlen=40)
# What llama.cpp itself reported about the last load, in MiB: "kv_cache", "compute" (summed
# over backends), "weights". Verbose loads log thousands of lines, so these are kept aside
# from the tail. Filled only while ``capture_llama_logs`` is active.
LLAMA_REPORTED_MIB: dict[str, float] = {}
_log_callback: object = None
_SIZE_PATTERNS = (
    # llama_kv_cache: size =   23.91 MiB (  2048 cells,  30 layers, ...)
    ("kv_cache", re.compile(r"llama_kv_cache: size = +([\d.]+) MiB")),
    # sched_reserve:        CPU compute buffer size =    98.25 MiB
    ("compute", re.compile(r"compute buffer size = +([\d.]+) MiB")),
    # load_tensors:   CPU_Mapped model buffer size =    92.10 MiB
    ("weights", re.compile(r"model buffer size = +([\d.]+) MiB")),
)


def _note_reported_size(line: str) -> None:
    for key, pattern in _SIZE_PATTERNS:
        m = pattern.search(line)
        if m:
            value = float(m.group(1))
            if key == "kv_cache":
                LLAMA_REPORTED_MIB[key] = value
            else:  # one line per backend buffer: sum them
                LLAMA_REPORTED_MIB[key] = LLAMA_REPORTED_MIB.get(key, 0.0) + value


def capture_llama_logs() -> None:
    """Route llama.cpp's own log lines into ``LLAMA_LOG_TAIL`` instead of stderr."""
    global _log_callback
    import llama_cpp

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator,unused-ignore]
    def _on_log(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        line = text.decode("utf-8", "replace").strip()
        if line:
            LLAMA_LOG_TAIL.append(line)
            if "size =" in line:
                _note_reported_size(line)

    _log_callback = _on_log  # keep a reference: llama.cpp holds a raw pointer to it
    llama_cpp.llama_log_set(_on_log, ctypes.c_void_p(0))


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
        return _strip_log_prefixes(line)
    return ""


def _strip_log_prefixes(line: str) -> str:
    # "llama_model_load: error loading model: tensor ..." -> "tensor ..."
    while True:
        head, sep, rest = line.partition(": ")
        if sep and (head.replace("_", "").isalnum() or head == "error loading model"):
            line = rest
            continue
        return line


class CancelFlag(Protocol):
    """Anything with ``is_set()``: a ``threading.Event`` or the worker's shared flag."""

    def is_set(self) -> bool: ...


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_threads() -> int:
    return max(1, min(8, (os.cpu_count() or 2)))


def check_gguf_file(path: Path) -> None:
    """Checks before llama.cpp sees the file, so bad files get a clear message naming the file
    and what is wrong (``desktop.local.catalog.ModelFileError``), never a native crash: the
    whole GGUF header is read and every tensor must lie within the file."""
    from desktop.local.catalog import read_model_info

    read_model_info(path)


def chatml_prompt(messages: list[dict[str, str]]) -> str:
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


class LoadedModel:
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
        try:
            st = self.path.stat()
            self.file_size: int | None = st.st_size
            self.file_stat: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
        except OSError:
            self.file_size = self.file_stat = None
        self.quantization = _quantization(meta, self.path)

    @property
    def template_note(self) -> str | None:
        return None if self.template else CHATML_TEMPLATE_NOTE

    @property
    def notice(self) -> str | None:
        """What the person should know about how this model runs (RunInfo.notice)."""
        notes = [n for n in (self.gpu_note, self.template_note) if n]
        return " ".join(notes) or None


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


def backend_name() -> str:
    try:
        import llama_cpp
    except ImportError:
        return "unavailable"
    try:
        if not llama_cpp.llama_supports_gpu_offload():
            return "CPU"
    except Exception:
        return "CPU"
    for attr, name in (("GGML_USE_CUDA", "CUDA"), ("GGML_USE_METAL", "Metal")):
        if getattr(llama_cpp, attr, False):
            return name
    return "GPU"


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


def _looks_like_oom(exc: BaseException) -> bool:
    text = " ".join([str(exc), *LLAMA_LOG_TAIL]).lower().replace(" ", "").replace("_", "")
    return any(w.replace(" ", "") in text for w in _OOM_WORDS)


Loader = Callable[..., Any]  # llama_cpp.Llama's signature: keyword arguments -> a model


class LocalEngine:
    """Keeps at most one llama.cpp model loaded and generates from it, synchronously.

    ``generate`` is a blocking generator meant to run on the engine's thread; ``lock`` makes
    sure only one call touches llama.cpp at a time. ``loader`` builds the model
    (``llama_cpp.Llama`` unless a test injects a failing one).
    """

    def __init__(self, loader: Loader | None = None) -> None:
        self._model: LoadedModel | None = None
        self._unreported_load_ms: float | None = None
        self._loader = loader
        self._abort_cb: Any = None  # keep the ctypes callback alive while llama.cpp holds it
        self.lock = threading.Lock()

    @property
    def loaded(self) -> LoadedModel | None:
        return self._model

    def unload(self) -> None:
        model, self._model = self._model, None
        if model is not None:
            with contextlib.suppress(Exception):
                model.llm.close()

    def _load(self, params: LoadParams) -> LoadedModel:
        path = Path(params.model_path)
        check_gguf_file(path)
        loader = self._loader
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
            n_batch=params.n_batch,
            main_gpu=params.main_gpu,
            flash_attn=params.flash_attn,
            verbose=False,
        )
        if params.kv_type and params.kv_type != "f16":
            kwargs["type_k"] = KV_TYPE_IDS[params.kv_type]
            kwargs["type_v"] = KV_TYPE_IDS[params.kv_type]
        started = time.perf_counter()
        layers = params.n_gpu_layers
        tried: list[int] = []
        while True:
            LLAMA_LOG_TAIL.clear()
            LLAMA_REPORTED_MIB.clear()
            kwargs["n_gpu_layers"] = layers
            try:
                llm = loader(**kwargs)
                break
            except (ValueError, RuntimeError, OSError, MemoryError) as exc:
                if layers != 0 and _looks_like_oom(exc):
                    tried.append(layers)
                    layers = self._fewer_layers(path, layers)
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
        note = None
        if tried:
            asked = "all" if tried[0] < 0 else str(tried[0])
            where = f"{layers} layers on the GPU" if layers else "the CPU only"
            note = (
                f"Not enough GPU memory for {asked} layers; loaded with {where} "
                f"(slower). Lower n_ctx or use a smaller quantization to fit more."
            )
        log.info("loaded %s in %.0f ms (%s GPU layers)", path.name, load_ms, layers)
        return LoadedModel(params, llm, load_ms, gpu_layers_used=layers, gpu_note=note)

    @staticmethod
    def _fewer_layers(path: Path, layers: int) -> int:
        """Half as many GPU layers ("all" counts as the model's layers plus its output)."""
        if layers < 0:
            from desktop.local.catalog import read_model_info

            layers = (read_model_info(path).block_count or 0) + 1
        return layers // 2

    def model_for(self, params: LoadParams) -> tuple[LoadedModel, float | None]:
        """The loaded model for ``params`` (loading it if needed) and the load time not yet
        reported to any call (so the call that caused a load reports it)."""
        model = self.ensure_loaded(params)
        load_ms, self._unreported_load_ms = self._unreported_load_ms, None
        return model, load_ms

    def ensure_loaded(self, params: LoadParams) -> LoadedModel:
        if self._model is None or self._model.params != params:
            self.unload()
            self._model = self._load(params)
            self._unreported_load_ms = self._model.load_ms
        return self._model

    @staticmethod
    def format_prompt(
        model: LoadedModel, messages: tuple[ChatMessage, ...]
    ) -> tuple[str, tuple[str, ...], bool]:
        """Render the conversation with the model's own template (ChatML if it has none).

        Returns (prompt, extra stop strings, whether BOS is already in the text).
        """
        msgs = [{"role": m.role, "content": m.content} for m in messages]
        if not model.template:
            return chatml_prompt(msgs), ("<|im_end|>",), False
        formatter = model.formatter
        if formatter is None:
            # Compiling the Jinja template takes ~1.5 ms: once per loaded model, not per turn.
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            llm = model.llm
            eos = llm._model.token_get_text(llm.token_eos()) if llm.token_eos() != -1 else ""
            bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() != -1 else ""
            formatter = Jinja2ChatFormatter(template=model.template, eos_token=eos, bos_token=bos)
            model.formatter = formatter
        try:
            result = formatter(messages=msgs)
        except Exception as exc:  # a broken template in the file: say so, fall back to ChatML
            log.warning("chat template of %s failed (%s); using ChatML", model.path.name, exc)
            return chatml_prompt(msgs), ("<|im_end|>",), False
        stops = (
            result.stop if isinstance(result.stop, list) else [result.stop] if result.stop else []
        )
        return result.prompt, tuple(s for s in stops if s), bool(result.added_special)

    def generate(
        self, params: LoadParams, request: ChatRequest, cancel: CancelFlag
    ) -> Iterator[StreamEvent]:
        with self.lock:
            yield from self._generate(params, request, cancel)

    def _ensure_file_still_there(self, params: LoadParams) -> None:
        """A loaded model whose file was deleted or replaced still answers from memory (the
        mapping outlives the name), but the agent points at a file that is gone: say so now,
        free the memory, and let the next load read the new file if there is one."""
        model = self._model
        if model is None or model.params != params:
            return
        try:
            st = model.path.stat()
        except OSError:
            self.unload()
            from desktop.local.catalog import ModelFileError

            raise ModelFileError(
                model.path,
                "the file was deleted or moved while the model was loaded; the model has "
                "been unloaded. Choose the file again in the agent, or restore it",
            ) from None
        if model.file_stat is not None and (st.st_size, st.st_mtime_ns) != model.file_stat:
            log.info("%s changed on disk; reloading", model.path.name)
            self.unload()

    def _set_abort(self, model: LoadedModel, cancel: CancelFlag | None) -> None:
        """Let llama.cpp check ``cancel`` inside llama_decode, or stop checking (None).

        ggml calls the abort callback after every graph node (hundreds per token); as a Python
        callback that costs ~1 % of decode speed, so it is only on during prefill, where a
        batch can take seconds. During decode the loop checks the flag between tokens.
        """
        import llama_cpp

        if cancel is None:
            if self._abort_cb is not None:
                null = llama_cpp.ggml_abort_callback()  # a NULL function pointer: no callback
                llama_cpp.llama_set_abort_callback(model.llm._ctx.ctx, null, None)
                self._abort_cb = None
            return

        @llama_cpp.ggml_abort_callback  # type: ignore[untyped-decorator,unused-ignore]
        def should_abort(_data: ctypes.c_void_p) -> bool:
            return cancel.is_set()

        self._abort_cb = should_abort
        llama_cpp.llama_set_abort_callback(model.llm._ctx.ctx, should_abort, None)

    def _generate(
        self, params: LoadParams, request: ChatRequest, cancel: CancelFlag
    ) -> Iterator[StreamEvent]:
        import llama_cpp

        self._ensure_file_still_there(params)
        model, load_ms = self.model_for(params)
        llm = model.llm
        n_ctx = int(llm.n_ctx())
        load_params = params.as_dict()
        load_params["n_gpu_layers"] = model.gpu_layers_used
        yield RunInfo(
            model_reported=model.name,
            backend=backend_name(),
            context_window=n_ctx,
            load_params=load_params,
            model_file_size=model.file_size,
            quantization=model.quantization,
            notice=model.notice,
        )
        prompt, template_stops, has_bos = self.format_prompt(model, request.messages)
        tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=not has_bos, special=True)
        if len(tokens) >= n_ctx - 1:
            raise ContextTooLong(
                f"This conversation is {len(tokens):,} tokens long, but {model.name} is loaded "
                f"with a context of {n_ctx:,} tokens. Start a new conversation, shorten the "
                "message, or raise the agent's context size (n_ctx).",
                needed_tokens=len(tokens),
                n_ctx=n_ctx,
            )
        room = n_ctx - len(tokens)
        max_tokens = min(request.sampling.max_tokens or room, room)
        stops = tuple(dict.fromkeys((*request.sampling.stop, *template_stops)))
        cached = _common_prefix(list(llm._input_ids[: llm.n_tokens]), tokens)
        cached = min(cached, len(tokens) - 1)
        if request.sampling.seed is not None:
            llm.set_seed(request.sampling.seed)
        ctx = llm._ctx.ctx
        with contextlib.suppress(Exception):
            llama_cpp.llama_perf_context_reset(ctx)

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        held = ""
        output_tokens = 0
        finish = "length"
        vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
        generator = llm.generate(
            tokens,
            temp=request.sampling.temperature if request.sampling.temperature is not None else 0.8,
            top_p=request.sampling.top_p if request.sampling.top_p is not None else 0.95,
            top_k=40,
            min_p=0.05,
            # A mild penalty: small models (the 135M starter) otherwise loop on one line.
            repeat_penalty=1.1,
            reset=True,
        )
        self._set_abort(model, cancel)  # prefill: llama.cpp checks the flag between nodes
        prefilling = True
        try:
            for token in generator:
                if prefilling:
                    prefilling = False
                    self._set_abort(model, None)
                if cancel.is_set():
                    finish = "cancelled"
                    break
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    finish = "stop"
                    break
                output_tokens += 1
                held += decoder.decode(llm.detokenize([token], special=False))
                emit, held, hit = _split_on_stops(held, stops)
                if emit:
                    yield TextDelta(emit)
                if hit:
                    finish = "stop"
                    held = ""
                    break
                if output_tokens >= max_tokens:
                    finish = "length"
                    break
                if cancel.is_set():
                    finish = "cancelled"
                    break
        except Exception as exc:
            if not cancel.is_set():
                raise LocalModelError(f"llama.cpp failed while generating: {exc}") from exc
            # The abort callback stopped llama_decode mid-prefill (it returns 2, which
            # llama-cpp-python raises as RuntimeError). The next eval drops the partial cells.
            finish = "cancelled"
        finally:
            generator.close()
            self._set_abort(model, None)
        held += decoder.decode(b"", final=True)
        if (held and finish != "stop") or (held and finish == "stop"):
            yield TextDelta(held)
        perf = None
        with contextlib.suppress(Exception):
            perf = llama_cpp.llama_perf_context(ctx)
        yield Usage(
            prompt_tokens=len(tokens),
            cached_tokens=cached,
            output_tokens=output_tokens,
            source="reported",
        )
        yield Timing(
            prefill_ms=float(perf.t_p_eval_ms) if perf is not None else None,
            decode_ms=float(perf.t_eval_ms) if perf is not None else None,
            prompt_eval_tokens=int(perf.n_p_eval) if perf is not None else None,
            load_ms=load_ms,
        )
        yield Finished(finish)  # type: ignore[arg-type]


def count_prompt_tokens(model: LoadedModel, messages: tuple[ChatMessage, ...]) -> int:
    """Prompt tokens for ``messages`` exactly as ``generate`` renders and tokenizes them."""
    prompt, _stops, has_bos = LocalEngine.format_prompt(model, messages)
    return len(model.llm.tokenize(prompt.encode("utf-8"), add_bos=not has_bos, special=True))


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _split_on_stops(text: str, stops: tuple[str, ...]) -> tuple[str, str, bool]:
    """Return (text safe to show, text held back, whether a stop string was hit)."""
    if not stops:
        return text, "", False
    first = -1
    for stop in stops:
        i = text.find(stop)
        if i != -1 and (first == -1 or i < first):
            first = i
    if first != -1:
        return text[:first], "", True
    keep = 0
    for stop in stops:
        for k in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:k]):
                keep = max(keep, k)
                break
    if keep:
        return text[:-keep], text[-keep:], False
    return text, "", False
