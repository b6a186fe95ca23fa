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

Tools (``ChatRequest.tools``) go as ``tools=[{"functionDeclarations": [{name, description,
parameters}]}]``, the parameters cut down to the OpenAPI subset Gemini's ``Schema`` has fields
for (``gemini_schema``: it refuses the whole request over an unknown key such as ``$schema``,
``additionalProperties`` or ``const``). A call is a whole ``functionCall`` part (name, ``args``
object, an ``id`` on newer models; one is made up when there is none) that may carry a
``thoughtSignature`` beside it, kept on the ``ToolCall`` and sent back with the call (Gemini 3
refuses a history without it). Results go back as ``functionResponse`` parts in a user turn
(``{"result": text}``, or ``{"error": text}`` for a failed tool). ``MALFORMED_FUNCTION_CALL``
(the model could not write a call Gemini accepts) is a ``BadResponse`` in words.

Images (``ChatMessage.images``) go as ``{"inlineData": {"mimeType", "data"}}`` parts (base64),
before the message's text part. The REST docs write ``inline_data`` / ``mime_type``; the API's
JSON takes either spelling and this module sends camelCase throughout. ``usageMetadata.
promptTokensDetails`` counts the prompt by modality: its ``IMAGE`` entry is
``Usage.image_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Unpack
from urllib.parse import quote

from desktop.llm.errors import BadResponse
from desktop.llm.events import FinishReason, ReasoningDelta, StreamEvent, TextDelta, ToolCall, Usage
from desktop.llm.presets import GEMINI_BASE_URL
from desktop.llm.provider import ChatMessage, ChatRequest, ToolSpec
from desktop.llm.tool_wire import (
    arguments_object,
    finish_with_calls,
    made_up,
    new_call_id,
    plain,
    system_and_groups,
)
from desktop.llm.transport import HostedOptions, HostedProvider, HttpEndpoint, ReplyReader
from desktop.llm.wire import base64_of, sampling_fields, whole

DEFAULT_BASE_URL = GEMINI_BASE_URL
_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "OTHER": "stop",
    "FINISH_REASON_UNSPECIFIED": "stop",
}
# The keys of Gemini's Schema object (the generativelanguage v1beta ``Schema`` message); any
# other key of a JSON schema is dropped before it is sent.
_SCHEMA_KEYS = {
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
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
        self.prompt_details: list[Any] = []
        self.calls: list[ToolCall] = []

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
            details = self.meta.get("promptTokensDetails")
            if isinstance(details, list):  # not in every frame: the last one that had it
                self.prompt_details = details
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
            call = part.get("functionCall") if isinstance(part, dict) else None
            if isinstance(call, dict):
                self.calls.append(_tool_call(call, part.get("thoughtSignature")))
        reason = candidate.get("finishReason")
        if reason:
            reason = str(reason)
            if reason == "MALFORMED_FUNCTION_CALL":
                raise BadResponse(
                    f"{where} could not write a call to a tool in a form it accepts "
                    "(MALFORMED_FUNCTION_CALL). The text so far is kept; press Retry, or "
                    "rephrase the message."
                )
            if reason in _BLOCKED:
                raise BadResponse(
                    f"{where} stopped the reply ({reason}). The text so far is "
                    "kept; rephrase the message to continue."
                )
            self.reason = _FINISH.get(reason, "stop")

    def finish(self) -> Iterator[StreamEvent]:
        if not self.complete() and self.calls:
            raise BadResponse(
                f"{self.http.where} ended the reply after asking for the tool "
                f"“{self.calls[-1].name}”, before the reply was complete, so it was not run. "
                "The text so far is kept; press Retry to ask again."
            )
        if self.complete():
            self.reason = finish_with_calls(self.http.where, self.reason, self.calls)
            yield from self.calls
        yield from super().finish()

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
            image_tokens=_modality(self.prompt_details, "IMAGE"),
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
        system, groups = system_and_groups(request.messages)
        contents = [
            {"role": "model" if side == "assistant" else "user", "parts": _parts(group)}
            for side, group in groups
        ]
        body: dict[str, Any] = {"contents": contents}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
            if request.tool_choice == "none":
                body["toolConfig"] = {"functionCallingConfig": {"mode": "NONE"}}
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


def _modality(details: list[Any], modality: str) -> int | None:
    """The tokens of one modality in a ``ModalityTokenCount`` list; None when not listed."""
    counts = [
        whole(d.get("tokenCount"))
        for d in details
        if isinstance(d, dict) and d.get("modality") == modality
    ]
    found = [c for c in counts if c is not None]
    return sum(found) if found else None


def _tool_call(call: dict[str, Any], signature: object) -> ToolCall:
    """A ``functionCall`` part as a call: its args object back to JSON text."""
    args = call.get("args")
    return ToolCall(
        str(call.get("id") or "") or new_call_id(),
        str(call.get("name") or ""),
        json.dumps(args if args is not None else {}, ensure_ascii=False),
        signature=signature if isinstance(signature, str) and signature else None,
    )


def _parts(group: list[ChatMessage]) -> list[dict[str, Any]]:
    """One turn's parts: a text part per message (as before tools), images as
    ``inlineData`` parts before their message's text, calls as ``functionCall`` parts,
    results as ``functionResponse`` parts."""
    if plain(group):
        return [{"text": m.content} for m in group]
    parts: list[dict[str, Any]] = []
    for m in group:
        if m.role == "tool":
            response: dict[str, Any] = {
                "name": m.name or "",
                "response": {"error" if m.is_error else "result": m.content},
            }
            if not made_up(m.tool_call_id):
                response["id"] = m.tool_call_id  # Gemini's own id (ours are made up)
            parts.append({"functionResponse": response})
            continue
        for image in m.images:  # before the text, as Gemini's image guide advises
            parts.append({"inlineData": {"mimeType": image.mime, "data": base64_of(image)}})
        if m.content:
            parts.append({"text": m.content})
        for c in m.tool_calls:
            function: dict[str, Any] = {"name": c.name, "args": arguments_object(c)}
            if not made_up(c.id):
                function["id"] = c.id
            part: dict[str, Any] = {"functionCall": function}
            if c.signature:
                part["thoughtSignature"] = c.signature
            parts.append(part)
    return parts


def _declaration(tool: ToolSpec) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
    parameters = gemini_schema(tool.parameters) if tool.parameters else {}
    if parameters.get("properties"):  # Gemini refuses an object schema with no properties
        declaration["parameters"] = parameters
    return declaration


def gemini_schema(schema: Any) -> Any:
    """A JSON schema cut down to what Gemini's ``Schema`` accepts: unknown keys dropped
    (``$schema``, ``additionalProperties``, ``const``, ``$ref``...), recursively through
    ``properties``, ``items`` and ``anyOf``; a ``const`` becomes a one-value ``enum``; a type
    list such as ``["string", "null"]`` becomes its one type with ``nullable``; ``required``
    keeps only names that are properties (Gemini refuses the rest)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _SCHEMA_KEYS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: gemini_schema(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = gemini_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [gemini_schema(sub) for sub in value]
        elif key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            out[key] = types[0] if len(types) == 1 else "string"
            if "null" in value:
                out["nullable"] = True
        else:
            out[key] = value
    if "const" in schema and "enum" not in out:
        out["enum"] = [schema["const"]]
    if isinstance(out.get("required"), list):
        names = set(out.get("properties") or {})
        out["required"] = [n for n in out["required"] if n in names]
        if not out["required"]:
            del out["required"]
    return out
