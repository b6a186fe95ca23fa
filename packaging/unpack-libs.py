#!/usr/bin/env python3
"""Unpack a llama-cpp-python wheel's libraries into a folder of their own.

Usage: unpack-libs.py WHEEL OUT_DIR

The bundle's second llama.cpp build (llama_cpp/lib-vulkan, packaging/build-bundle.sh). The
wheel holds each library three times (libX.so, libX.so.0, libX.so.0.N.M: copies, not links);
OUT_DIR gets one file each, with its soname as a symbolic link to it.
"""

import os
import re
import subprocess
import sys
import zipfile


def main(wheel: str, out: str) -> None:
    os.makedirs(out)
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            base = os.path.basename(name)
            if name.startswith("llama_cpp/lib/") and re.fullmatch(r"lib[\w-]+\.so", base):
                with open(os.path.join(out, base), "wb") as f:
                    f.write(z.read(name))
    for base in sorted(os.listdir(out)):
        dump = subprocess.run(
            ["objdump", "-p", os.path.join(out, base)], capture_output=True, text=True, check=True
        ).stdout
        soname = re.search(r"SONAME\s+(\S+)", dump)
        if soname and soname.group(1) != base:
            os.symlink(base, os.path.join(out, soname.group(1)))
    print(f"{out}: {', '.join(sorted(os.listdir(out)))}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
