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
import threading
import time
from collections.abc import Iterator
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
_log_callback: object = None


def capture_llama_logs() -> None:
    """Route llama.cpp's own log lines into ``LLAMA_LOG_TAIL`` instead of stderr."""
    global _log_callback
    import llama_cpp

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator,unused-ignore]
    def _on_log(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        line = text.decode("utf-8", "replace").strip()
        if line:
            LLAMA_LOG_TAIL.append(line)

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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_threads() -> int:
    return max(1, min(8, (os.cpu_count() or 2)))


def check_gguf_file(path: Path) -> None:
    """Cheap checks before llama.cpp sees the file, so common mistakes get a clear message."""
    if not path.exists():
        raise LocalModelError(f"The model file {path} does not exist. Choose another GGUF file.")
    if not path.is_file():
        raise LocalModelError(f"{path} is not a file. Choose a GGUF model file.")
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise LocalModelError(f"The model file {path} cannot be read ({exc.strerror}).") from exc
    if len(head) < 4:
        raise LocalModelError(f"The model file {path} is empty or truncated; download it again.")
    if head != GGUF_MAGIC:
        raise LocalModelError(
            f"{path} is not a GGUF model (it does not start with 'GGUF'). Choose a .gguf file "
            "made for llama.cpp."
        )


def chatml_prompt(messages: list[dict[str, str]]) -> str:
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


class LoadedModel:
    def __init__(self, params: LoadParams, llm: Any, load_ms: float) -> None:
        self.params = params
        self.llm = llm
        self.load_ms = load_ms
        self.path = Path(params.model_path)
        meta: dict[str, str] = dict(getattr(llm, "metadata", {}) or {})
        self.metadata = meta
        self.name = meta.get("general.name") or self.path.stem
        self.template: str | None = meta.get("tokenizer.chat_template")
        self.file_size = self.path.stat().st_size if self.path.exists() else None
        self.quantization = _quantization(meta, self.path)

    @property
    def template_note(self) -> str | None:
        return None if self.template else CHATML_TEMPLATE_NOTE


def _quantization(meta: dict[str, str], path: Path) -> str | None:
    # llama.cpp's llama_ftype names (llama.h); the file name is the fallback people rely on.
    ftype_names = {
        0: "F32",
        1: "F16",
        2: "Q4_0",
        3: "Q4_1",
        7: "Q8_0",
        8: "Q5_0",
        9: "Q5_1",
        10: "Q2_K",
        11: "Q3_K_S",
        12: "Q3_K_M",
        13: "Q3_K_L",
        14: "Q4_K_S",
        15: "Q4_K_M",
        16: "Q5_K_S",
        17: "Q5_K_M",
        18: "Q6_K",
        32: "BF16",
    }
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


class LocalEngine:
    """Keeps at most one llama.cpp model loaded and generates from it, synchronously.

    ``generate`` is a blocking generator meant to run on the engine's thread; ``lock`` makes
    sure only one call touches llama.cpp at a time.
    """

    def __init__(self) -> None:
        self._model: LoadedModel | None = None
        self._unreported_load_ms: float | None = None
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
        try:
            import llama_cpp
        except ImportError as exc:
            raise LocalModelError(
                "llama-cpp-python is not installed, so local models cannot run. Install it with "
                "`pip install llama-cpp-python`."
            ) from exc
        kwargs: dict[str, Any] = dict(
            model_path=str(path),
            n_ctx=params.n_ctx,
            n_gpu_layers=params.n_gpu_layers,
            n_threads=params.n_threads or default_threads(),
            n_batch=params.n_batch,
            flash_attn=params.flash_attn,
            verbose=False,
        )
        if params.kv_type and params.kv_type != "f16":
            kwargs["type_k"] = KV_TYPE_IDS[params.kv_type]
            kwargs["type_v"] = KV_TYPE_IDS[params.kv_type]
        started = time.perf_counter()
        LLAMA_LOG_TAIL.clear()
        try:
            llm = llama_cpp.Llama(**kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            said = llama_complaint()
            detail = f" llama.cpp said: “{said}”." if said else ""
            raise LocalModelError(
                f"llama.cpp could not load the model file {path}.{detail} The file may be "
                "damaged, incomplete, or made for a newer llama.cpp; try downloading it again, "
                "another file, or a smaller context size."
            ) from exc
        load_ms = (time.perf_counter() - started) * 1000
        log.info("loaded %s in %.0f ms", path.name, load_ms)
        return LoadedModel(params, llm, load_ms)

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

    def format_prompt(
        self, model: LoadedModel, messages: tuple[ChatMessage, ...]
    ) -> tuple[str, tuple[str, ...], bool]:
        """Render the conversation with the model's own template (ChatML if it has none).

        Returns (prompt, extra stop strings, whether BOS is already in the text).
        """
        msgs = [{"role": m.role, "content": m.content} for m in messages]
        if not model.template:
            return chatml_prompt(msgs), ("<|im_end|>",), False
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        llm = model.llm
        eos = llm._model.token_get_text(llm.token_eos()) if llm.token_eos() != -1 else ""
        bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() != -1 else ""
        formatter = Jinja2ChatFormatter(template=model.template, eos_token=eos, bos_token=bos)
        try:
            result = formatter(messages=msgs)  # type: ignore[arg-type]
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

    def _generate(
        self, params: LoadParams, request: ChatRequest, cancel: CancelFlag
    ) -> Iterator[StreamEvent]:
        import llama_cpp

        model, load_ms = self.model_for(params)
        llm = model.llm
        n_ctx = int(llm.n_ctx())
        yield RunInfo(
            model_reported=model.name,
            backend=backend_name(),
            context_window=n_ctx,
            load_params=params.as_dict(),
            model_file_size=model.file_size,
            quantization=model.quantization,
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
        try:
            for token in generator:
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
