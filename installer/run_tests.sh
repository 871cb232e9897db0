#!/usr/bin/env bash
# Builds everything the tests need and runs the whole CTest suite (headless).
# Model tests use the installed default model (installer/setup.sh fetches it).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${KVSCOPE_BUILD_DIR:-$here/build}
cmake -S "$here" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir"
export QT_QPA_PLATFORM=offscreen
ctest --test-dir "$build_dir" --output-on-failure -j2 "$@"
