"""Images on the wire, for each protocol: the exact request body a message with images makes,
the image tokens a reply reports, and a server that cannot read images.

The loopback ``FaultServer`` stands in for the APIs the tests cannot reach: api.openai.com and
every OpenAI-compatible server, api.anthropic.com and generativelanguage.googleapis.com. It
records each request body and answers with a short scripted stream in that API's own shape
(``tests.helpers.tool_server``), or with the error a server without vision sends.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from desktop.llm.errors import ImagesNotSupported, ProviderUnavailable
from desktop.llm.events import Usage
from desktop.llm.provider import ChatMessage, ChatRequest, ImagePart, Sampling
from tests.helpers.fault_server import FaultServer, Reply, error_reply
from tests.helpers.tool_server import tool_reply
from tests.llm.streams import KINDS, make, only, run, text

# Two small images (their bytes need not decode: the wire carries them as they are).
PNG = ImagePart("image/png", b"\x89PNG\r\n\x1a\nfirst image", name="chart.png", width=4, height=3)
JPEG = ImagePart("image/jpeg", b"\xff\xd8\xff\xe0second image\xff\xd9", name="photo.jpg")
PNG_B64 = base64.b64encode(PNG.data).decode()
JPEG_B64 = base64.b64encode(JPEG.data).decode()
QUESTION = "What differs between these two?"

WITH_IMAGES = ChatRequest(
    model="vision-model",
    messages=(
        ChatMessage("system", "Be brief."),
        ChatMessage("user", QUESTION, images=(PNG, JPEG)),
    ),
    sampling=Sampling(max_tokens=16),
)


def stream(kind: str, request: ChatRequest, reply: Reply | None = None) -> tuple:
    """Run ``request`` against a fake of ``kind``: (events, error, the body it received)."""
    with FaultServer(reply or tool_reply(kind, [], text="Hello")) as server:
        events, error = asyncio.run(run(make(kind, server.url), request))
    return events, error, server.requests[0].json()


def test_openai_sends_the_text_then_each_image_as_a_data_url_part() -> None:
    events, error, body = stream("openai", WITH_IMAGES)
    assert error is None and text(events) == "Hello"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": QUESTION},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
                {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{JPEG_B64}"}},
            ],
        },
    ]


def test_anthropic_sends_base64_image_blocks_before_the_text_block() -> None:
    events, error, body = stream("anthropic", WITH_IMAGES)
    assert error is None and text(events) == "Hello"
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                },
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": JPEG_B64},
                },
                {"type": "text", "text": QUESTION},
            ],
        }
    ]


def test_gemini_sends_inline_data_parts_before_the_text_part() -> None:
    events, error, body = stream("gemini", WITH_IMAGES)
    assert error is None and text(events) == "Hello"
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"inlineData": {"mimeType": "image/png", "data": PNG_B64}},
                {"inlineData": {"mimeType": "image/jpeg", "data": JPEG_B64}},
                {"text": QUESTION},
            ],
        }
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_an_image_without_text_sends_no_empty_text_part(kind: str) -> None:
    """Anthropic refuses an empty text block; no wire sends one."""
    only_image = ChatRequest("m", (ChatMessage("user", "", images=(PNG,)),))
    _, error, body = stream(kind, only_image)
    assert error is None
    assert '"text": ""' not in json.dumps(body) and PNG_B64 in json.dumps(body)


# What a message without images looked like on each wire before images existed: a plain string
# (OpenAI, Anthropic) or one text part (Gemini), byte for byte.
PLAIN_LAST = {
    "openai": lambda body: body["messages"][-1] == {"role": "user", "content": "And now?"},
    "anthropic": lambda body: body["messages"][-1] == {"role": "user", "content": "And now?"},
    "gemini": lambda body: (
        body["contents"][-1] == {"role": "user", "parts": [{"text": "And now?"}]}
    ),
}


@pytest.mark.parametrize("kind", KINDS)
def test_messages_without_images_are_sent_exactly_as_before(kind: str) -> None:
    plain = ChatRequest("m", (ChatMessage("user", "Say hi."),))
    _, _, body = stream(kind, plain)
    assert "image" not in json.dumps(body).lower()
    # a later question without images, after one with images, is plain text again
    later = ChatRequest(
        "m",
        (
            ChatMessage("user", QUESTION, images=(PNG,)),
            ChatMessage("assistant", "The first is a chart."),
            ChatMessage("user", "And now?"),
        ),
    )
    _, _, body = stream(kind, later)
    assert PLAIN_LAST[kind](body), body
    assert json.dumps(body).count(PNG_B64) == 1  # the earlier image is still sent, once


def _gemini_frames(usage: dict) -> Reply:
    """Gemini's ``streamGenerateContent?alt=sse`` as its frontend sends it (CRLF CRLF between
    frames): text, then the last frame with the finish reason and the cumulative
    ``usageMetadata`` whose ``promptTokensDetails`` counts the prompt by modality (shape:
    https://ai.google.dev/api/generate-content#UsageMetadata; an image up to 384 px a side is
    258 tokens, https://ai.google.dev/gemini-api/docs/tokens)."""
    first = {
        "candidates": [{"content": {"parts": [{"text": "Two"}], "role": "model"}, "index": 0}],
        "usageMetadata": {"promptTokenCount": 528, "totalTokenCount": 528},
        "modelVersion": "gemini-2.5-flash",
    }
    last = {
        "candidates": [
            {
                "content": {"parts": [{"text": " charts."}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": usage,
        "modelVersion": "gemini-2.5-flash",
    }
    return Reply(body=[f"data: {json.dumps(f)}\r\n\r\n".encode() for f in (first, last)])


def test_gemini_reports_the_image_tokens_of_the_prompt_by_modality() -> None:
    usage = {
        "promptTokenCount": 528,
        "candidatesTokenCount": 3,
        "totalTokenCount": 531,
        "promptTokensDetails": [
            {"modality": "TEXT", "tokenCount": 12},
            {"modality": "IMAGE", "tokenCount": 516},
        ],
    }
    events, error, _ = stream("gemini", WITH_IMAGES, _gemini_frames(usage))
    assert error is None and text(events) == "Two charts."
    reported = only(events, Usage)
    assert (reported.prompt_tokens, reported.image_tokens) == (528, 516)


def test_gemini_without_an_image_count_leaves_image_tokens_unknown() -> None:
    usage = {
        "promptTokenCount": 12,
        "candidatesTokenCount": 3,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 12}],
    }
    events, _, _ = stream("gemini", WITH_IMAGES, _gemini_frames(usage))
    assert only(events, Usage).image_tokens is None


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_openai_and_anthropic_do_not_report_image_tokens(kind: str) -> None:
    events, error, _ = stream(kind, WITH_IMAGES)
    assert error is None and only(events, Usage).image_tokens is None


# llama.cpp's server (tools/server) started without --mmproj, given an image_url part: its
# exact words and status (HTTP 500, OpenAI's error shape).
LLAMA_CPP_NO_MMPROJ = error_reply(
    500,
    {
        "error": {
            "code": 500,
            "message": "image input is not supported - hint: if this is unexpected, you may "
            "need to provide the mmproj",
            "type": "server_error",
        }
    },
)
# vLLM serving a text-only model, given an image: HTTP 400.
VLLM_TEXT_ONLY = error_reply(
    400,
    {
        "object": "error",
        "message": "Qwen2.5-7B-Instruct is not a multimodal model",
        "type": "BadRequestError",
        "code": 400,
    },
)


@pytest.mark.parametrize("reply", [LLAMA_CPP_NO_MMPROJ, VLLM_TEXT_ONLY], ids=["llama.cpp", "vllm"])
def test_a_server_that_cannot_read_images_says_so_in_words(reply: Reply) -> None:
    events, error, _ = stream("openai", WITH_IMAGES, reply)
    assert isinstance(error, ImagesNotSupported) and not events
    assert error.user_message.startswith(
        "“vision-model” at Test openai (127.0.0.1) cannot read images: choose a vision model, "
        "or remove the image."
    )
    assert not error.retryable  # another try would fail the same way


def test_the_same_refusal_without_images_is_an_ordinary_server_error() -> None:
    plain = ChatRequest("text-model", (ChatMessage("user", "Say hi."),))
    _, error, _ = stream("openai", plain, LLAMA_CPP_NO_MMPROJ)
    assert isinstance(error, ProviderUnavailable)
    assert "cannot read images" not in error.user_message and "HTTP 500" in error.user_message
