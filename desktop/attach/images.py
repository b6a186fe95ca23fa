"""Images for a model: checked, turned upright, stripped of metadata, sized for the provider.

Each provider documents how large an image it takes and how it counts its tokens; an image
larger than that is scaled down on their side anyway, so sending it larger only costs upload
time and (for a wire like Anthropic's) a refusal. ``ImageProfile`` holds those limits
(sources, as read for this release):

- OpenAI (developers.openai.com, "Images and vision", calculating costs): an image is fitted
  into 2048 x 2048, then scaled so its short side is 768 px; 85 tokens plus 170 per 512-px
  tile; up to 20 MB per image. OpenAI-compatible servers (vLLM, LM Studio, Ollama...) take
  the same ``image_url`` parts, so other kinds use these numbers too.
- Anthropic (docs.anthropic.com, "Vision"): a long edge over 1568 px or more than ~1,600
  tokens is scaled down; they advise at most 1.15 megapixels; tokens = width x height / 750;
  at most 5 MB per image, counted on the base64 text, so 3.75 MB of bytes.
- Gemini (ai.google.dev, image understanding and token counting): up to 3072 x 3072; 258
  tokens when both sides are at most 384 px, else 258 per 768 x 768 tile (Gemini 3 models
  count by ``media_resolution`` instead: the estimate is rough there); inline data travels in
  a request of at most 20 MB, shared by every image, so 7 MB each (Vertex's per-file limit).
- Local (llama.cpp projectors): the projector rescales to its own input (336 to 896 px), so
  1024 px keeps detail without sending megapixels through the pipe; 576 tokens is LLaVA-1.5's
  count (24 x 24 patches), a rough guess for the others.

Decoding happens in Pillow's C code, which releases the GIL: the event loop keeps running.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal

from desktop.attach.errors import AttachError, short_reason
from desktop.llm.provider import ImagePart

TokenRule = Literal["openai", "anthropic", "gemini", "fixed"]
MB = 1_000_000
# Pillow's own decompression-bomb limit (twice MAX_IMAGE_PIXELS): ~178 megapixels, more than
# any camera makes; a file claiming more is refused before it is decoded
MAX_PIXELS = 2 * 89_478_485
MIME_OF_FORMAT = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "MPO": "image/jpeg",  # a camera's JPEG with a second picture in it: the first is read
    "GIF": "image/gif",
    "WEBP": "image/webp",
}
JPEG_QUALITY = 85
# a picture with at most this many colours is a drawing, a chart or a screenshot of one:
# PNG keeps its edges crisp (and is smaller than JPEG for it)
GRAPHICS_COLOURS = 256
_ORIENTATION = 0x0112
_SWAPPED = {5, 6, 7, 8}  # EXIF orientations that turn the picture a quarter

if TYPE_CHECKING:  # Pillow loads with the first image (desktop.preload: after first paint)
    from PIL import Image


@cache
def _quiet_pillow() -> None:
    """Pillow warns above 89 megapixels and refuses above twice that; ``_check_pixels``
    decides (with words for the person), so the warning is noise."""
    from PIL import Image

    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


@dataclass(frozen=True, slots=True)
class ImageProfile:
    """What one provider takes: the largest long edge, pixel count and file size, and how it
    counts tokens. ``max_short_edge``: OpenAI's second step (the short side down to 768)."""

    name: str
    max_long_edge: int
    max_pixels: int | None
    max_bytes: int
    max_short_edge: int | None = None
    tokens: TokenRule = "openai"
    fixed_tokens: int = 0

    def fit(self, width: int, height: int) -> tuple[int, int]:
        """The size an image of ``width`` x ``height`` is sent at: scaled down (never up),
        keeping its aspect, to fit every limit."""
        if width <= 0 or height <= 0:
            return max(width, 0), max(height, 0)
        scale = min(1.0, self.max_long_edge / max(width, height))
        if self.max_short_edge is not None:
            scale = min(scale, self.max_short_edge / min(width, height))
        if self.max_pixels is not None:
            scale = min(scale, math.sqrt(self.max_pixels / (width * height)))
        if scale >= 1.0:
            return width, height
        return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


OPENAI = ImageProfile("openai", 2048, None, 20 * MB, max_short_edge=768, tokens="openai")
OPENAI_COMPATIBLE = ImageProfile(
    "openai-compatible", 2048, None, 20 * MB, max_short_edge=768, tokens="openai"
)
ANTHROPIC = ImageProfile("anthropic", 1568, 1_150_000, 3_750_000, tokens="anthropic")
GEMINI = ImageProfile("gemini", 3072, None, 7 * MB, tokens="gemini")
LOCAL = ImageProfile("local", 1024, None, 20 * MB, tokens="fixed", fixed_tokens=576)
PROFILES = {p.name: p for p in (OPENAI, OPENAI_COMPATIBLE, ANTHROPIC, GEMINI, LOCAL)}


def profile_for(agent_kind: str) -> ImageProfile:
    """The profile of an agent's provider kind; a kind without its own (a new wire, a test
    kind) gets OpenAI-compatible's."""
    return PROFILES.get(agent_kind, OPENAI_COMPATIBLE)


def estimate_image_tokens(width: int, height: int, profile: ImageProfile) -> int:
    """About how many tokens an image of ``width`` x ``height`` (as attached) costs once
    sized by ``profile``, by the provider's published formula."""
    if width <= 0 or height <= 0:
        return 0
    w, h = profile.fit(width, height)
    if profile.tokens == "openai":
        return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)
    if profile.tokens == "anthropic":
        return math.ceil(w * h / 750)
    if profile.tokens == "gemini":
        if w <= 384 and h <= 384:
            return 258
        return 258 * math.ceil(w / 768) * math.ceil(h / 768)
    return profile.fixed_tokens


def inspect_image(path: Path, *, name: str | None = None) -> tuple[int, int, str]:
    """(width, height, mime) of the image at ``path``, as shown (EXIF orientation applied),
    after decoding it once: a truncated or damaged file is an ``AttachError`` now, on its
    chip, not a failure while sending."""
    from PIL import Image

    _quiet_pillow()
    shown = name or path.name
    with _read_errors(shown, gone=f"“{shown}” was moved or deleted before it could be read."):
        with Image.open(path) as im:
            fmt = im.format or ""
            _check_pixels(shown, im.size)
            im.verify()
        with Image.open(path) as im:
            width, height = _oriented(im, *im.size)
            if fmt in ("JPEG", "MPO"):  # still reads every byte; decodes at 1/8 the size
                im.draft(im.mode, (max(1, im.width // 8), max(1, im.height // 8)))
            im.load()
    mime = MIME_OF_FORMAT.get(fmt)
    if mime is None:
        raise AttachError(
            f"“{shown}” is an image in a format SIMI Multi cannot send ({fmt or 'unknown'}): "
            "save it as PNG or JPEG."
        )
    return width, height, mime


def oriented_size(path: Path) -> tuple[int, int]:
    """(width, height) as shown, from the header alone (no decoding): for estimates of an
    image inspected before. (0, 0) when the file cannot say."""
    from PIL import Image

    _quiet_pillow()
    try:
        with Image.open(path) as im:
            return _oriented(im, *im.size)
    except Exception:
        return 0, 0


def prepare_image(
    path: Path | BinaryIO, profile: ImageProfile, *, name: str | None = None
) -> ImagePart:
    """The image at ``path`` ready for ``profile``'s provider: upright (EXIF orientation
    applied), in sRGB, without metadata (EXIF, GPS, ICC, text chunks: nothing is copied),
    scaled down with Lanczos to the profile's limits (never up), PNG when it has
    transparency or few colours, else JPEG at quality 85, and at most ``max_bytes``.
    An animated GIF or WebP sends its first frame."""
    from PIL import Image, ImageOps

    _quiet_pillow()
    shown = name or getattr(path, "name", "") or "image"
    gone = f"“{shown}” is no longer in SIMI Multi's attachments folder."
    with _read_errors(shown, gone=gone), Image.open(path) as src:
        _check_pixels(shown, src.size)
        if src.format in ("JPEG", "MPO"):  # decode at the smallest scale still >= target
            src.draft(src.mode, profile.fit(*src.size))
        src.load()
        icc = src.info.get("icc_profile")
        im = ImageOps.exif_transpose(src)
    im = _to_srgb(im, icc)
    im, alpha = _plain_mode(im)
    target = profile.fit(*im.size)
    if target != im.size:
        im = im.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
    png = alpha or im.getcolors(GRAPHICS_COLOURS) is not None
    data, im = _encode_within(im, png, profile.max_bytes, shown)
    mime = "image/png" if png else "image/jpeg"
    return ImagePart(mime, data, name=shown, width=im.width, height=im.height)


def prepare_image_bytes(data: bytes, profile: ImageProfile, *, name: str) -> ImagePart:
    """``prepare_image`` for an image that arrived as bytes (an API client's data URL): the
    same checks, orientation, stripping and sizing as an attached file's."""
    return prepare_image(io.BytesIO(data), profile, name=name)


# internals -------------------------------------------------------------------------------------


@contextmanager
def _read_errors(shown: str, *, gone: str) -> Iterator[None]:
    """Pillow's failures to read the image ``shown`` as ``AttachError``s in words; ``gone``:
    what to say when the file is not there."""
    from PIL import Image

    try:
        yield
    except AttachError:
        raise
    except FileNotFoundError as exc:
        raise AttachError(gone) from exc
    except Image.DecompressionBombError as exc:
        raise _too_many_pixels(shown, None) from exc
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError... for bad data
        raise _unreadable(shown, exc) from exc


def _oriented(im: Image.Image, width: int, height: int) -> tuple[int, int]:
    try:
        orientation = im.getexif().get(_ORIENTATION, 1)
    except Exception:
        orientation = 1
    return (height, width) if orientation in _SWAPPED else (width, height)


def _check_pixels(name: str, size: tuple[int, int]) -> None:
    if size[0] * size[1] > MAX_PIXELS:
        raise _too_many_pixels(name, size)


def _too_many_pixels(name: str, size: tuple[int, int] | None) -> AttachError:
    dims = f" is {size[0]:,} x {size[1]:,} pixels:" if size else " has too many pixels:"
    return AttachError(
        f"“{name}”{dims} SIMI Multi reads images of up to {MAX_PIXELS // 1_000_000} "
        "megapixels. Scale it down and attach the smaller copy."
    )


def _unreadable(name: str, exc: BaseException) -> AttachError:
    return AttachError(
        f"“{name}” could not be read as an image ({short_reason(exc)}). The file may be "
        "damaged or incomplete: open it in an image viewer and save it again."
    )


def _to_srgb(im: Image.Image, icc: bytes | None) -> Image.Image:
    """Convert a picture with a colour profile (a phone's Display P3, a printer's CMYK) to
    sRGB: the profile is stripped with the rest, and without it the colours would shift."""
    from PIL import ImageCms

    if not icc or im.mode not in ("RGB", "RGBA", "CMYK"):
        return im
    try:
        source = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        srgb = ImageCms.createProfile("sRGB")
        mode = "RGBA" if im.mode == "RGBA" else "RGB"
        converted = ImageCms.profileToProfile(im, source, srgb, outputMode=mode)
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return im  # an unusable profile: the colours as they are
    return converted if converted is not None else im


def _plain_mode(im: Image.Image) -> tuple[Image.Image, bool]:
    """``im`` as L, RGB or RGBA (RGBA only when some pixel is see-through)."""
    if im.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):  # 16-bit grey: scale, not clip
        im = im.convert("I").point(lambda v: v / 256).convert("L")
    elif im.mode == "F":
        im = im.convert("L")
    keyed = "transparency" in im.info and im.mode in ("P", "L", "RGB")  # a colour key (tRNS)
    if keyed or im.mode in ("LA", "La", "PA", "RGBa"):
        im = im.convert("RGBA")
    elif im.mode not in ("L", "RGB", "RGBA"):  # P, 1, CMYK, YCbCr, LAB, HSV
        im = im.convert("RGB")
    if im.mode == "RGBA":
        if im.getchannel("A").getextrema()[0] == 255:
            return im.convert("RGB"), False
        return im, True
    return im, False


def _encode(im: Image.Image, png: bool, quality: int) -> bytes:
    out = io.BytesIO()
    im.info = {}  # nothing of the source's (EXIF, ICC, comments, text chunks) is written
    if png:
        im.save(out, "PNG")
    else:
        im.save(out, "JPEG", quality=quality)
    return out.getvalue()


def _encode_within(
    im: Image.Image, png: bool, max_bytes: int, name: str
) -> tuple[bytes, Image.Image]:
    """Encode, stepping JPEG quality down (to 55), then the size (by 0.8 each time), until the
    file fits ``max_bytes``."""
    from PIL import Image

    quality = JPEG_QUALITY
    for _ in range(24):
        data = _encode(im, png, quality)
        if len(data) <= max_bytes:
            return data, im
        if not png and quality > 55:
            quality -= 10
            continue
        smaller = (max(1, int(im.width * 0.8)), max(1, int(im.height * 0.8)))
        im = im.resize(smaller, Image.Resampling.LANCZOS)
    raise AttachError(f"“{name}” could not be made small enough for this provider.")
