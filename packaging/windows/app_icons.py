"""Render resources/icons/simi.svg into the icon files Windows and macOS builds need.

    python packaging/windows/app_icons.py --ico build/icons/simi-multi.ico
    python packaging/windows/app_icons.py --iconset build/icons/simi-multi.iconset
    (then, on macOS: iconutil -c icns build/icons/simi-multi.iconset)

Qt's own SVG renderer (the app's PySide6, so no ImageMagick or Pillow). The .ico holds
PNG-compressed images at 16..256 px (Windows Vista and later read those); the .iconset is the
folder of PNGs that Apple's iconutil turns into an .icns.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SVG = ROOT / "resources" / "icons" / "simi.svg"
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# iconutil's names: icon_<n>x<n>.png and icon_<n>x<n>@2x.png (twice the pixels).
ICONSET = {
    "icon_16x16.png": 16,
    "icon_16x16@2x.png": 32,
    "icon_32x32.png": 32,
    "icon_32x32@2x.png": 64,
    "icon_128x128.png": 128,
    "icon_128x128@2x.png": 256,
    "icon_256x256.png": 256,
    "icon_256x256@2x.png": 512,
    "icon_512x512.png": 512,
    "icon_512x512@2x.png": 1024,
}


def render_png(size: int) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    if QGuiApplication.instance() is None:
        render_png.app = QGuiApplication([])  # type: ignore[attr-defined]  # kept alive
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise SystemExit(f"cannot read {SVG}")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise SystemExit(f"cannot encode a {size} px PNG")
    buffer.close()
    return bytes(data.data())


def ico_bytes(images: list[tuple[int, bytes]]) -> bytes:
    """An ICO file of PNG entries: ICONDIR, one ICONDIRENTRY per image, then the PNGs."""
    header = struct.pack("<HHH", 0, 1, len(images))
    offset = len(header) + 16 * len(images)
    entries, blobs = b"", b""
    for size, png in images:
        side = 0 if size >= 256 else size  # 0 means 256 in an ICONDIRENTRY
        entries += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(png), offset)
        blobs += png
        offset += len(png)
    return header + entries + blobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ico", type=Path, help="write a Windows .ico here")
    parser.add_argument("--iconset", type=Path, help="write a macOS .iconset folder here")
    args = parser.parse_args(argv)
    if not args.ico and not args.iconset:
        parser.error("say --ico PATH and/or --iconset DIR")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    if args.ico:
        args.ico.parent.mkdir(parents=True, exist_ok=True)
        args.ico.write_bytes(ico_bytes([(size, render_png(size)) for size in ICO_SIZES]))
        print(args.ico, args.ico.stat().st_size, "bytes")
    if args.iconset:
        args.iconset.mkdir(parents=True, exist_ok=True)
        for name, size in ICONSET.items():
            (args.iconset / name).write_bytes(render_png(size))
        print(args.iconset, len(ICONSET), "PNGs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
