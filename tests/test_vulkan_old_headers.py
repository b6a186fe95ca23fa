"""scripts/vulkan-old-headers.py: ggml-vulkan compiles with Debian 12's Vulkan headers.

``SHAPED_LIKE_LLAMA_CPP`` has the shape of ggml-vulkan.cpp's instance creation (0.3.36) with
the lines around it; the real file builds with the patch in scripts/test-gpu-path and
``make deb`` (about 11 minutes, so not here).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "vulkan-old-headers.py"

SHAPED_LIKE_LLAMA_CPP = """static void ggml_vk_instance_init() {
    std::vector<const char*> extensions;
    if (layer_settings) {
        extensions.push_back("VK_EXT_layer_settings");
    }
    VkBool32 enable_best_practice = layer_settings;
    std::vector<vk::LayerSettingEXT> settings = {
        {
            "VK_LAYER_KHRONOS_validation",
            "validate_best_practices",
            vk::LayerSettingTypeEXT::eBool32,
            1,
            &enable_best_practice
        },
    };
    vk::LayerSettingsCreateInfoEXT layer_setting_info(settings);
    vk::InstanceCreateInfo instance_create_info(CREATE_ARGS, &layer_setting_info);
#ifdef __APPLE__
    instance_create_info.flags |= vk::InstanceCreateFlagBits::eEnumeratePortabilityKHR;
#endif
    vk_instance.instance = vk::createInstance(instance_create_info);
}
""".replace("CREATE_ARGS", "vk::InstanceCreateFlags{}, &app_info, layers, extensions")


def _module():
    spec = importlib.util.spec_from_file_location("vulkan_old_headers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_layer_settings_block_is_guarded_and_has_a_plain_fallback() -> None:
    new, what = _module().patch_text(SHAPED_LIKE_LLAMA_CPP)
    assert what == "patched"
    lines = new.splitlines()
    start = lines.index(
        "#ifdef VK_EXT_layer_settings /* simi-multi: VK_EXT_layer_settings guard */"
    )
    other = lines.index("#else")
    end = lines.index("#endif", other)
    assert lines[start + 1].strip().startswith("std::vector<vk::LayerSettingEXT> settings")
    assert "&layer_setting_info" in lines[other - 1]
    assert lines[other + 2] == (
        "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, "
        "&app_info, layers, extensions);"
    )
    assert end == other + 3
    # everything else is untouched, and with new headers the original lines are what compiles
    kept = lines[:start] + lines[start + 1 : other] + lines[end + 1 :]
    assert kept == SHAPED_LIKE_LLAMA_CPP.splitlines()


def test_a_second_run_changes_nothing_and_other_shapes_are_refused(tmp_path: Path) -> None:
    module = _module()
    once, _ = module.patch_text(SHAPED_LIKE_LLAMA_CPP)
    assert module.patch_text(once) == (once, "already")
    assert module.patch_text("int main() {}\n")[1] == "absent"  # a llama.cpp without it
    changed = SHAPED_LIKE_LLAMA_CPP.replace("layer_setting_info(settings)", "info{settings}")
    assert module.patch_text(changed)[1] == "unknown"
    # the command: exit 1 with a clear line for an unknown shape, so the build stops early
    src = tmp_path / "llama_cpp_python-9.9.9" / "ggml" / "src" / "ggml-vulkan"
    src.mkdir(parents=True)
    (src / "ggml-vulkan.cpp").write_text(changed)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "needs Vulkan headers 1.3.272 or newer" in done.stderr
    (src / "ggml-vulkan.cpp").write_text(SHAPED_LIKE_LLAMA_CPP)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ggml-vulkan.cpp: patched")
    assert "#ifdef VK_EXT_layer_settings" in (src / "ggml-vulkan.cpp").read_text()
