#!/usr/bin/env python3
"""Let llama.cpp's Vulkan backend compile against Vulkan headers older than 1.3.272.

Usage: vulkan-old-headers.py SOURCE_DIR   (an unpacked llama-cpp-python sdist, or llama.cpp)

ggml-vulkan.cpp creates its Vulkan instance with a ``vk::LayerSettingsCreateInfoEXT`` (the
``VK_EXT_layer_settings`` extension, first in the 1.3.272 headers) so that a debug build can
turn on the validation layer's best-practice checks. Debian 12 ships 1.3.239, where the type
does not exist and the compile stops. This wraps that block in ``#ifdef VK_EXT_layer_settings``
and, without the extension, creates the instance without layer settings. Only a build with
``GGML_VULKAN_VALIDATE`` ever asks for the layer, so a release build behaves the same either
way, and with new headers the guarded block compiles exactly as before.

Idempotent (a second run changes nothing). Exit status: 0 patched or already patched or the
block is not there (a llama.cpp without it needs nothing); 1 when the block is there in a shape
this script does not know (the build would fail; better to say so now).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MARK = "/* simi-multi: VK_EXT_layer_settings guard */"

# From "std::vector<vk::LayerSettingEXT> settings = {" through the InstanceCreateInfo that
# takes &layer_setting_info, indentation kept.
_BLOCK = re.compile(
    r"(?P<indent>[ \t]*)std::vector<vk::LayerSettingEXT> (?P<settings>\w+) = \{.*?\n"
    r"(?P=indent)vk::LayerSettingsCreateInfoEXT (?P<info>\w+)\((?P=settings)\);\n"
    r"(?P=indent)vk::InstanceCreateInfo (?P<create>\w+)\((?P<args>[^;]*?), &(?P=info)\);\n",
    re.S,
)


def patch_text(text: str) -> tuple[str, str]:
    """(new text, what happened): "patched", "already", "absent" or "unknown"."""
    if MARK in text:
        return text, "already"
    if "LayerSettingsCreateInfoEXT" not in text:
        return text, "absent"
    m = _BLOCK.search(text)
    if m is None:
        return text, "unknown"
    indent = m.group("indent")
    guarded = (
        f"#ifdef VK_EXT_layer_settings {MARK}\n"
        f"{m.group(0)}"
        "#else\n"
        f"{indent}(void) enable_best_practice;\n"
        f"{indent}vk::InstanceCreateInfo {m.group('create')}({m.group('args')});\n"
        "#endif\n"
    )
    return text[: m.start()] + guarded + text[m.end() :], "patched"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = Path(argv[1])
    sources = sorted(root.rglob("ggml-vulkan.cpp"))
    if not sources:
        print(f"vulkan-old-headers: no ggml-vulkan.cpp under {root}: nothing to do")
        return 0
    status = 0
    for source in sources:
        new, what = patch_text(source.read_text(encoding="utf-8"))
        if what == "patched":
            source.write_text(new, encoding="utf-8")
        if what == "unknown":
            status = 1
            print(
                f"vulkan-old-headers: {source} creates its instance with layer settings in a "
                "shape this script does not know; the build needs Vulkan headers 1.3.272 or "
                "newer (or a new version of this script)",
                file=sys.stderr,
            )
        else:
            print(f"vulkan-old-headers: {source.name}: {what}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
