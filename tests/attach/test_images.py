"""Images for a model (``desktop/attach/images.py``): checked, turned upright, stripped of
metadata, sized per provider; token estimates against the providers' published examples."""

from __future__ import annotations

import dataclasses
import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image, PngImagePlugin

from desktop.attach.errors import AttachError
from desktop.attach.images import (
    ANTHROPIC,
    GEMINI,
    LOCAL,
    OPENAI,
    OPENAI_COMPATIBLE,
    estimate_image_tokens,
    inspect_image,
    prepare_image,
    profile_for,
)
from tests.attach import samples


def _open(data: bytes) -> Image.Image:
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


def test_inspect_gives_the_size_as_shown_and_the_real_type(tmp_path: Path) -> None:
    png = samples.image_file(tmp_path / "a.png", (40, 30))
    assert inspect_image(png) == (40, 30, "image/png")
    sideways = samples.photo_with_exif(tmp_path / "b.jpg", (40, 30), orientation=6)
    assert inspect_image(sideways) == (30, 40, "image/jpeg")  # upright: a quarter turn


def test_a_truncated_image_is_refused_as_unreadable(tmp_path: Path) -> None:
    whole = samples.image_file(tmp_path / "whole.png", (200, 200)).read_bytes()
    cut = tmp_path / "cut.png"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(AttachError) as caught:
        inspect_image(cut)
    assert caught.value.user_message.startswith("“cut.png” could not be read as an image (")

    photo = samples.image_file(tmp_path / "whole.jpg", (200, 200), fmt="JPEG").read_bytes()
    cut_photo = tmp_path / "cut.jpg"
    cut_photo.write_bytes(photo[: len(photo) // 2])
    with pytest.raises(AttachError, match=r"“cut\.jpg” could not be read as an image"):
        inspect_image(cut_photo)


def test_a_decompression_bomb_is_refused_before_decoding(tmp_path: Path) -> None:
    # a valid PNG whose header claims 20,000 x 20,000 pixels (400 megapixels)
    data = bytearray(samples.image_file(tmp_path / "s.png", (2, 2), noisy=False).read_bytes())
    ihdr = struct.pack(">II", 20_000, 20_000) + bytes(data[24:29])
    data[16:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(bytes(data))
    with pytest.raises(AttachError, match=r"“bomb\.png” .*megapixels"):
        inspect_image(bomb)
    with pytest.raises(AttachError, match="megapixels"):
        prepare_image(bomb, OPENAI)


def test_exif_orientation_is_applied_and_all_metadata_goes(tmp_path: Path) -> None:
    # stored 400 x 200, red left half; Orientation 6 shows it turned a quarter clockwise
    photo = samples.photo_with_exif(tmp_path / "p.jpg", (400, 200), orientation=6)
    before = Image.open(photo)
    assert before.getexif().get_ifd(0x8825)  # the sample does carry a GPS position
    part = prepare_image(photo, OPENAI)
    out = _open(part.data)
    assert (part.width, part.height) == out.size == (200, 400)
    top = out.convert("RGB").getpixel((100, 50))
    bottom = out.convert("RGB").getpixel((100, 350))
    assert isinstance(top, tuple) and isinstance(bottom, tuple)
    assert top[0] > top[2] and bottom[2] > bottom[0]  # red on top, blue below: turned
    assert len(out.getexif()) == 0  # no EXIF at all: no orientation, camera or GPS
    assert not {"exif", "icc_profile", "comment"} & set(out.info)
    assert b"PhoneMaker" not in part.data and b"holiday" not in part.data


def test_png_text_chunks_and_colour_profile_are_not_copied(tmp_path: Path) -> None:
    from PIL import ImageCms

    info = PngImagePlugin.PngInfo()
    info.add_text("Author", "Jane Doe, 12 Private Lane")
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    path = samples.image_file(
        tmp_path / "shot.png", (64, 64), noisy=False, pnginfo=info, icc_profile=srgb
    )
    part = prepare_image(path, ANTHROPIC)
    out = _open(part.data)
    assert part.mime == "image/png"  # two flat colours: a drawing stays PNG
    assert "Author" not in out.info and "icc_profile" not in out.info
    assert b"Jane Doe" not in part.data


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (OPENAI, (2048, 512)),  # fits 2048; short side already under 768
        (ANTHROPIC, (1568, 392)),
        (GEMINI, (3072, 768)),
        (LOCAL, (1024, 256)),
    ],
)
def test_resizing_keeps_the_aspect(
    tmp_path: Path, profile: object, expected: tuple[int, int]
) -> None:
    assert isinstance(profile, type(OPENAI))
    assert profile.fit(4000, 1000) == expected


def test_openai_brings_the_short_side_to_768_and_anthropic_the_pixels_to_115_mp() -> None:
    assert OPENAI.fit(4096, 2048) == (1536, 768)
    w, h = ANTHROPIC.fit(1500, 1500)
    assert w == h and w * h <= 1_150_000 and w >= 1070


def test_a_large_photo_is_sent_smaller_as_jpeg_and_a_small_one_never_upscaled(
    tmp_path: Path,
) -> None:
    big = samples.image_file(tmp_path / "big.jpg", (1300, 1000), fmt="JPEG")  # 1.3 MP
    part = prepare_image(big, ANTHROPIC)
    assert part.mime == "image/jpeg"
    assert (part.width, part.height) == _open(part.data).size
    assert abs(part.width / part.height - 1.3) < 0.01 and part.width * part.height <= 1_150_000

    small = samples.image_file(tmp_path / "small.png", (300, 200))
    for profile in (OPENAI, ANTHROPIC, GEMINI, LOCAL):
        assert _open(prepare_image(small, profile).data).size == (300, 200)


def test_transparency_keeps_png_and_formats_become_png_or_jpeg(tmp_path: Path) -> None:
    logo = Image.new("RGBA", (50, 50), (0, 0, 0, 0))
    logo.paste((255, 0, 0, 255), (10, 10, 40, 40))
    logo.save(tmp_path / "logo.png")
    part = prepare_image(tmp_path / "logo.png", OPENAI)
    out = _open(part.data)
    assert part.mime == "image/png" and out.mode == "RGBA"
    assert out.getpixel((0, 0))[3] == 0  # type: ignore[index]

    gif = samples.image_file(tmp_path / "anim.gif", (60, 40), fmt="GIF", noisy=False)
    assert prepare_image(gif, OPENAI).mime == "image/png"
    webp = samples.image_file(tmp_path / "photo.webp", (120, 90), fmt="WEBP")
    assert prepare_image(webp, OPENAI).mime == "image/jpeg"

    # an opaque RGBA photo needs no alpha: JPEG
    opaque = samples.image_file(tmp_path / "opaque.png", (120, 90), mode="RGBA")
    assert prepare_image(opaque, OPENAI).mime == "image/jpeg"


def test_sixteen_bit_grey_is_scaled_not_clipped_to_white(tmp_path: Path) -> None:
    grey = Image.new("I;16", (32, 32), 30_000)  # about 46% grey
    grey.save(tmp_path / "grey16.png")
    out = _open(prepare_image(tmp_path / "grey16.png", OPENAI).data)
    value = out.convert("L").getpixel((5, 5))
    assert isinstance(value, int) and 100 < value < 140


def test_the_encoded_image_fits_the_profiles_byte_limit(tmp_path: Path) -> None:
    noisy = samples.image_file(tmp_path / "noise.png", (500, 500))
    tight = dataclasses.replace(OPENAI, max_bytes=15_000)
    assert len(prepare_image(noisy, OPENAI).data) > 15_000  # it would not fit as is
    part = prepare_image(noisy, tight)
    assert len(part.data) <= 15_000 and _open(part.data).size == (part.width, part.height)


def test_token_estimates_follow_each_providers_formula() -> None:
    # OpenAI's worked examples: 1024 x 1024 -> 768 x 768, 4 tiles; 2048 x 4096 -> 768 x 1536
    assert estimate_image_tokens(1024, 1024, OPENAI) == 85 + 170 * 4 == 765
    assert estimate_image_tokens(2048, 4096, OPENAI) == 85 + 170 * 6 == 1105
    assert estimate_image_tokens(100, 100, OPENAI_COMPATIBLE) == 255
    # Anthropic: width x height / 750 (their table: 200 x 200 ~ 54, 1000 x 1000 ~ 1334)
    assert estimate_image_tokens(200, 200, ANTHROPIC) == 54
    assert estimate_image_tokens(1000, 1000, ANTHROPIC) == 1334
    assert estimate_image_tokens(4000, 3000, ANTHROPIC) <= 1_150_000 / 750 + 1
    # Gemini: 258 up to 384 x 384, else 258 per 768 x 768 tile
    assert estimate_image_tokens(384, 384, GEMINI) == 258
    assert estimate_image_tokens(1000, 1000, GEMINI) == 258 * 4
    assert estimate_image_tokens(800, 300, GEMINI) == 258 * 2
    assert estimate_image_tokens(1000, 1000, LOCAL) == 576


def test_each_agent_kind_gets_its_profile() -> None:
    assert profile_for("openai") is OPENAI
    assert profile_for("anthropic") is ANTHROPIC
    assert profile_for("gemini") is GEMINI
    assert profile_for("local") is LOCAL
    assert profile_for("openai-compatible") is OPENAI_COMPATIBLE
    assert profile_for("some-new-kind") is OPENAI_COMPATIBLE
