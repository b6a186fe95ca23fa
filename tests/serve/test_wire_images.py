"""Images from API clients: OpenAI's ``image_url`` content parts in a chat-completions body
become the user message's images (``serve/wire.py``), as base64 data URLs only (the server
never fetches an address), and reach a remote agent's upstream as image parts."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from desktop.llm.provider import ChatMessage, ImagePart
from desktop.serve.wire import ApiError, agent_request, parse_ask
from desktop.store.agents import Agent
from tests.helpers.fault_server import Reply, ticking_tokens
from tests.serve.support import STARTER_ID, assert_openai_error, post_chat, remote_upstream


def _png(color: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (3, 2), color).save(out, "PNG")
    return out.getvalue()


def _jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (3, 2), "blue").save(out, "JPEG")
    return out.getvalue()


def _url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def _ask(*parts: dict, role: str = "user"):
    return parse_ask({"model": "m", "messages": [{"role": role, "content": list(parts)}]})


def _refused(*parts: dict, role: str = "user") -> ApiError:
    with pytest.raises(ApiError) as caught:
        _ask(*parts, role=role)
    assert caught.value.status == 400
    return caught.value


def test_image_parts_become_the_user_messages_images_beside_its_joined_text() -> None:
    png, jpeg = _png(), _jpeg()
    ask = _ask(
        {"type": "text", "text": "Compare "},
        _image_part(_url(png)),
        {"type": "text", "text": "these two."},
        _image_part(_url(jpeg, "image/jpeg")),
    )
    (message,) = ask.messages
    assert message == ChatMessage(
        "user",
        "Compare these two.",
        images=(ImagePart("image/png", png), ImagePart("image/jpeg", jpeg)),
    )


def test_an_image_url_given_as_a_bare_string_and_spelled_loosely_is_read_too() -> None:
    """Some clients send ``image_url`` as the URL itself, or write ``image/jpg``."""
    jpeg = _jpeg()
    loose = "DATA:image/JPG;base64," + base64.b64encode(jpeg).decode()
    (message,) = _ask({"type": "image_url", "image_url": loose}).messages
    assert message.images == (ImagePart("image/jpeg", jpeg),) and message.content == ""


def test_text_only_bodies_carry_no_images() -> None:
    ask = parse_ask({"model": "m", "messages": [{"role": "user", "content": "Hi"}]})
    assert ask.messages == (ChatMessage("user", "Hi"),)


@pytest.mark.parametrize("url", ["https://example.com/cat.png", "http://127.0.0.1/x.png"])
def test_an_address_is_refused_the_server_fetches_nothing(url: str) -> None:
    error = _refused({"type": "text", "text": "What is this?"}, _image_part(url))
    assert error.param == "messages[0].content[1].image_url"
    assert error.message == (
        "messages[0].content[1].image_url must be a data: URL; SIMI Multi does not fetch addresses."
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (_url(b"hello", "text/plain"), "text/plain data, not an image"),
        (_url(b"<svg/>", "image/svg+xml"), "send a PNG, JPEG, GIF or WebP image"),
        ("data:image/png," + "%89PNG", "must be base64"),
        ("data:image/png;base64,@@not-base64@@", "not valid base64"),
        (_url(b"just text, not a picture"), "says image/png, but its data is not such an image"),
        (_url(b"RIFF\x00\x00\x00\x00WAVEfmt ", "image/webp"), "not such an image"),
        ("file:///etc/passwd", "must be a data: URL"),
        ("data:image/png;", "not a whole data URL"),
    ],
    ids=["text", "svg", "not-base64", "bad-base64", "not-png", "riff-not-webp", "file", "cut"],
)
def test_what_is_not_a_usable_image_is_a_400_naming_the_field(url: str, says: str) -> None:
    error = _refused(_image_part(url))
    assert error.param == "messages[0].content[0].image_url"
    assert error.message.startswith("messages[0].content[0].image_url") and says in error.message


def test_an_image_part_without_a_url_is_a_400_naming_the_field() -> None:
    error = _refused({"type": "text", "text": "x"}, {"type": "image_url", "image_url": {}})
    assert error.param == "messages[0].content[1].image_url" and "needs a 'url'" in error.message


def test_an_image_over_20_mb_is_refused_before_it_is_decoded() -> None:
    big = "data:image/png;base64," + "A" * (28 * 1024 * 1024)  # about 21 MB of bytes
    error = _refused(_image_part(big))
    assert "larger than 20 MB" in error.message and error.param.endswith("image_url")


def test_only_user_messages_may_carry_images() -> None:
    error = _refused(_image_part(_url(_png())), role="assistant")
    assert "only user messages may carry images" in error.message
    assert error.param == "messages[0].content[0]"


def test_other_part_types_are_still_refused_by_name() -> None:
    error = _refused({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}})
    assert "'input_audio'" in error.message and "images" in error.message


def test_the_agents_request_keeps_the_clients_images() -> None:
    png = _png()
    agent = Agent(name="Eyes", kind="openai", model="gpt-x", id=1, system_prompt="Look.")
    ask = _ask({"type": "text", "text": "What is it?"}, _image_part(_url(png)))
    request = agent_request(agent, ask, client_sampling=False)
    assert request.messages == (
        ChatMessage("system", "Look."),
        ChatMessage("user", "What is it?", images=(ImagePart("image/png", png),)),
    )


def test_a_clients_image_reaches_a_remote_agents_upstream_as_an_image_url_part(services) -> None:
    """End to end: a client posts a data-URL image to SIMI's server; the agent's upstream (a
    ``FaultServer`` standing in for an OpenAI-compatible vision server) receives it as an
    ``image_url`` part with the same bytes, and the reply comes back to the client."""
    url = _url(_png("green"))
    body = {
        "model": "remote",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Which colour?"}, _image_part(url)],
            }
        ],
    }
    with remote_upstream(services, lambda _request: Reply(body=ticking_tokens(2))) as upstream:
        response = post_chat(services, body)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "tok0 tok1 "
    (sent,) = [r.json() for r in upstream.requests]
    assert sent["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Which colour?"},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }


def test_an_image_for_a_local_agent_that_cannot_see_is_a_400_before_any_model_runs(
    services,
) -> None:
    """The starter model has no projector: the client hears why, in words, with a 400, and
    no worker starts."""
    body = {
        "model": STARTER_ID,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}, _image_part(_url(_png()))]}
        ],
    }
    response = post_chat(services, body)
    error = assert_openai_error(response, 400, "images_not_supported")
    assert "cannot read images" in error["message"]
    assert all(worker.pid is None for worker in services.local.workers)  # none started


def test_a_clients_photo_reaches_the_upstream_upright_stripped_and_sized(
    services, tmp_path
) -> None:
    """A client's phone photo (stored sideways, EXIF orientation, GPS) is made ready as an
    attached one is: the upstream (a ``FaultServer`` standing in for an OpenAI-compatible
    vision server) gets it upright, without metadata, within the provider's limits."""
    from tests.attach.samples import photo_with_exif

    photo = photo_with_exif(tmp_path / "IMG_1.jpg", (3000, 2000), orientation=6)
    url = _url(photo.read_bytes(), "image/jpeg")
    body = {"model": "remote", "messages": [{"role": "user", "content": [_image_part(url)]}]}
    with remote_upstream(services, lambda _request: Reply(body=ticking_tokens(1))) as upstream:
        response = post_chat(services, body)
    assert response.status_code == 200, response.text
    (sent,) = [r.json() for r in upstream.requests]
    (part,) = [p for p in sent["messages"][-1]["content"] if p["type"] == "image_url"]
    data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
    with Image.open(io.BytesIO(data)) as im:
        assert im.size == (768, 1152)  # upright (taller than wide), short edge 768 for OpenAI
        assert not im.getexif() and "exif" not in im.info  # no orientation, camera or GPS left
