"""Local vision: which chat handler runs a model with its projector, which agents see images,
the words when one cannot, what counts as a projector, and which projector goes with a model.

Not covered, because no vision GGUF (a model with its "mmproj" projector) is available
offline: a real vision model's answer about a real image, and the handlers of the families
chosen by name (LLaVA 1.6, Moondream, MiniCPM-V, Qwen2.5-VL: only picked here, never run).
What is covered with real parts: the "cannot see" path end to end with the starter model, and
an image through libmtmd with a synthetic projector (``vision_files.synthetic_projector``,
generated weights) loaded with the starter: the handler, the encoding, the image tokens and
timings, the text path after it. ``test_image_reply_streams_*`` runs the vision path's event
mapping with a stand-in for the loaded model (``_StandInLlama``).
"""

from __future__ import annotations

import asyncio
import base64
import io
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from desktop.chat.kinds import load_params_for
from desktop.llm.errors import ContextTooLong, LocalModelError
from desktop.llm.events import Finished, RunInfo, TextDelta, Timing, Usage
from desktop.llm.provider import ChatMessage, ChatRequest, ImagePart, Sampling
from desktop.local import vision, vision_run
from desktop.local.catalog import ModelCatalog
from desktop.local.client import WorkerClient
from desktop.local.loading import LoadParams
from desktop.local.starter import STARTER_AGENT_NAME, STARTER_MODEL_NAME
from desktop.settings.paths import AppPaths
from desktop.settings.prefs import Preferences
from desktop.store.agents import Agent
from tests.helpers import gguf_files
from tests.local.vision_files import fake_projector, synthetic_projector, write_gguf

STARTER_CANNOT_SEE = (
    f"{STARTER_MODEL_NAME} cannot read images: choose a vision model (one with a projector, "
    "“mmproj” file) or remove the image."
)


def png(color: str = "red", size: tuple[int, int] = (8, 6), fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format=fmt, lossless=True)
    return out.getvalue()


def image_request(text: str = "What is in this picture?", **sampling: Any) -> ChatRequest:
    image = ImagePart("image/png", png(), name="red.png", width=8, height=6)
    return ChatRequest(
        "m", (ChatMessage("user", text, images=(image,)),), Sampling(seed=1, **sampling)
    )


# which handler ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("file", "metadata", "projector", "handler"),
    [
        # a chat template in the file: the generic libmtmd handler, whatever the name says
        ("llava-v1.6-mistral-7b.Q4_K_M.gguf", {"tokenizer.chat_template": "{{ x }}"}, {}, "MTMD"),
        ("gemma-3-4b-it-Q4_K_M.gguf", {"tokenizer.chat_template": "{{ x }}"}, {}, "MTMD"),
        # no template: the family, by the model's names
        ("llava-v1.6-mistral-7b.Q4_K_M.gguf", {"general.name": "llava"}, {}, "Llava16"),
        ("ggml-model-q4_k.gguf", {"general.name": "LLaVA-1.5-7B"}, {}, "Llava15"),
        ("moondream2-text-model-f16.gguf", {}, {}, "Moondream"),
        ("nanollava-text-model-f16.gguf", {"general.name": "nanoLLaVA"}, {}, "NanoLlava"),
        ("ggml-model-Q4_K_M.gguf", {"general.name": "MiniCPM-V-2_6"}, {}, "MiniCPMv26"),
        ("model.gguf", {"general.architecture": "qwen2vl"}, {}, "Qwen25VL"),
        ("Qwen2.5-VL-7B-Instruct-Q4_K_M.gguf", {"general.architecture": "qwen2vl"}, {}, "Qwen25VL"),
        ("llama-3-vision-alpha-Q4.gguf", {}, {}, "Llama3VisionAlpha"),
        # names say nothing: the projector's header does
        ("model.gguf", {}, {"clip.minicpmv_version": 3}, "MiniCPMv26"),
        ("model.gguf", {}, {"clip.vision.image_grid_pinpoints": [336, 672]}, "Llava16"),
        ("model.gguf", {}, {"clip.projector_type": "qwen2.5vl_merger"}, "Qwen25VL"),
        # nothing known: LLaVA 1.5's prompt, the most common of the old formats
        ("mystery.gguf", {"general.architecture": "llama"}, {}, "Llava15"),
    ],
)
def test_handler_choice_from_metadata(file, metadata, projector, handler) -> None:
    from llama_cpp import llama_chat_format

    name, why = vision.handler_for(f"/models/{file}", "/models/mmproj.gguf", metadata, projector)
    assert name == f"{handler}ChatHandler"
    assert hasattr(llama_chat_format, name)  # a class llama-cpp-python 0.3.36 really has
    assert why and why[0].islower()


# who sees images ------------------------------------------------------------------------------
def test_sees_images_only_with_a_projector_file_that_exists(tmp_path: Path) -> None:
    proj = fake_projector(tmp_path / "mmproj-f16.gguf")
    local = Agent(name="Eyes", kind="local", model_path="/m/vlm.gguf")
    assert not vision.sees_images(local)
    assert vision.sees_images(local.with_changes(mmproj_path=str(proj)))
    assert not vision.sees_images(local.with_changes(mmproj_path=str(tmp_path / "gone.gguf")))
    # a remote agent is taken to see: its server answers for itself
    assert vision.sees_images(Agent(name="GPT", kind="openai", model="gpt-4o-mini"))


def test_cannot_see_message_names_the_model_and_says_what_to_do(tmp_path: Path) -> None:
    starter = Agent(name=STARTER_AGENT_NAME, kind="local", model_path="starter:x.gguf")
    assert vision.cannot_see_message(starter) == STARTER_CANNOT_SEE
    assert vision.cannot_see_message(starter, images=2).endswith("or remove the images.")
    gone = Agent(
        name="VLM",
        kind="local",
        model_path="/m/SmolVLM-256M-Instruct-Q8_0.gguf",
        mmproj_path=str(tmp_path / "mmproj.gguf"),
    )
    assert vision.cannot_see_message(gone) == (
        f"SmolVLM-256M-Instruct cannot read images: its vision projector {tmp_path}/mmproj.gguf "
        "is missing. Choose the projector again in the agent, or remove the image."
    )


# what is a projector ---------------------------------------------------------------------------
def test_a_clip_gguf_is_a_projector_and_the_starter_model_is_not(tmp_path: Path) -> None:
    starter = str(gguf_files.starter())
    proj = fake_projector(tmp_path / "mmproj-SmolVLM-f16.gguf")  # 576 wide, as the starter
    info = vision.read_projector(proj)
    assert info.projector_type == "idefics3" and info.projection_dim == 576
    assert vision.projector_problem(proj, starter) is None
    keys_only = write_gguf(tmp_path / "keys.gguf", {"clip.has_vision_encoder": True})
    assert vision.projector_problem(keys_only) is None  # clip.* keys say it, without the arch
    assert vision.projector_problem(starter) == (
        "SmolLM2-135M-Instruct.Q4_1.gguf is a model (architecture “llama”), not a vision "
        "projector: choose the “mmproj” file that belongs to the model."
    )
    wide = fake_projector(tmp_path / "mmproj-gemma-f16.gguf", projection_dim=2560)
    assert vision.projector_problem(wide, starter) == (
        "mmproj-gemma-f16.gguf is a projector for another model: it gives 2,560-wide "
        f"embeddings and {STARTER_MODEL_NAME} takes 576. Choose the “mmproj” file from the "
        "model's own repository."
    )
    audio = write_gguf(
        tmp_path / "mmproj-audio.gguf",
        {"general.architecture": "clip", "clip.has_vision_encoder": False},
    )
    assert "sound, not images" in (vision.projector_problem(audio) or "")
    notes = gguf_files.text_file(tmp_path / "notes.gguf")
    assert "it is not a GGUF file" in (vision.projector_problem(notes) or "")
    assert "does not exist" in (vision.projector_problem(tmp_path / "nope.gguf") or "")
    assert vision.projector_problem(None) is None and vision.projector_problem("  ") is None


# which projector goes with a model --------------------------------------------------------------
def test_best_projector_prefers_its_folder_then_f16_then_q8_0() -> None:
    ggml_org = [  # ggml-org/SmolVLM-256M-Instruct-GGUF
        "SmolVLM-256M-Instruct-Q8_0.gguf",
        "mmproj-SmolVLM-256M-Instruct-Q8_0.gguf",
        "mmproj-SmolVLM-256M-Instruct-f16.gguf",
    ]
    best = vision.best_projector
    assert best("SmolVLM-256M-Instruct-Q8_0.gguf", ggml_org) == ggml_org[2]
    unsloth = ["mmproj-BF16.gguf", "mmproj-F32.gguf", "mmproj-Q8_0.gguf"]
    assert best("Q4_K_M/model-00001-of-00002.gguf", unsloth) == "mmproj-Q8_0.gguf"
    assert best("m.gguf", ["mmproj-F32.gguf", "mmproj-BF16.gguf"]) == "mmproj-BF16.gguf"
    # its own folder before the repository's root, and never a model file
    assert best("a/m.gguf", ["mmproj-f16.gguf", "a/mmproj-q8_0.gguf"]) == "a/mmproj-q8_0.gguf"
    assert best("m.gguf", ["m-f16.gguf"]) is None


def test_library_entries_know_their_projector_and_projectors_are_not_models(
    tmp_path: Path,
) -> None:
    paths = AppPaths.from_env()
    paths.ensure()
    models = paths.models_dir
    repo = models / "ggml-org" / "SmolVLM-256M-Instruct-GGUF"
    (repo / "Q8_0").mkdir(parents=True)
    vlm = gguf_files.copy_starter(repo / "Q8_0" / "SmolVLM-256M-Instruct-Q8_0.gguf")
    proj = fake_projector(repo / "mmproj-SmolVLM-256M-Instruct-f16.gguf")
    fake_projector(repo / "mmproj-SmolVLM-256M-Instruct-Q8_0.gguf")
    other = models / "someone" / "TextOnly-GGUF"
    other.mkdir(parents=True)
    text_model = gguf_files.copy_starter(other / "TextOnly-Q4_1.gguf")
    fake_projector(models / "mmproj-stray-f16.gguf")  # the library's root: nobody's
    entries = {e.path: e for e in ModelCatalog(paths, Preferences(paths.settings_path)).entries()}
    assert entries[str(vlm)].mmproj == str(proj)
    assert entries[str(text_model)].mmproj is None
    assert not any("mmproj" in Path(p).name for p in entries)  # not offered as chat models
    assert vision.projector_beside(vlm, models) == proj
    assert vision.projector_beside(vlm) is None  # without the library: its folder alone
    assert vision.projector_beside(text_model, models) is None


# what the worker is given ------------------------------------------------------------------------
def test_load_params_carry_the_projector_and_stats_rows_of_text_models_read_as_before(
    tmp_path: Path,
) -> None:
    agent = Agent(name="VLM", kind="local", model_path=str(gguf_files.starter()), n_ctx=512)
    plain = load_params_for(agent)
    assert plain.mmproj_path is None and "mmproj_path" not in plain.as_dict()
    seeing = load_params_for(agent.with_changes(mmproj_path="~/m/mmproj-f16.gguf"))
    assert seeing.mmproj_path == str(Path.home() / "m" / "mmproj-f16.gguf")
    assert seeing.as_dict()["mmproj_path"] == seeing.mmproj_path
    assert seeing != plain  # another projector: another load


def test_messages_carry_images_as_data_urls_before_the_text() -> None:
    webp = png("blue", fmt="WEBP")  # libmtmd's decoder reads no WebP: sent as PNG
    messages = (
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "First", images=(ImagePart("image/png", png()),)),
        ChatMessage("assistant", "A red square."),
        ChatMessage("tool", "42"),
        ChatMessage("user", "And this?", images=(ImagePart("image/webp", webp),)),
    )
    out = vision_run.chat_messages(messages, parts_always=False)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"] == "Be brief." and out[2]["content"] == "A red square."
    first = out[1]["content"]
    assert first[0]["type"] == "image_url" and first[1] == {"type": "text", "text": "First"}
    url = first[0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == png()
    # a tool's result and the next question: one user turn (templates want roles to alternate)
    last = out[3]["content"]
    assert last[-1]["text"] == "Result of the tool call: 42\n\nAnd this?"
    converted = base64.b64decode(last[0]["image_url"]["url"].split(",", 1)[1])
    assert last[0]["image_url"]["url"].startswith("data:image/png;")
    assert Image.open(io.BytesIO(converted)).getpixel((0, 0)) == (0, 0, 255)
    parts = vision_run.chat_messages(messages[:1], parts_always=True)
    assert parts[0]["content"] == [{"type": "text", "text": "Be brief."}]


# SmolVLM's chat template (every message's content read as parts) and a text model's ChatML
# that joins strings (the starter's kind): an image message goes to it as one string.
SMOLVLM_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>\n'}}{% endfor %}"
)


def test_whether_a_template_reads_content_parts_is_found_by_rendering_one() -> None:
    assert vision_run.takes_parts(SMOLVLM_TEMPLATE)
    assert not vision_run.takes_parts(CHATML_TEMPLATE)  # it fails on a list
    assert not vision_run.takes_parts("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert not vision_run.takes_parts("")


class _StandInLlama:
    """Stands in for a loaded vision model (none can be had offline): what
    ``create_chat_completion`` was asked, chunks shaped as llama-cpp-python streams them."""

    def __init__(self, chunks: list[str], error: Exception | None = None) -> None:
        self.chunks = chunks
        self.error = error
        self.asked: dict[str, Any] = {}
        self.n_tokens = 99
        self._ctx = type("Ctx", (), {"ctx": None})()

    def n_ctx(self) -> int:
        return 4096

    def tokenize(self, data: bytes, add_bos: bool = False, special: bool = False) -> list[int]:
        return list(range(len(data.split())))

    def reset(self) -> None:
        self.n_tokens = 0

    def create_chat_completion(self, **kwargs: Any) -> Any:
        self.asked = kwargs
        if self.error is not None:
            raise self.error
        yield {"choices": [{"delta": {"role": "assistant"}, "finish_reason": None}]}
        for text in self.chunks:
            yield {"choices": [{"delta": {"content": text}, "finish_reason": None}]}
        yield {"choices": [{"delta": {}, "finish_reason": "stop"}]}


class _Engine:
    def __init__(self, llm: _StandInLlama) -> None:
        from desktop.local.loading import LoadedModel

        params = LoadParams("/m/SmolVLM-Q8_0.gguf", mmproj_path="/m/p.gguf")
        self.model = LoadedModel(params, llm, 5)
        meter = vision_run.ImageMeter(object())
        self.model.vision = vision_run.Vision(object(), "MTMDChatHandler", "template", meter)
        self.model.template = "{% for m in messages %}{{ m.content }}{% endfor %}"
        self._remember = True
        self.aborts: list[Any] = []

    def model_for(self, params: LoadParams) -> tuple[Any, float | None]:
        return self.model, 12.5

    def _set_abort(self, model: Any, cancel: Any) -> None:
        self.aborts.append(cancel)

    def _apply_threads(self, llm: Any) -> None:
        pass


class _Perf:
    """llama.cpp's perf counters, as ``llama_perf_context`` returns them."""

    t_p_eval_ms, t_eval_ms, n_p_eval, n_eval = 310.0, 95.0, 80, 3


@pytest.fixture
def counters(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """llama.cpp's perf counters for the stand-in model (which has no llama.cpp context)."""
    import llama_cpp

    calls: list[str] = []
    monkeypatch.setattr(llama_cpp, "llama_perf_context_reset", lambda _ctx: calls.append("reset"))
    monkeypatch.setattr(llama_cpp, "llama_perf_context", lambda _ctx: _Perf())
    return calls


def test_image_reply_streams_the_usual_events_and_leaves_no_context_behind(counters) -> None:
    llm = _StandInLlama(["A red ", "square."])
    engine = _Engine(llm)
    request = image_request(max_tokens=20, stop=("###",))
    events = list(vision_run.generate(engine, engine.model.params, request, threading.Event()))
    assert isinstance(events[0], RunInfo) and events[0].load_params["mmproj_path"] == "/m/p.gguf"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "A red square."
    [usage] = [e for e in events if isinstance(e, Usage)]
    assert usage.output_tokens == 3 and usage.cached_tokens == 0
    [timing] = [e for e in events if isinstance(e, Timing)]
    assert (timing.prefill_ms, timing.decode_ms, timing.load_ms) == (310.0, 95.0, 12.5)
    assert timing.reported_by == "llama.cpp" and counters == ["reset"]
    assert timing.image_encode_ms is None  # no image chunk went through the meter here
    assert events[-1] == Finished("stop")
    asked = llm.asked
    assert asked["stream"] is True and asked["max_tokens"] == 20 and asked["stop"] == ["###"]
    assert asked["seed"] == 1 and asked["messages"][0]["content"][0]["type"] == "image_url"
    assert llm.n_tokens == 0  # the image's cells are never taken for text by the next prompt
    assert engine._remember is False and engine.aborts[-1] is None  # the abort hook is off


def test_an_image_prompt_longer_than_the_context_says_so(counters) -> None:
    llm = _StandInLlama([], error=ValueError("Prompt exceeds n_ctx: 5000 > 4096"))
    engine = _Engine(llm)
    with pytest.raises(ContextTooLong) as caught:
        list(vision_run.generate(engine, engine.model.params, image_request(), threading.Event()))
    assert caught.value.needed_tokens == 5000 and caught.value.n_ctx == 4096
    assert "send fewer or smaller images" in caught.value.user_message


# the starter cannot see: refused before any work, end to end ------------------------------------
def test_an_image_for_the_starter_is_refused_before_a_worker_starts(services) -> None:
    agent = services.agents.by_name(STARTER_AGENT_NAME)
    runtime = services.local

    async def main() -> None:
        async for _event in runtime.stream(load_params_for(agent), image_request()):
            pass

    with pytest.raises(vision.CannotSeeImages) as refused:
        asyncio.run(main())
    assert refused.value.user_message == STARTER_CANNOT_SEE
    assert not runtime.worker.alive  # no process was started for it


@pytest.mark.slow
def test_the_worker_refuses_an_image_without_a_projector_and_reads_it_with_one(
    tmp_path: Path, capfd
) -> None:
    """Defence in depth: the worker repeats the check before it loads anything. Then a real
    image through a real projector, in the same worker: a synthetic one
    (``vision_files.synthetic_projector``, since no vision GGUF is available offline) that
    libmtmd loads with the starter and runs; what the model says about the image is noise."""
    client = WorkerClient()
    params = LoadParams(str(gguf_files.starter()), n_ctx=512)
    projector = synthetic_projector(tmp_path / "mmproj-synthetic-f16.gguf")
    seeing = replace(params, mmproj_path=str(projector))
    text = ChatRequest("m", (ChatMessage("user", "Hello"),), Sampling(max_tokens=4, seed=1))

    async def main() -> tuple[LocalModelError, list[Any], list[Any]]:
        with pytest.raises(LocalModelError) as refused:
            async for _event in client.stream(params, image_request()):
                pass
        pid = client.pid
        events = [e async for e in client.stream(seeing, image_request(max_tokens=6))]
        after = [e async for e in client.stream(seeing, text)]  # the text path, unharmed
        assert client.pid == pid  # one process throughout: nothing crashed
        return refused.value, events, after

    try:
        refused, events, after = asyncio.run(main())
    finally:
        client.shutdown()
    assert refused.user_message == STARTER_CANNOT_SEE
    [info] = [e for e in events if isinstance(e, RunInfo)]
    assert info.load_params["mmproj_path"] == str(projector)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip()
    [usage] = [e for e in events if isinstance(e, Usage)]
    assert usage.image_tokens == 16 and usage.prompt_tokens > 16  # 4x4 patches, and the text
    [timing] = [e for e in events if isinstance(e, Timing) and e.reported_by]
    assert timing.load_ms is not None  # loaded here, with the projector: the refusal loaded none
    assert timing.image_encode_ms is not None and timing.image_encode_ms > 0
    assert timing.prefill_ms and timing.decode_ms  # llama.cpp's counters, as on the text path
    assert isinstance(events[-1], Finished)
    assert "".join(e.text for e in after if isinstance(e, TextDelta)).strip()
    [text_usage] = [e for e in after if isinstance(e, Usage)]
    assert text_usage.cached_tokens == 0 and text_usage.image_tokens is None
    assert "Traceback" not in capfd.readouterr().err
