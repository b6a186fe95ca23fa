"""``make deb`` on a clean checkout builds the bundle it packages first (a dry run of the real
Makefile: nothing is built)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def make_dry_run(target: str) -> str:
    """The commands ``make TARGET`` would run in the repository (``make -n``), one a line."""
    return subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(ROOT), target],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_deb_builds_the_bundle_before_the_package() -> None:
    dry = make_dry_run("deb")
    lines = dry.splitlines()
    bundle = [i for i, line in enumerate(lines) if "packaging/build-bundle.sh" in line]
    deb = [i for i, line in enumerate(lines) if "packaging/linux/build-deb" in line]
    assert bundle and deb, dry
    assert bundle[0] < deb[0], dry
    # the package carries the Vulkan build beside the CPU one; a plain bundle does not
    assert "VULKAN=1" in lines[bundle[0]], lines[bundle[0]]
    assert "VULKAN=0" in make_dry_run("bundle")


def test_the_vulkan_libraries_are_unpacked_one_file_each_with_soname_links(tmp_path: Path) -> None:
    """packaging/unpack-libs.py on a wheel shaped like llama-cpp-python's (three copies of each
    library): lib-vulkan gets one file each and its soname as a link, nothing else."""
    import sys
    import zipfile

    lib = tmp_path / "lib"
    lib.mkdir()
    # a real shared library with a soname, standing in for libggml-vulkan.so
    source = tmp_path / "x.c"
    source.write_text("int ggml_x(void) { return 1; }\n")
    if shutil.which("cc") is None or shutil.which("objdump") is None:
        pytest.skip("needs a C compiler and objdump (build-essential, binutils)")
    built = lib / "libggml-vulkan.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-Wl,-soname,libggml-vulkan.so.0", "-o", built, source],
        check=True,
    )
    wheel = tmp_path / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name in ("libggml-vulkan.so", "libggml-vulkan.so.0", "libggml-vulkan.so.0.9.4"):
            z.write(built, f"llama_cpp/lib/{name}")
        z.writestr("llama_cpp/llama.py", "# python code: not a library")
    out = tmp_path / "lib-vulkan"
    subprocess.run([sys.executable, ROOT / "packaging" / "unpack-libs.py", wheel, out], check=True)
    assert sorted(p.name for p in out.iterdir()) == ["libggml-vulkan.so", "libggml-vulkan.so.0"]
    assert (out / "libggml-vulkan.so.0").readlink() == Path("libggml-vulkan.so")
    assert not (out / "libggml-vulkan.so").is_symlink()
