# Packaging targets (not part of ./scripts/test: they take minutes; smoke-test needs root).
#   make bundle              PyInstaller one-folder bundle in dist/simi-multi/ (+ smoke test)
#   make bundle PORTABLE=1   the same with a portable llama.cpp (no -march=native)
#   make deb                 dist/simi-multi_<version>_<arch>.deb from the bundle
#   make smoke-test          install the .deb into a fresh Debian 12 root and use it (root)
#   make clean-dist          remove dist/ and build/pyinstaller
.PHONY: bundle deb smoke-test clean-dist

PORTABLE ?= 0

bundle:
	PORTABLE=$(PORTABLE) packaging/build-bundle.sh

deb:
	packaging/linux/build-deb

smoke-test:
	packaging/linux/smoke-test

clean-dist:
	rm -rf dist build/pyinstaller build/pyinstaller-portable
