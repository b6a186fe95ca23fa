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

from collections.abc import Iterator
from typing import Any, Unpack
from urllib.parse import quote

from desktop.llm.errors import BadResponse
from desktop.llm.events import FinishReason, ReasoningDelta, StreamEvent, TextDelta, Usage
from desktop.llm.provider import ChatRequest
from desktop.llm.transport import HostedOptions, HostedProvider, HttpEndpoint, ReplyReader
from desktop.llm.wire import sampling_fields, system_and_turns, whole

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


class _Frames(ReplyReader):
    """``GenerateContentResponse`` frames; whole once a candidate has a finish reason."""

    NOT_UNDERSTOOD = "a frame this app does not understand."

    def __init__(self, http: HttpEndpoint, request: ChatRequest) -> None:
        super().__init__(http, request)
        self.meta: dict[str, Any] = {}

    def read(self, event: str, frame: dict[str, Any]) -> Iterator[StreamEvent]:
        where = self.http.where
        error = frame.get("error")
        if isinstance(error, dict):
            raise self.http.stream_error(
                str(error.get("status") or error.get("code") or ""), error.get("message")
            )
        yield from self.run_info(frame.get("modelVersion"))
        if isinstance(frame.get("usageMetadata"), dict):
            self.meta = frame["usageMetadata"]
        blocked = (frame.get("promptFeedback") or {}).get("blockReason")
        if blocked:
            raise BadResponse(
                f"{where} refused the prompt ({blocked}). Rephrase the message or "
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
                    f"{where} stopped the reply ({reason}). The text so far is "
                    "kept; rephrase the message to continue."
                )
            self.reason = _FINISH.get(reason, "stop")

    def usage(self) -> Usage:
        meta = self.meta
        candidates = whole(meta.get("candidatesTokenCount"))
        thoughts = whole(meta.get("thoughtsTokenCount"))
        output = None
        if candidates is not None or thoughts is not None:
            output = (candidates or 0) + (thoughts or 0)
        return Usage(
            prompt_tokens=whole(meta.get("promptTokenCount")),
            cached_tokens=whole(meta.get("cachedContentTokenCount")),
            output_tokens=output,
            reasoning_tokens=thoughts,
            source="reported",
        )


class GeminiProvider(HostedProvider):
    """Gemini models. ``include_thoughts`` asks thinking models for thought summaries, shown as
    reasoning (leave it off for models without thinking, which reject it)."""

    READER = _Frames
    DEFAULT_BASE_URL = DEFAULT_BASE_URL
    DEFAULT_LABEL = "Gemini"

    def __init__(
        self,
        api_key: str | None,
        *,
        include_thoughts: bool = False,
        **options: Unpack[HostedOptions],
    ) -> None:
        super().__init__(api_key, **options)
        self._include_thoughts = include_thoughts

    def _headers(self) -> dict[str, str]:
        # The key travels in a header, never in the URL, so it cannot end up in logs of URLs.
        return {"x-goog-api-key": self._api_key} if self._api_key else {}

    def _model(self, request: ChatRequest) -> str:
        return request.model.removeprefix("models/")

    def _url(self, request: ChatRequest) -> str:
        model = quote(self._model(request), safe="-._~")
        return f"{self._http.base_url}/models/{model}:streamGenerateContent?alt=sse"

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        system, turns = system_and_turns(request.messages)
        contents = [
            {
                "role": "model" if role == "assistant" else "user",
                "parts": [{"text": t} for t in texts],
            }
            for role, texts in turns
        ]
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        config = sampling_fields(
            request.sampling, top_p="topP", max_tokens="maxOutputTokens", stop="stopSequences"
        )
        if self._include_thoughts:
            config["thinkingConfig"] = {"includeThoughts": True}
        if config:
            body["generationConfig"] = config
        return body

    async def list_models(self) -> list[str]:
        """Models that can generate content (embedding-only models are left out)."""
        items = await self._model_items(
            f"{self._http.base_url}/models?pageSize=1000",
            "models",
            cursor_param="pageToken",
            cursor=lambda page: page.get("nextPageToken"),
        )
        names: set[str] = set()
        for m in items:
            if not isinstance(m, dict) or not m.get("name"):
                continue
            methods = m.get("supportedGenerationMethods")
            if methods is None or "generateContent" in methods:
                names.add(str(m["name"]).removeprefix("models/"))
        return sorted(names)
