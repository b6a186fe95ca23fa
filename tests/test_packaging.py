"""``make deb`` on a clean checkout builds the bundle it packages first (a dry run of the real
Makefile: nothing is built)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_deb_builds_the_bundle_before_the_package() -> None:
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(ROOT), "deb"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    lines = dry.stdout.splitlines()
    bundle = [i for i, line in enumerate(lines) if "packaging/build-bundle.sh" in line]
    deb = [i for i, line in enumerate(lines) if "packaging/linux/build-deb" in line]
    assert bundle and deb, dry.stdout
    assert bundle[0] < deb[0], dry.stdout
