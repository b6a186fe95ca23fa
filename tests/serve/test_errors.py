"""What a client gets back for a request the server cannot serve: OpenAI's error shape with the
right status, the field named, ``Retry-After`` where waiting helps, and never a traceback."""

from __future__ import annotations

import asyncio
from pathlib import Path

from desktop.serve.config import ServeConfig
from desktop.store.agents import Agent
from tests.helpers.fault_server import FaultServer, error_reply
from tests.serve.support import assert_openai_error, chat_body, client, remote, serving, stats_rows

PATH = "/v1/chat/completions"


def test_unknown_model_is_404_model_not_found(services) -> None:
    async def main() -> None:
        async with serving(services) as server, client(server) as http:
            response = await http.post(PATH, json=chat_body("gpt-4o"))
        error = assert_openai_error(response, 404, "model_not_found")
        assert error["param"] == "model" and "gpt-4o" in error["message"]

    asyncio.run(main())


def test_bodies_that_are_not_a_chat_request_are_400_naming_what_is_wrong(services) -> None:
    async def main() -> None:
        async with serving(services) as server, client(server) as http:
            headers = {"Content-Type": "application/json"}
            bad_json = await http.post(PATH, content=b'{"model": "smollm2-local",', headers=headers)
            no_messages = await http.post(PATH, json={"model": "smollm2-local"})
            image = await http.post(
                PATH,
                json={
                    "model": "smollm2-local",
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "text", "text": "What is this?"},
                                {"type": "image_url", "image_url": {"url": "data:image/png;"}},
                            ],
                        }
                    ],
                },
            )
            not_object = await http.post(PATH, json=["model", "messages"])
        assert_openai_error(bad_json, 400, "invalid_json")
        error = assert_openai_error(no_messages, 400)
        assert error["param"] == "messages" and "messages" in error["message"]
        error = assert_openai_error(image, 400)
        assert "data URL" in error["message"]
        assert error["param"] == "messages[0].content[1].image_url"
        assert_openai_error(not_object, 400)

    asyncio.run(main())
    assert stats_rows(services) == []  # nothing ran


def test_a_body_over_the_cap_is_413_with_or_without_content_length(services) -> None:
    big = chat_body("smollm2-local", "x" * 2000)

    async def chunked():
        import json

        data = json.dumps(big).encode()
        for i in range(0, len(data), 256):
            yield data[i : i + 256]

    async def main() -> None:
        config = ServeConfig(port=0, max_body_bytes=1000)
        async with serving(services, config) as server, client(server) as http:
            sized = await http.post(PATH, json=big)
            streamed = await http.post(PATH, content=chunked())
            small = await http.post(PATH, json=chat_body("nope"))
        assert "content-length" in {k.lower() for k in sized.request.headers}
        assert streamed.request.headers.get("transfer-encoding") == "chunked"
        assert_openai_error(sized, 413, "request_too_large")
        assert_openai_error(streamed, 413, "request_too_large")
        assert_openai_error(small, 404)  # a small body still gets through the cap

    asyncio.run(main())


def test_unknown_routes_and_methods_are_json_errors(services) -> None:
    async def main() -> None:
        async with serving(services) as server, client(server) as http:
            missing = await http.get("/v1/embeddings")
            root = await http.get("/")
            wrong_method = await http.get(PATH)
            no_v1 = await http.get("/models")  # some editors leave /v1 out
        assert_openai_error(missing, 404, "unknown_url")
        assert_openai_error(root, 404, "unknown_url")
        assert_openai_error(wrong_method, 405)
        assert no_v1.status_code == 200 and no_v1.json()["object"] == "list"

    asyncio.run(main())


def test_a_corrupt_local_model_is_503_with_retry_after(services, tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)  # the right magic, a nonsense header
    services.agents.create(
        Agent(name="Broken", kind="local", model="b", model_path=str(bad), n_ctx=512)
    )

    async def main() -> None:
        async with serving(services) as server, client(server) as http:
            whole = await http.post(PATH, json=chat_body("broken"))
            streamed = await http.post(PATH, json=chat_body("broken", stream=True))
        for response in (whole, streamed):
            error = assert_openai_error(response, 503, "model_not_loaded")
            assert "broken.gguf" in error["message"]
            assert int(response.headers["retry-after"]) > 0
        assert server.gate.running == 0  # the failed calls gave their places back

    asyncio.run(main())
    rows = stats_rows(services)
    assert [r["finish_reason"] for r in rows] == ["error", "error"]
    assert {r["source"] for r in rows} == {"api"}


def test_an_upstream_that_refuses_the_agents_key_is_a_502(services) -> None:
    with FaultServer(error_reply(401, {"error": {"message": "bad key"}})) as upstream:
        remote(services, upstream.url + "/v1")

        async def main() -> None:
            async with serving(services) as server, client(server) as http:
                return await http.post(PATH, json=chat_body("remote"))

        response = asyncio.run(main())
    assert_openai_error(response, 502, "upstream_auth_failed")
    assert stats_rows(services)[0]["error_kind"] == "auth"
