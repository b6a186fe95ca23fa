# Packaging targets (not part of ./scripts/test: they take minutes; smoke-test needs root).
#   make bundle              PyInstaller one-folder bundle in dist/simi-multi/ (+ smoke test)
#   make bundle PORTABLE=1   the same with a portable llama.cpp (no -march=native)
#   make bundle VULKAN=1     with the Vulkan build beside the CPU one (llama_cpp/lib-vulkan)
#   make deb                 dist/simi-multi_<version>_<arch>.deb: builds the bundle first,
#                            with VULKAN=1 (the package carries both builds)
#                            (packaging/linux/build-deb alone repackages an existing bundle)
#   make smoke-test          install the .deb into a fresh Debian 12 root and use it (root)
#   make clean-dist          remove dist/ and build/pyinstaller
.PHONY: bundle deb smoke-test clean-dist

PORTABLE ?= 0
VULKAN ?= 0

bundle:
	PORTABLE=$(PORTABLE) VULKAN=$(VULKAN) packaging/build-bundle.sh

# The package is made from the bundle, so one command builds both (a fresh bundle every time:
# a package never ships a bundle older than the checkout).
deb: VULKAN = 1
deb: bundle
	packaging/linux/build-deb

smoke-test:
	packaging/linux/smoke-test

clean-dist:
	rm -rf dist build/pyinstaller build/pyinstaller-portable
