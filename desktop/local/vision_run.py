"""Images through a local model's vision projector, in the worker process.

``attach_projector`` loads the projector (an "mmproj" GGUF) with a model: the chat handler of
``desktop.local.vision.handler_for`` becomes ``llm.chat_handler`` and its libmtmd context is
made at once, so a projector that does not fit the model fails the load with a message, not
the first image. ``generate`` is the path a request with images takes (the text path in
``desktop.local.engine`` is untouched by it): the conversation as OpenAI-style content parts
with the images as data URLs, through ``llm.create_chat_completion(stream=True)``, streamed as
the same events (text, ``Usage``, ``Timing``, ``Finished``).

Measured: ``ImageMeter`` stands between the handler and ``llama_cpp.mtmd_cpp`` (every call
passes through unchanged). Tokenizing counts the prompt's tokens and those the images take;
each image chunk's evaluation (``mtmd_helper_eval_chunk_single``: the projector encodes the
image, then llama.cpp decodes its embeddings) is timed, and the decoding's share, which
llama.cpp's perf counters hold (read after ``llama_synchronize``), is taken off: what is
left is ``Timing.image_encode_ms``, the projector's encoding. Prefill and decode come from the
same counters as on the text path (prefill: the text and the images' embeddings).

The handler evaluates the whole prompt from an empty context every time (llama-cpp-python's
handlers clear the KV cache), so nothing of it is reused, and afterwards the context is
emptied: its cells hold image embeddings under made-up token ids that the text path's prefix
match must never take for text.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import functools
import io
import logging
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from desktop.llm.errors import ContextTooLong, LocalModelError
from desktop.llm.events import Finished, StreamEvent, TextDelta, Usage
from desktop.llm.provider import ChatMessage, ChatRequest, ImagePart
from desktop.local.loading import (
    LLAMA_LOG_TAIL,
    LoadedModel,
    LoadParams,
    capture_llama_logs,
    llama_complaint,
    perf_timing,
    read_perf,
)
from desktop.local.vision import (
    CannotSeeImages,
    cannot_see_words,
    handler_for,
    image_count,
    model_label,
    read_projector,
)

log = logging.getLogger("simi.local")

# stb_image (libmtmd's decoder) reads these; anything else is converted to PNG first
DECODABLE = ("image/png", "image/jpeg", "image/gif", "image/bmp")
TOOLS_NOTICE = (
    "The conversation has images, so the tools were not offered: a local model takes tools "
    "or images in one call, not both."
)


class _Cancel(Protocol):
    def is_set(self) -> bool: ...


class _Engine(Protocol):
    """What of ``desktop.local.engine.LocalEngine`` this path uses."""

    _remember: bool

    def model_for(self, params: LoadParams) -> tuple[LoadedModel, float | None]: ...

    def _set_abort(self, model: LoadedModel, cancel: Any) -> None: ...

    def _apply_threads(self, llm: Any) -> None: ...


@dataclass(slots=True)
class Vision:
    """A loaded projector: the handler (``llm.chat_handler``), its name and why it was chosen,
    the meter between it and libmtmd, and whether the prompt format reads a message's content
    as a list of parts (vision templates do; a text model's template joins strings, so an
    image message is handed to it as one string with the image's marker in it)."""

    handler: Any
    name: str
    why: str
    meter: ImageMeter
    parts: bool = False


class ImageMeter:
    """The handler's ``_mtmd_cpp``: ``llama_cpp.mtmd_cpp`` with two calls measured."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.prompt_tokens: int | None = None
        self.image_tokens = 0
        self.images = 0
        self.encode_ms = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def reset(self) -> None:
        self.prompt_tokens, self.image_tokens, self.images, self.encode_ms = None, 0, 0, 0.0

    def mtmd_tokenize(self, ctx: Any, chunks: Any, text: Any, bitmaps: Any, n: Any) -> int:
        result = int(self._real.mtmd_tokenize(ctx, chunks, text, bitmaps, n))
        if result == 0:
            with contextlib.suppress(Exception):  # a count lost never fails the reply
                total = images = 0
                for i in range(int(self._real.mtmd_input_chunks_size(chunks))):
                    chunk = self._real.mtmd_input_chunks_get(chunks, i)
                    if chunk is None:
                        continue
                    count = int(self._real.mtmd_input_chunk_get_n_tokens(chunk))
                    total += count
                    kind = self._real.mtmd_input_chunk_get_type(chunk)
                    if kind != self._real.MTMD_INPUT_CHUNK_TYPE_TEXT:
                        images += count
                self.prompt_tokens, self.image_tokens = total, images
        return result

    def mtmd_helper_eval_chunk_single(self, ctx: Any, lctx: Any, chunk: Any, *rest: Any) -> int:
        """One image chunk: encoded by the projector, then its embeddings decoded."""
        import llama_cpp

        llama_cpp.llama_synchronize(lctx)  # earlier work counted before this chunk starts
        before = _decode_ms(lctx)
        started = time.perf_counter()
        result = int(self._real.mtmd_helper_eval_chunk_single(ctx, lctx, chunk, *rest))
        llama_cpp.llama_synchronize(lctx)  # the embeddings' decoding counted, all of it
        wall = (time.perf_counter() - started) * 1000
        self.encode_ms += max(0.0, wall - (_decode_ms(lctx) - before))
        self.images += 1
        return result


def _decode_ms(lctx: Any) -> float:
    """What llama.cpp's perf counters say the context spent decoding (prompt and tokens)."""
    import llama_cpp

    try:
        perf = llama_cpp.llama_perf_context(lctx)
        return float(perf.t_p_eval_ms) + float(perf.t_eval_ms)
    except Exception:
        return 0.0


@functools.cache
def _route_mtmd_logs() -> None:
    """libmtmd and its projector loader log through their own setters: into llama.cpp's tail
    too (``desktop.local.loading.capture_llama_logs``), never to the worker's stderr."""
    import llama_cpp.mtmd_cpp as mtmd_cpp

    callback = capture_llama_logs()
    with contextlib.suppress(AttributeError):
        mtmd_cpp.mtmd_log_set(callback, ctypes.c_void_p(0))
        mtmd_cpp.mtmd_helper_log_set(callback, ctypes.c_void_p(0))


def attach_projector(model: LoadedModel) -> None:
    """Load ``model.params.mmproj_path`` with the model (``model.vision``; the handler is
    ``llm.chat_handler``). ``LocalModelError`` naming both files when llama.cpp refuses."""
    params = model.params
    mmproj = str(Path(params.mmproj_path or "").expanduser())
    started = time.perf_counter()
    projector = read_projector(mmproj)  # ProjectorError: not a projector at all
    from llama_cpp import llama_chat_format

    name, why = handler_for(params.model_path, mmproj, model.metadata, projector.metadata)
    cls = getattr(llama_chat_format, name)
    kwargs: dict[str, Any] = {"clip_model_path": mmproj, "verbose": False}
    if issubclass(cls, llama_chat_format.MTMDChatHandler):
        kwargs["use_gpu"] = params.n_gpu_layers != 0  # a CPU-only agent keeps it on the CPU
    handler = cls(**kwargs)
    meter = ImageMeter(handler._mtmd_cpp)
    handler._mtmd_cpp = meter
    _route_mtmd_logs()
    LLAMA_LOG_TAIL.clear()
    try:
        handler._init_mtmd_context(model.llm)
    except (ValueError, RuntimeError, OSError) as exc:
        said = (llama_complaint() or str(exc)).strip().splitlines()[0]
        label = model_label(params.model_path)
        raise LocalModelError(
            f"The vision projector {Path(mmproj).name} could not be loaded with {label}: "
            f"llama.cpp said “{said}”. Choose the “mmproj” file from the model's own "
            "repository, or clear the agent's vision projector to use the model for text."
        ) from exc
    parts = False
    if isinstance(handler, llama_chat_format.MTMDChatHandler):
        parts = takes_parts(model.template or "")
        if not parts:
            _flatten_parts(handler)
    model.llm.chat_handler = handler
    model.vision = Vision(handler, name, why, meter, parts)
    model.load_ms += (time.perf_counter() - started) * 1000
    log.info("vision projector %s loaded with %s (%s: %s)", mmproj, model.name, name, why)


def takes_parts(template: str) -> bool:
    """Whether a chat template renders a message whose content is a list of parts (as
    multimodal templates do), found by rendering one: a text model's template fails on it or
    prints the list's repr."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    probe = "simi-probe-7f3a"
    try:
        formatter = Jinja2ChatFormatter(template=template, eos_token="", bos_token="")
        messages: Any = [{"role": "user", "content": [{"type": "text", "text": probe}]}]
        prompt = str(formatter(messages=messages).prompt)
    except Exception:  # a template that cannot take them, or none at all
        return False
    return probe in prompt and "'type'" not in prompt


def _flatten_parts(handler: Any) -> None:
    """libmtmd's handler turns each image part into a text part holding the image's marker;
    for a template that joins strings, a message's parts become one string (the markers
    where the images go, then the text). The images are still read from the parts."""
    convert = handler._get_template_messages

    def flattened(messages: Any, media_marker: str) -> Any:
        out = convert(messages, media_marker)
        for message in out:
            content = message.get("content")
            if isinstance(content, list):
                texts = [str(p.get("text", "")) for p in content if isinstance(p, dict)]
                message["content"] = "\n".join(t for t in texts if t)
        return out

    handler._get_template_messages = flattened


# the request -----------------------------------------------------------------------------------
def data_url(image: ImagePart) -> str:
    """The image as a data URL, in a format libmtmd decodes (WebP and others: as PNG)."""
    mime, data = image.mime.lower(), image.data
    if mime not in DECODABLE:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            out = io.BytesIO()
            im.save(out, format="PNG")
        mime, data = "image/png", out.getvalue()
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def chat_messages(messages: Sequence[ChatMessage], *, parts_always: bool) -> list[dict[str, Any]]:
    """The conversation as the handlers take it: a user message's images as ``image_url``
    parts (data URLs) before its text. A tool's result is the user's turn (the handlers'
    formats know no tool role) and turns of one role in a row become one (templates that
    insist roles alternate). ``parts_always``: text alone is a list of one part too (the
    template reads every message's content as parts)."""
    turns: list[tuple[str, list[str], list[ImagePart]]] = []
    for m in messages:
        role: str = "user" if m.role == "tool" else m.role
        text = f"Result of the tool call: {m.content}" if m.role == "tool" else m.content
        images = list(m.images) if role == "user" else []
        if turns and turns[-1][0] == role and role != "system":
            turns[-1][1].append(text)
            turns[-1][2].extend(images)
        else:
            turns.append((role, [text], images))
    out: list[dict[str, Any]] = []
    for who, texts, images in turns:
        text = "\n\n".join(t for t in texts if t)
        if images or parts_always:
            parts: list[dict[str, Any]] = [
                {"type": "image_url", "image_url": {"url": data_url(i)}} for i in images
            ]
            parts.append({"type": "text", "text": text})
            out.append({"role": who, "content": parts})
        else:
            out.append({"role": who, "content": text})
    return out


def generate(
    engine: _Engine, params: LoadParams, request: ChatRequest, cancel: _Cancel
) -> Iterator[StreamEvent]:
    """A request with images, through the projector's chat handler."""
    import llama_cpp

    model, load_ms = engine.model_for(params)
    vision: Vision | None = model.vision
    if vision is None:  # loaded without a projector (the callers refuse first)
        label = model_label(params.model_path)
        raise CannotSeeImages(cannot_see_words(label, None, image_count(request)))
    llm = model.llm
    n_ctx = int(llm.n_ctx())
    notice = " ".join(n for n in (model.gpu_note, TOOLS_NOTICE if request.tools else None) if n)
    yield model.run_info(params, notice or None)
    messages = chat_messages(request.messages, parts_always=vision.parts)
    sampling = request.sampling
    meter = vision.meter
    meter.reset()
    engine._remember = False  # the engine's flag: nothing of this context is kept
    ctx = llm._ctx.ctx
    with contextlib.suppress(Exception):
        llama_cpp.llama_perf_context_reset(ctx)
    texts: list[str] = []
    reason: str | None = None
    stream: Any = None
    try:
        engine._set_abort(model, cancel)  # the prompt: llama.cpp checks the flag per node
        engine._apply_threads(llm)
        try:
            stream = llm.create_chat_completion(
                messages=messages,
                stream=True,
                temperature=sampling.temperature if sampling.temperature is not None else 0.8,
                top_p=sampling.top_p if sampling.top_p is not None else 0.95,
                top_k=40,
                min_p=0.05,
                repeat_penalty=1.1,  # as the text path: small models loop without it
                max_tokens=sampling.max_tokens,
                stop=list(sampling.stop),
                seed=sampling.seed,
            )
        finally:
            engine._set_abort(model, None)
        for chunk in stream if not cancel.is_set() else ():
            if cancel.is_set():
                break
            engine._apply_threads(llm)
            choice = chunk["choices"][0]
            text = choice.get("delta", {}).get("content")
            if text:
                texts.append(text)
                yield TextDelta(text)
            if choice.get("finish_reason"):
                reason = str(choice["finish_reason"])
    except Exception as exc:
        if not cancel.is_set():
            raise _failure(exc, model, meter, n_ctx) from exc
    finally:
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()
        llm.reset()  # image embeddings under made-up ids: the text path must not match them
    finish = reason if reason in ("stop", "length") else None
    if finish is None:
        finish = "cancelled" if cancel.is_set() else "length"
    perf = read_perf(llm)
    reply = "".join(texts)
    output = len(llm.tokenize(reply.encode("utf-8"), add_bos=False, special=False)) if reply else 0
    yield Usage(
        prompt_tokens=meter.prompt_tokens,
        cached_tokens=0,
        output_tokens=output,
        source="reported",
        image_tokens=meter.image_tokens or None,
    )
    yield perf_timing(
        perf, load_ms, image_encode_ms=round(meter.encode_ms, 2) if meter.images else None
    )
    yield Finished(finish)  # type: ignore[arg-type]


_TOO_LONG = re.compile(r"(?:exceeds n_ctx: |Requested tokens \()(\d+)")


def _failure(exc: Exception, model: LoadedModel, meter: ImageMeter, n_ctx: int) -> Exception:
    """What llama-cpp-python's handler raised, in words for the person."""
    said = str(exc)
    label = model_label(model.params.model_path)
    too_long = _TOO_LONG.search(said)
    if too_long:
        needed = meter.prompt_tokens or int(too_long.group(1))
        return ContextTooLong(
            f"This conversation is {needed:,} tokens long with its images, but {label} is "
            f"loaded with a context of {n_ctx:,} tokens. Start a new conversation, send fewer "
            "or smaller images, or raise the agent's context size (n_ctx).",
            needed_tokens=needed,
            n_ctx=n_ctx,
        )
    if "bitmap" in said:
        return LocalModelError(
            f"llama.cpp could not decode an image for {label}. Attach it as a PNG or "
            "JPEG file and send it again."
        )
    complaint = llama_complaint().strip().splitlines()[:1]
    detail = f" llama.cpp said: “{complaint[0]}”." if complaint else f" ({said})"
    return LocalModelError(
        f"llama.cpp could not read the images with {label}'s vision projector.{detail} "
        "Try again with fewer or smaller images, or check that the projector belongs to "
        "the model."
    )
