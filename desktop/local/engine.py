"""The llama.cpp engine of the worker process: one loaded model, and generating from it.

``LocalEngine.generate`` is the decode loop ``desktop.local.worker`` runs for each request:
render the conversation with the model's chat template, reuse the KV cache for the prompt's
common prefix, stream text (held back while it may be the start of a stop string), and stop
within one token when the cancel flag is set (within one batch during prefill, through
llama.cpp's abort callback). Loading, and the out-of-GPU-memory retry, are in
``desktop.local.loading``. A request with tools goes through ``desktop.local.tool_calls``:
the model's own template with the tools, or a grammar-constrained reply (and a notice). A
request with images goes through the model's vision projector (``desktop.local.vision_run``);
one for a model loaded without a projector is refused before any work.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from desktop.llm.errors import ContextTooLong, LocalModelError
from desktop.llm.events import (
    Finished,
    PrefillProgress,
    StreamEvent,
    TextDelta,
    Usage,
)
from desktop.llm.provider import ChatMessage, ChatRequest
from desktop.llm.tool_wire import length_mid_call
from desktop.local import tool_calls, vision_run
from desktop.local.gpu import backend_name
from desktop.local.loading import (
    CHATML_TEMPLATE_NOTE,
    LoadedModel,
    Loader,
    LoadParams,
    load_model,
    perf_timing,
    read_perf,
)
from desktop.local.prompt_cache import SAVE_MIN_TOKENS, common_prefix
from desktop.local.reuse import PromptReuse
from desktop.local.vision import image_count, refuse_images

log = logging.getLogger("simi.local")


class CancelFlag(Protocol):
    """Anything with ``is_set()``: a ``threading.Event`` or the worker's shared flag."""

    def is_set(self) -> bool: ...


def chatml_prompt(messages: list[dict[str, str]]) -> str:
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


class LocalEngine:
    """Keeps at most one llama.cpp model loaded and generates from it, synchronously.

    ``generate`` is a blocking generator (the worker process runs it; tests and the decode
    benchmark run it in their own process); ``lock`` makes sure only one call touches
    llama.cpp at a time. ``loader`` builds the model (``llama_cpp.Llama`` unless a test
    injects a failing one).
    """

    # A long prefill says how far it got at most this often (PrefillProgress).
    PROGRESS_INTERVAL_S = 0.25

    def __init__(
        self, loader: Loader | None = None, progress_interval_s: float = PROGRESS_INTERVAL_S
    ) -> None:
        self.progress_interval_s = progress_interval_s
        self._model: LoadedModel | None = None
        self._unreported_load_ms: float | None = None
        self._loader = loader
        self._abort_cb: Any = None  # keep the ctypes callback alive while llama.cpp holds it
        self.lock = threading.Lock()
        # The worker's shared thread budget (anything with ``.value``): 0 = the model's own
        # thread counts, N = at most N while other workers answer too (desktop.local.pool).
        self.thread_budget: Any = None
        self.reuse = PromptReuse()  # memory cache and saved system prompts
        self._remember = False  # the last reply ended cleanly: its context is worth keeping
        self._threads_now: tuple[Any, int] | None = None  # (model, budget) llama.cpp follows

    @property
    def loaded(self) -> LoadedModel | None:
        return self._model

    def unload(self) -> None:
        self._remember = False
        model, self._model = self._model, None
        self.reuse.forget_model()
        if model is not None:
            with contextlib.suppress(Exception):
                model.llm.close()

    def model_for(self, params: LoadParams) -> tuple[LoadedModel, float | None]:
        """The loaded model for ``params`` (loading it if needed) and the load time not yet
        reported to any call (so the call that caused a load reports it)."""
        model = self.ensure_loaded(params)
        load_ms, self._unreported_load_ms = self._unreported_load_ms, None
        return model, load_ms

    def preload(self, params: LoadParams, stop: Callable[[], bool] | None = None) -> LoadedModel:
        """Load ahead of a request: no call waited for it, so none reports its load time; then
        ``warm_up`` (cut short once ``stop()`` is true: a request is waiting)."""
        model = self.ensure_loaded(params)
        self._unreported_load_ms = None
        self.warm_up(model, stop)
        return model

    def warm_up(self, model: LoadedModel, stop: Callable[[], bool] | None = None) -> bool:
        """Pay ahead what a first reply pays and a warm one does not; True when it ran to the
        end. Nothing of it changes a reply (``tests/local/test_warm_up.py``):

        * a short prompt and one token, evaluated and dropped (as llama.cpp's own tools warm
          up): it faults the mapped weights in and sizes the compute buffers (starter, 2 cores:
          first-reply TTFT 237 -> 178 ms);
        * the chat template's opening (``template_opening``: ``<|im_start|>system\\n``, the
          tokens every prompt with a system message begins with) evaluated and left in the
          live context, as a warm worker has it from its last reply: the first prompt reuses
          it through the usual prefix match (starter: 3 of the bench prompt's 35 tokens).

        ``stop()`` is asked between the steps and by llama.cpp between graph nodes (the abort
        callback); when it says stop, or a step fails, the context is left empty, as after a
        plain load. The sampler, its seed and the prompt caches are never touched.
        """
        llm = model.llm
        done = False
        halt = _Stop(stop)
        with self.lock:
            self._set_abort(model, halt)
            try:
                # a batch as well as a single token: prompt batches take other kernels
                words = llm.tokenize(b"Hello, how are you today? " * 4, add_bos=True)
                for chunk in (words[:32], words[32:33] or words[:1]):
                    if halt.is_set():
                        return False
                    llm.eval(chunk)
                self._clear_context(llm)
                opening = template_opening(model)
                if opening and not halt.is_set():
                    llm.eval(opening)
                done = not halt.is_set()
            except Exception as exc:  # stopped mid-batch (llama.cpp's abort), or a failure
                if not halt.is_set():
                    log.info("warming %s up failed: %s", model.path.name, exc)
            finally:
                self._set_abort(model, None)
                if not done:
                    self._clear_context(llm)
        return done

    @staticmethod
    def _clear_context(llm: Any) -> None:
        with contextlib.suppress(Exception):
            llm._ctx.kv_cache_clear()
        llm.n_tokens = 0

    def ensure_loaded(self, params: LoadParams) -> LoadedModel:
        if self._model is None or self._model.params != params:
            self.unload()
            self._model = load_model(params, self._loader)
            if params.mmproj_path:  # the vision projector loads with the model
                try:
                    vision_run.attach_projector(self._model)
                except BaseException:
                    self.unload()
                    raise
            self._unreported_load_ms = self._model.load_ms
            compiled_template(self._model)  # a template that does not compile: known now
        return self._model

    @staticmethod
    def format_prompt(
        model: LoadedModel, messages: tuple[ChatMessage, ...]
    ) -> tuple[str, tuple[str, ...], bool]:
        """Render the conversation with the model's own template (ChatML if it has none, or
        if it does not work).

        Returns (prompt, extra stop strings, whether BOS is already in the text).
        """
        prompt, stops, has_bos, _chatml = LocalEngine.render_prompt(model, messages)
        return prompt, stops, has_bos

    @staticmethod
    def render_prompt(
        model: LoadedModel,
        messages: tuple[ChatMessage, ...],
        plan: tool_calls.ToolPlan | None = None,
    ) -> tuple[str, tuple[str, ...], bool, bool]:
        """``format_prompt`` and whether ChatML was used (no template, or a broken one).
        ``plan``: a request with tools, its messages (and, template mode, tools) rendered."""
        msgs = plan.messages if plan else [{"role": m.role, "content": m.content} for m in messages]
        formatter = compiled_template(model)
        if formatter is None:
            return chatml_prompt(msgs), ("<|im_end|>",), False, True
        try:
            result = formatter(messages=msgs, tools=plan.tools if plan else None)
        except Exception as exc:  # a template that fails at render: say so, use ChatML
            log.warning("chat template of %s failed (%s); using ChatML", model.path.name, exc)
            return chatml_prompt(msgs), ("<|im_end|>",), False, True
        stops = (
            result.stop if isinstance(result.stop, list) else [result.stop] if result.stop else []
        )
        return result.prompt, tuple(s for s in stops if s), bool(result.added_special), False

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

    @staticmethod
    def _system_tokens(model: LoadedModel, request: ChatRequest) -> list[int] | None:
        """The tokens of the system prompt alone, as the template renders it (None when it is
        too short to be worth saving)."""
        first = request.messages[0] if request.messages else None
        if request.tools:  # the tools change how the system prompt renders: nothing to save
            return None
        if first is None or first.role != "system" or len(first.content) < SAVE_MIN_TOKENS:
            return None
        text, _stops, has_bos, _chatml = LocalEngine.render_prompt(model, (first,))
        return list(model.llm.tokenize(text.encode("utf-8"), add_bos=not has_bos, special=True))

    @property
    def remembering(self) -> bool:
        """The last reply's context is worth keeping and has not been kept yet."""
        return self._model is not None and self._remember

    def remember(self) -> None:
        """After a reply (the worker calls it once the app has its answer and no request is
        waiting): keep the live context in the memory cache, unless the reply was stopped or
        failed."""
        if self._model is not None and self._remember:
            self._remember = False
            self.reuse.remember(self._model.llm)

    def clear_memory(self) -> None:
        """Settings' Clear caches: the kept contexts go, and so does the one not kept yet."""
        self._remember = False
        self.reuse.memory.clear()

    def _remember_before_replacing(self, llm: Any, tokens: list[int]) -> None:
        """The last reply's context when the next request came before the worker kept it: a
        prompt that goes on with it (shares at least half of it) replaces nothing worth a copy
        (what it shares stays live, and its own context is kept after its reply); any other
        prompt is about to replace it, so it is kept first, as the worker would have."""
        n = int(llm.n_tokens)
        if self.remembering and common_prefix([int(t) for t in llm.input_ids[:n]], tokens) * 2 < n:
            self.remember()
        self._remember = False

    def _apply_threads(self, llm: Any) -> None:
        """Follow the thread budget (read per batch and per token: a shared int, no lock);
        llama.cpp is told only when the budget or the model changed."""
        budget = int(self.thread_budget.value) if self.thread_budget is not None else 0
        if self._threads_now == (llm, budget):
            return
        n, n_batch = int(llm.n_threads), int(llm.n_threads_batch)
        if budget > 0:
            n, n_batch = min(budget, n), min(budget, n_batch)
        import llama_cpp

        llama_cpp.llama_set_n_threads(llm._ctx.ctx, n, n_batch)
        self._threads_now = (llm, budget)

    def _prefill(
        self, llm: Any, tokens: list[int], cached: int, cancel: CancelFlag
    ) -> Iterator[PrefillProgress]:
        """Evaluate a prompt longer than one batch ahead of ``llm.generate``, one n_batch
        chunk at a time, saying how far it got (at most every ``progress_interval_s``).

        The last 2..n_batch tokens are left to ``generate`` (which finds the rest already in
        the KV cache): a single-token tail would count as decode in llama.cpp's perf counters.
        """
        n_batch = max(2, int(llm.n_batch))
        total = len(tokens)
        if total - cached <= n_batch:
            return
        llm.n_tokens = cached  # llm.eval drops the KV cells from here on
        done = cached
        last = time.perf_counter()
        while total - done > n_batch and not cancel.is_set():
            self._apply_threads(llm)
            chunk = min(n_batch, total - done - 2)
            llm.eval(tokens[done : done + chunk])
            done += chunk
            now = time.perf_counter()
            if now - last >= self.progress_interval_s:
                last = now
                yield PrefillProgress(done, total)

    def _generate(
        self, params: LoadParams, request: ChatRequest, cancel: CancelFlag
    ) -> Iterator[StreamEvent]:
        import llama_cpp

        if image_count(request):  # images: the projector's path (refused without one)
            refuse_images(params, request)
            self.remember()  # the images' evaluation replaces the context: keep it first
            self._ensure_file_still_there(params)
            yield from vision_run.generate(self, params, request, cancel)
            return
        self._ensure_file_still_there(params)
        model, load_ms = self.model_for(params)
        llm = model.llm
        n_ctx = int(llm.n_ctx())
        tools_plan = tool_calls.plan_tools(
            request.tools,
            request.messages,
            template=model.template if compiled_template(model) is not None else None,
            model_name=model.name,
            tool_choice=request.tool_choice,
        )
        prompt, template_stops, has_bos, chatml = self.render_prompt(
            model, request.messages, tools_plan
        )
        if tools_plan is not None and chatml and tools_plan.mode == "template":
            # the template takes tools but failed with them: the grammar path instead
            tools_plan = tool_calls.as_grammar(
                tools_plan, request.tools, request.messages, model.name, request.tool_choice
            )
            prompt, template_stops, has_bos, chatml = self.render_prompt(model, (), tools_plan)
        notice = model.notice
        if chatml and model.template_note is None:  # the template failed on this conversation
            notice = " ".join(n for n in (notice, CHATML_TEMPLATE_NOTE) if n)
        if tools_plan is not None and tools_plan.notice:
            notice = " ".join(n for n in (notice, tools_plan.notice) if n)
        reply = tools_plan.reply() if tools_plan is not None else None
        yield model.run_info(params, notice)
        tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=not has_bos, special=True)
        if len(tokens) >= n_ctx - 1:
            raise ContextTooLong(
                f"This conversation is {len(tokens):,} tokens long, but {model.name} is loaded "
                f"with a context of {n_ctx:,} tokens. Start a new conversation, shorten the "
                "message, or raise the agent's context size (n_ctx).",
                needed_tokens=len(tokens),
                n_ctx=n_ctx,
            )
        self._remember_before_replacing(llm, tokens)
        room = n_ctx - len(tokens)
        max_tokens = min(request.sampling.max_tokens or room, room)
        stops = tuple(dict.fromkeys((*request.sampling.stop, *template_stops)))
        plan = self.reuse.plan(
            model,
            tokens,
            lambda: self._system_tokens(model, request),
            f"{llama_cpp.__version__} {backend_name()}",
        )
        cached = start = plan.cached
        self._remember = False
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
            grammar=tools_plan.grammar() if tools_plan is not None else None,
        )
        self._set_abort(model, cancel)  # prefill: llama.cpp checks the flag between nodes
        self._apply_threads(llm)
        prefilling = True
        progress_shown = False
        try:
            if plan.save_upto and not cancel.is_set():  # a long system prompt: evaluate, save
                llm.n_tokens = start
                llm.eval(tokens[start : plan.save_upto])
                if not cancel.is_set():
                    self.reuse.save_system(plan, llm, tokens, request.cache_owner)
                    start = plan.save_upto
            for event in self._prefill(llm, tokens, start, cancel):
                progress_shown = True
                yield event
            for token in generator if not cancel.is_set() else ():
                if prefilling:
                    prefilling = False
                    self._set_abort(model, None)
                    if progress_shown:  # the whole prompt is in: say so before the text
                        yield PrefillProgress(len(tokens), len(tokens))
                if cancel.is_set():
                    finish = "cancelled"
                    break
                self._apply_threads(llm)
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    finish = "stop"
                    break
                output_tokens += 1
                held += decoder.decode(llm.detokenize([token], special=False))
                emit, held, hit = _split_on_stops(held, stops)
                if emit:
                    yield from reply.feed(emit) if reply else (TextDelta(emit),)
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
            if prefilling and cancel.is_set():  # stopped between prefill chunks
                finish = "cancelled"
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
        if held:
            yield from reply.feed(held) if reply else (TextDelta(held),)
        if reply is not None and finish == "length" and reply.writing_call:
            raise length_mid_call(model.name, tool_calls.call_name(reply.text))
        if reply is not None and finish == "stop":
            yield from reply.close()
            finish = "tool_calls" if reply.calls else finish
        perf = read_perf(llm)
        yield Usage(
            prompt_tokens=len(tokens),
            cached_tokens=cached,
            output_tokens=output_tokens,
            source="reported",
            cache_source=plan.source if cached else None,  # type: ignore[arg-type]
        )
        yield perf_timing(perf, load_ms, cache_restore_ms=plan.restore_ms)
        self._remember = finish in ("stop", "length", "tool_calls")
        yield Finished(finish)  # type: ignore[arg-type]


def compiled_template(model: LoadedModel) -> Any:
    """The model's chat template, compiled once per loaded model (~1.5 ms); None when the
    file has none or it does not compile (``model.template_error`` then says why)."""
    if not model.template or model.template_error:
        return None
    if model.formatter is None:
        try:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            llm = model.llm
            eos = llm._model.token_get_text(llm.token_eos()) if llm.token_eos() != -1 else ""
            bos = llm._model.token_get_text(llm.token_bos()) if llm.token_bos() != -1 else ""
            model.formatter = Jinja2ChatFormatter(
                template=model.template, eos_token=eos, bos_token=bos
            )
        except Exception as exc:  # jinja2.TemplateError, or anything a template module raises
            model.template_error = str(exc) or type(exc).__name__
            log.warning(
                "chat template of %s does not compile (%s); using ChatML",
                model.path.name,
                model.template_error,
            )
            return None
    return model.formatter


# Conversations whose first message is a system prompt, starting with different kinds of
# characters, so a token the template's text would merge with what follows is not counted. (A
# system prompt that starts with a line break may merge with the template's own: the prefix
# match then reuses one token fewer.)
_OPENING_PROBES = ("A", "z", " x", "1", ".", "<b>", "# ", "\u4f60")


def template_opening(model: LoadedModel) -> list[int]:
    """The tokens every prompt with a system message begins with, as ``generate`` renders and
    tokenizes it (BOS, ``<|im_start|>system\\n`` under ChatML), once per loaded model; [] when
    none are shared or the template fails (quietly: a request then says so)."""
    if model.opening is None:
        formatter = compiled_template(model)
        opening: list[int] | None = None
        try:
            for probe in _OPENING_PROBES:
                msgs = [{"role": "system", "content": probe}, {"role": "user", "content": "?"}]
                if formatter is None:
                    text, has_bos = chatml_prompt(msgs), False
                else:
                    result = formatter(messages=msgs, tools=None)
                    text, has_bos = result.prompt, bool(result.added_special)
                tokens = model.llm.tokenize(text.encode("utf-8"), add_bos=not has_bos, special=True)
                opening = tokens if opening is None else opening[: common_prefix(opening, tokens)]
        except Exception as exc:
            log.info("no template opening for %s: %s", model.path.name, exc)
            opening = []
        # never more than half the context (a template that writes pages before the system
        # prompt): the rest is for the conversation
        model.opening = [int(t) for t in (opening or [])[: int(model.llm.n_ctx()) // 2]]
    return list(model.opening)


class _Stop:
    """``CancelFlag`` over a ``stop()`` callable (None: never); True once it said so, and a
    ``stop()`` that fails (the pipe closed) says stop."""

    def __init__(self, stop: Callable[[], bool] | None) -> None:
        self._stop = stop
        self._said = False

    def is_set(self) -> bool:
        if not self._said and self._stop is not None:
            try:
                self._said = bool(self._stop())
            except Exception:
                self._said = True
        return self._said


def count_prompt_tokens(model: LoadedModel, messages: tuple[ChatMessage, ...]) -> int:
    """Prompt tokens for ``messages`` exactly as ``generate`` renders and tokenizes them."""
    prompt, _stops, has_bos = LocalEngine.format_prompt(model, messages)
    return len(model.llm.tokenize(prompt.encode("utf-8"), add_bos=not has_bos, special=True))


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
