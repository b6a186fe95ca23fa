"""Who may talk to the server: API keys (kept hashed; revoked at once; limited to agents),
the Host header (DNS rebinding), browsers' origins (CORS), and no key-less listening beyond
loopback. The agent behind it is a remote one on ``FaultServer`` (a loopback HTTP server
standing in for an OpenAI-compatible API), so nothing here loads a model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from desktop.serve.config import ServeConfig
from desktop.serve.server import ApiServer, ServeError
from desktop.settings.secrets import SecretStore
from desktop.store.serving import ApiKeyStore
from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens
from tests.serve.support import (
    assert_openai_error,
    bearer,
    chat_body,
    client,
    make_key,
    remote,
    serving,
    stats_rows,
)


def tokens(_request) -> Reply:  # a fresh body for each request (the chunks are a generator)
    return Reply(body=ticking_tokens(2))


def test_with_keys_required_only_the_right_key_gets_an_answer(services) -> None:
    with FaultServer(tokens) as upstream:
        remote(services, upstream.url + "/v1")
        key = make_key(services, "editor")

        async def main() -> None:
            config = ServeConfig(port=0, require_key=True)
            async with serving(services, config) as server, client(server) as http:
                path = "/v1/chat/completions"
                none = await http.post(path, json=chat_body("remote"))
                wrong = await http.post(
                    path, json=chat_body("remote"), headers=bearer("simi-" + "x" * 43)
                )
                basic = await http.post(
                    path, json=chat_body("remote"), headers={"Authorization": "Basic abc"}
                )
                right = await http.post(path, json=chat_body("remote"), headers=bearer(key))
            for refused in (none, wrong, basic):
                assert_openai_error(refused, 401, "invalid_api_key")
                assert refused.headers["www-authenticate"] == "Bearer"
            assert right.status_code == 200, right.text
            assert right.json()["choices"][0]["message"]["content"] == "tok0 tok1 "

        asyncio.run(main())
    assert len(upstream.requests) == 1  # only the right key's request went upstream
    (row,) = stats_rows(services)
    assert row["source"] == "api" and row["api_client"] == "editor"
    (record,) = ApiKeyStore(services.db).list()
    assert record.last_used_at is not None  # the key list shows when it was last used


def test_models_without_the_right_key_is_401(services) -> None:
    make_key(services, "editor")

    async def main() -> None:
        config = ServeConfig(port=0, require_key=True)
        async with serving(services, config) as server, client(server) as http:
            none = await http.get("/v1/models")
            wrong = await http.get("/v1/models", headers=bearer("simi-wrong"))
        for refused in (none, wrong):
            assert_openai_error(refused, 401, "invalid_api_key")

    asyncio.run(main())


def test_a_key_limited_to_another_agent_cannot_see_or_call_this_one(services) -> None:
    with FaultServer(tokens) as upstream:
        remote(services, upstream.url + "/v1")
        other = remote(services, upstream.url + "/v1", name="Other")
        narrow = make_key(services, "narrow", agent_ids=(other.id,))
        wide = make_key(services, "wide")

        async def main() -> None:
            async with serving(services) as server, client(server) as http:
                refused = await http.post(
                    "/v1/chat/completions", json=chat_body("remote"), headers=bearer(narrow)
                )
                listed = await http.get("/v1/models", headers=bearer(narrow))
                everything = await http.get("/v1/models", headers=bearer(wide))
                allowed = await http.post(
                    "/v1/chat/completions", json=chat_body("other"), headers=bearer(narrow)
                )
            error = assert_openai_error(refused, 404, "model_not_found")
            assert "remote" in error["message"]
            assert [m["id"] for m in listed.json()["data"]] == ["other"]
            assert {"remote", "other", "smollm2-local"} <= {
                m["id"] for m in everything.json()["data"]
            }
            assert allowed.status_code == 200, allowed.text

        asyncio.run(main())
    assert len(upstream.requests) == 1


def test_the_key_is_kept_hashed_in_sqlite_and_in_the_keyring(services) -> None:
    key = make_key(services, "editor")
    cur = services.db.execute("SELECT * FROM api_keys")
    columns = [d[0] for d in cur.description]
    (row,) = cur.fetchall()
    assert not any(key in str(value) for value in row), dict(zip(columns, row, strict=True))
    assert not any(key[5:20] in str(value) for value in row)  # nor a long piece of it
    services.db.conn.commit()
    on_disk = b"".join(
        p.read_bytes()
        for p in services.paths.db_path.parent.glob(services.paths.db_path.name + "*")
    )
    assert key.encode() not in on_disk
    record_id = row[columns.index("id")]
    assert SecretStore().get(f"api-server-key-{record_id}") == key  # the real keyring has it
    server = ApiServer(services, ServeConfig(port=0))
    assert server.keys.reveal("editor") == key


def test_a_revoked_key_fails_at_once_on_a_running_server(services) -> None:
    with FaultServer(tokens) as upstream:
        remote(services, upstream.url + "/v1")
        key = make_key(services, "editor")
        make_key(services, "spare")  # keys stay required after the revoke

        async def main() -> None:
            config = ServeConfig(port=0, require_key=True)
            async with serving(services, config) as server, client(server) as http:
                body = chat_body("remote")
                before = await http.post("/v1/chat/completions", json=body, headers=bearer(key))
                assert server.keys.revoke("editor")
                after = await http.post("/v1/chat/completions", json=body, headers=bearer(key))
            assert before.status_code == 200, before.text
            assert_openai_error(after, 401, "invalid_api_key")
            assert server.keys.reveal("editor") is None

        asyncio.run(main())
    assert len(upstream.requests) == 1


def test_listening_beyond_loopback_needs_a_key_first(services) -> None:
    async def main() -> None:
        server = ApiServer(services, ServeConfig(host="0.0.0.0", port=0))
        with pytest.raises(ServeError) as info:
            await server.start()
        assert "key" in info.value.user_message and not server.running
        key = make_key(services, "lan")
        async with serving(services, ServeConfig(host="0.0.0.0", port=0)) as server:
            assert server.address.startswith("http://127.0.0.1:")
            async with client(server) as http:
                refused = await http.post("/v1/chat/completions", json=chat_body("x"))
                models = await http.get("/v1/models", headers=bearer(key))
        assert_openai_error(refused, 401)  # beyond loopback every request needs the key
        assert models.status_code == 200

    asyncio.run(main())


def test_only_this_machines_names_pass_the_host_check(services) -> None:
    async def main() -> None:
        async with serving(services) as server:
            port = server.config.port
            async with client(server) as http:
                evil = await http.get("/v1/models", headers={"Host": "evil.example"})
                evil_port = await http.post(
                    "/v1/chat/completions",
                    json=chat_body("smollm2-local"),
                    headers={"Host": f"evil.example:{port}"},
                )
                local = await http.get("/v1/models", headers={"Host": f"localhost:{port}"})
                literal = await http.get("/v1/models", headers={"Host": f"127.0.0.1:{port}"})
        assert_openai_error(evil, 421, "host_not_allowed")
        assert_openai_error(evil_port, 421, "host_not_allowed")
        assert local.status_code == 200 and literal.status_code == 200
        assert "smollm2-local" in [m["id"] for m in local.json()["data"]]

    asyncio.run(main())
    assert stats_rows(services) == []


def test_browsers_get_cors_only_for_listed_origins(services) -> None:
    page = "http://localhost:3000"
    preflight = {"Access-Control-Request-Method": "POST"}
    with FaultServer(tokens) as upstream:
        remote(services, upstream.url + "/v1")

        async def main() -> None:
            config = ServeConfig(port=0, cors_origins=(page,))
            async with serving(services, config) as server, client(server) as http:
                path = "/v1/chat/completions"
                other = await http.options(
                    path, headers={"Origin": "https://evil.example", **preflight}
                )
                listed = await http.options(path, headers={"Origin": page, **preflight})
                posted = await http.post(
                    path, json=chat_body("remote"), headers={"Origin": "https://evil.example"}
                )
                assert len(upstream.requests) == 0 and stats_rows(services) == []
                ok = await http.post(path, json=chat_body("remote"), headers={"Origin": page})
            assert_openai_error(other, 403, "origin_not_allowed")
            assert "access-control-allow-origin" not in other.headers
            assert listed.status_code == 204
            assert listed.headers["access-control-allow-origin"] == page
            assert "access-control-allow-credentials" not in listed.headers
            assert "authorization" in listed.headers["access-control-allow-headers"].lower()
            assert_openai_error(posted, 403, "origin_not_allowed")
            assert "access-control-allow-origin" not in posted.headers
            assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == page
            assert "access-control-allow-credentials" not in ok.headers

        asyncio.run(main())
    assert len(upstream.requests) == 1
    assert len(stats_rows(services)) == 1  # the listed origin's call only


def test_without_listed_origins_every_browser_preflight_is_refused(services) -> None:
    async def main() -> None:
        async with serving(services) as server, client(server) as http:
            response = await http.options(
                "/v1/models",
                headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "GET"},
            )
        assert_openai_error(response, 403)
        assert "access-control-allow-origin" not in response.headers

    asyncio.run(main())


def test_on_loopback_without_keys_any_text_is_a_key_but_a_wrong_simi_key_is_not(
    services,
) -> None:
    """OpenAI's SDK always sends a key; where none is needed its "not-needed" passes, while a
    revoked SIMI key is said (401) so its owner notices."""
    with FaultServer(tokens) as upstream:
        remote(services, upstream.url + "/v1")
        key = make_key(services, "old")
        services_keys = ApiServer(services, ServeConfig()).keys
        services_keys.revoke("old")

        async def main() -> tuple[Any, Any]:
            async with serving(services) as server, client(server) as http:
                path = "/v1/chat/completions"
                anything = await http.post(
                    path, json=chat_body("remote"), headers=bearer("not-needed")
                )
                revoked = await http.post(path, json=chat_body("remote"), headers=bearer(key))
            return anything, revoked

        anything, revoked = asyncio.run(main())
    assert anything.status_code == 200, anything.text
    assert_openai_error(revoked, 401, "invalid_api_key")
    (row,) = stats_rows(services)
    assert row["api_client"] is None  # no key's name on the call
