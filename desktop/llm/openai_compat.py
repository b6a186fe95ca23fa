"""OpenAI Chat Completions streaming (OpenAI itself and every OpenAI-compatible server).

Foundation scope: streaming text, usage when the server sends it (``stream_options``), llama.cpp
server ``timings``, and the common HTTP failures as typed errors. Provider JSON never leaves
this module.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import httpx_sse

from desktop.llm.errors import (
    AuthError,
    BadResponse,
    ContextTooLong,
    ModelNotFound,
    ProviderUnavailable,
    RateLimited,
    UserError,
)
from desktop.llm.events import (
    Finished,
    ReasoningDelta,
    RunInfo,
    StreamEvent,
    TextDelta,
    Timing,
    Usage,
)
from desktop.llm.provider import ChatRequest

_FINISH = {"stop": "stop", "length": "length", "content_filter": "stop", "tool_calls": "stop"}


class OpenAICompatProvider:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        label: str = "The server",
        stall_timeout_s: float = 60.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._label = label
        self._host = urlsplit(self._base_url).hostname or self._base_url
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(connect=15.0, read=stall_timeout_s, write=30.0, pool=15.0),
            verify=True,
        )
        self._owns_client = client is None

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        s = request.sampling
        if s.temperature is not None:
            body["temperature"] = s.temperature
        if s.top_p is not None:
            body["top_p"] = s.top_p
        if s.max_tokens is not None:
            body["max_tokens"] = s.max_tokens
        if s.seed is not None:
            body["seed"] = s.seed
        if s.stop:
            body["stop"] = list(s.stop)
        return body

    def _http_error(self, status: int, text: str, headers: httpx.Headers) -> UserError:
        where = f"{self._label} ({self._host})"
        detail = _error_detail(text)
        if status in (401, 403):
            return AuthError(
                f"{where} rejected the API key (HTTP {status}). Check the key in the agent's "
                "settings."
            )
        if status == 404:
            return ModelNotFound(
                f"{where} does not know this model or path (HTTP 404{detail}). Check the model "
                "name and base URL."
            )
        if status == 429:
            retry_after = _retry_after(headers.get("retry-after"))
            wait = f" Try again in {retry_after:.0f} s." if retry_after else " Try again shortly."
            return RateLimited(f"{where} is limiting requests (HTTP 429).{wait}", retry_after)
        if status == 400 and ("context" in text.lower() or "too long" in text.lower()):
            return ContextTooLong(
                f"{where} says the conversation is too long for the model{detail}. Start a new "
                "conversation or shorten the message."
            )
        if status >= 500:
            return ProviderUnavailable(
                f"{where} had a server error (HTTP {status}{detail}). Try again in a moment."
            )
        return BadResponse(f"{where} refused the request (HTTP {status}{detail}).")

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        url = f"{self._base_url}/chat/completions"
        started = time.perf_counter()
        where = f"{self._label} ({self._host})"
        finish: str | None = None
        reported_model: str | None = None
        try:
            async with self._client.stream(
                "POST", url, json=self._body(request), headers=self._headers()
            ) as response:
                headers_ms = (time.perf_counter() - started) * 1000
                if response.status_code >= 400:
                    text = (await response.aread()).decode("utf-8", "replace")[:2000]
                    raise self._http_error(response.status_code, text, response.headers)
                yield Timing(headers_ms=headers_ms)
                source = httpx_sse.EventSource(response)
                async for sse in source.aiter_sse():
                    data = sse.data.strip()
                    if not data:
                        continue
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except json.JSONDecodeError as exc:
                        raise BadResponse(f"{where} sent data that is not JSON.") from exc
                    if not isinstance(chunk, dict):
                        raise BadResponse(f"{where} sent an unexpected message.")
                    if "error" in chunk:
                        err = chunk["error"]
                        msg = err.get("message") if isinstance(err, dict) else str(err)
                        raise BadResponse(f"{where} reported an error mid-stream: {msg}")
                    if reported_model is None and chunk.get("model"):
                        reported_model = str(chunk["model"])
                        yield RunInfo(model_reported=reported_model)
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") or {}
                        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                        if reasoning:
                            yield ReasoningDelta(str(reasoning))
                        if delta.get("content"):
                            yield TextDelta(str(delta["content"]))
                        if choice.get("finish_reason"):
                            finish = _FINISH.get(choice["finish_reason"], "stop")
                    usage = chunk.get("usage")
                    if isinstance(usage, dict):
                        details = usage.get("prompt_tokens_details") or {}
                        cdetails = usage.get("completion_tokens_details") or {}
                        yield Usage(
                            prompt_tokens=usage.get("prompt_tokens"),
                            cached_tokens=details.get("cached_tokens"),
                            output_tokens=usage.get("completion_tokens"),
                            reasoning_tokens=cdetails.get("reasoning_tokens"),
                            source="reported",
                        )
                    timings = chunk.get("timings")
                    if isinstance(timings, dict):
                        yield Timing(
                            prefill_ms=timings.get("prompt_ms"),
                            decode_ms=timings.get("predicted_ms"),
                            prompt_eval_tokens=timings.get("prompt_n"),
                        )
        except httpx.ConnectError as exc:
            raise ProviderUnavailable(
                f"Cannot reach {where}: {_reason(exc)}. Check that the server is running and the "
                "base URL is right."
            ) from exc
        except httpx.ReadTimeout as exc:
            raise ProviderUnavailable(
                f"{where} stopped sending data. Try again, or raise the stall timeout."
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise ProviderUnavailable(
                f"The connection to {where} dropped mid-reply. The text so far is kept; retry."
            ) from exc
        except httpx.HTTPError as exc:
            raise ProviderUnavailable(f"Talking to {where} failed: {_reason(exc)}.") from exc
        yield Finished(finish or "stop")  # type: ignore[arg-type]

    async def list_models(self) -> list[str]:
        response = await self._client.get(f"{self._base_url}/models", headers=self._headers())
        if response.status_code >= 400:
            raise self._http_error(response.status_code, response.text, response.headers)
        data = response.json().get("data") or []
        return sorted(str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id"))

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:200]


def _error_detail(text: str) -> str:
    try:
        data = json.loads(text)
        err = data.get("error") if isinstance(data, dict) else None
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return f": {str(msg)[:300]}"
    except (ValueError, AttributeError):
        pass
    return ""


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
