"""Google Gemini API streaming (``models/{model}:streamGenerateContent?alt=sse``).

Each SSE ``data:`` frame is a whole ``GenerateContentResponse``: ``candidates[0].content.parts``
(``{"text": ...}``, with ``"thought": true`` on reasoning parts when thoughts are requested),
``finishReason`` on the last candidate frame, cumulative ``usageMetadata``, ``modelVersion``.
There is no end sentinel: a stream that closes without a ``finishReason`` was cut short.
System messages go to ``systemInstruction``; the assistant role is called ``model``.

Usage: ``prompt_tokens`` = ``promptTokenCount`` (includes the cached part),
``cached_tokens`` = ``cachedContentTokenCount``, ``reasoning_tokens`` = ``thoughtsTokenCount``,
``output_tokens`` = ``candidatesTokenCount`` + ``thoughtsTokenCount`` (so that, as with OpenAI
and Anthropic, output includes reasoning). A reply stopped by Gemini's safety filters is raised
as ``BadResponse`` (with the text so far kept by the caller), never passed off as finished.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx

from desktop.llm.errors import BadResponse
from desktop.llm.events import (
    Finished,
    FinishReason,
    ReasoningDelta,
    RunInfo,
    StreamEvent,
    TextDelta,
    Timing,
    Usage,
)
from desktop.llm.provider import ChatRequest
from desktop.llm.transport import HttpProvider

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "OTHER": "stop",
    "FINISH_REASON_UNSPECIFIED": "stop",
    "MALFORMED_FUNCTION_CALL": "stop",
}
_BLOCKED = {
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "LANGUAGE",
}


class GeminiProvider(HttpProvider):
    """Gemini models. ``include_thoughts`` asks thinking models for thought summaries, shown as
    reasoning (leave it off for models without thinking, which reject it)."""

    def __init__(
        self,
        api_key: str | None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        label: str = "Gemini",
        stall_timeout_s: float = 60.0,
        client: httpx.AsyncClient | None = None,
        ca_bundle: str | None = None,
        include_thoughts: bool = False,
    ) -> None:
        super().__init__(
            base_url,
            api_key,
            label=label,
            stall_timeout_s=stall_timeout_s,
            client=client,
            ca_bundle=ca_bundle,
        )
        self._include_thoughts = include_thoughts

    def _headers(self) -> dict[str, str]:
        # The key travels in a header, never in the URL, so it cannot end up in logs of URLs.
        return {"x-goog-api-key": self._api_key} if self._api_key else {}

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        contents: list[dict[str, Any]] = []
        for m in request.messages:
            if m.role == "system":
                continue
            role = "model" if m.role == "assistant" else "user"
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].append({"text": m.content})
            else:
                contents.append({"role": role, "parts": [{"text": m.content}]})
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        s = request.sampling
        config: dict[str, Any] = {}
        if s.temperature is not None:
            config["temperature"] = s.temperature
        if s.top_p is not None:
            config["topP"] = s.top_p
        if s.max_tokens is not None:
            config["maxOutputTokens"] = s.max_tokens
        if s.seed is not None:
            config["seed"] = s.seed
        if s.stop:
            config["stopSequences"] = list(s.stop)
        if self._include_thoughts:
            config["thinkingConfig"] = {"includeThoughts": True}
        if config:
            body["generationConfig"] = config
        return body

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        http = self._http
        model = request.model.removeprefix("models/")
        usage: dict[str, Any] = {}
        finish: FinishReason | None = None
        reported_model: str | None = None
        events = http.sse(
            f"{http.base_url}/models/{quote(model, safe='-._~')}:streamGenerateContent?alt=sse",
            body=self._body(request),
            headers=self._headers(),
            model=model,
        )
        async with contextlib.aclosing(events):
            async for item in events:
                if isinstance(item, Timing):
                    yield item
                    continue
                if not item.data.strip():
                    continue
                frame = http.decode(item.data)
                if not isinstance(frame, dict):
                    raise BadResponse(f"{http.where} sent a frame this app does not understand.")
                error = frame.get("error")
                if isinstance(error, dict):
                    raise http.stream_error(
                        str(error.get("status") or error.get("code") or ""), error.get("message")
                    )
                if reported_model is None and frame.get("modelVersion"):
                    reported_model = str(frame["modelVersion"])
                    yield RunInfo(model_reported=reported_model)
                if isinstance(frame.get("usageMetadata"), dict):
                    usage = frame["usageMetadata"]
                blocked = (frame.get("promptFeedback") or {}).get("blockReason")
                if blocked:
                    raise BadResponse(
                        f"{http.where} refused the prompt ({blocked}). Rephrase the message or "
                        "check the safety settings of the Google AI project."
                    )
                candidates = frame.get("candidates") or []
                candidate = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
                for part in (candidate.get("content") or {}).get("parts") or []:
                    text = part.get("text") if isinstance(part, dict) else None
                    if isinstance(text, str) and text:
                        yield ReasoningDelta(text) if part.get("thought") else TextDelta(text)
                reason = candidate.get("finishReason")
                if reason:
                    reason = str(reason)
                    if reason in _BLOCKED:
                        raise BadResponse(
                            f"{http.where} stopped the reply ({reason}). The text so far is "
                            "kept; rephrase the message to continue."
                        )
                    finish = _FINISH.get(reason, "stop")
        if finish is None:
            raise http.ended_early()
        yield _usage(usage)
        yield Finished(finish)

    async def list_models(self) -> list[str]:
        """Models that can generate content (embedding-only models are left out)."""
        http = self._http
        names: list[str] = []
        token: str | None = None
        for _ in range(20):  # pages of 1000; a guard against a server that never says "done"
            url = f"{http.base_url}/models?pageSize=1000" + (
                f"&pageToken={quote(token)}" if token else ""
            )
            page, items = await self._model_page(url, "models")
            for m in items:
                if not isinstance(m, dict) or not m.get("name"):
                    continue
                methods = m.get("supportedGenerationMethods")
                if methods is None or "generateContent" in methods:
                    names.append(str(m["name"]).removeprefix("models/"))
            token = page.get("nextPageToken")
            if not token:
                break
        return sorted(set(names))


def _usage(meta: dict[str, Any]) -> Usage:
    def count(name: str) -> int | None:
        value = meta.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    candidates, thoughts = count("candidatesTokenCount"), count("thoughtsTokenCount")
    output = None
    if candidates is not None or thoughts is not None:
        output = (candidates or 0) + (thoughts or 0)
    return Usage(
        prompt_tokens=count("promptTokenCount"),
        cached_tokens=count("cachedContentTokenCount"),
        output_tokens=output,
        reasoning_tokens=thoughts,
        source="reported",
    )
