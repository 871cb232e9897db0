#!/usr/bin/env bash
# The README's test command: builds what the tests need and runs them with CTest (headless).
# Model tests use the installed default model (installer/setup.sh fetches it).
#
#   installer/run_tests.sh [ctest args...]
#       Release tree ($KVSCOPE_BUILD_DIR, default build/): builds everything, runs the whole suite.
#   installer/run_tests.sh --sanitize address [ctest args...]
#       ASan + UBSan tree (build-asan/, -O1 -g1, asserts on, no CUDA): builds only the tests
#       labelled unit, kernels, engine or model (not bench, not ui, not program: the tests that
#       start the kvscope program, whose GUI would have to be built with ASan too; they run in
#       the Release tree) and what they need, runs them.
#   installer/run_tests.sh --sanitize thread [ctest args...]
#       TSan tree (build-tsan/): the engine-loop tests (tst_engine: EngineLoop; tst_telemetry:
#       the snapshot ring under concurrent readers), the main window (tst_main_window), the
#       local server (tst_server, tst_server_openai, tst_server_fuzz: HTTP workers, engine
#       callbacks, cancels) and parallel choices (tst_parallel_choices).
#       Qt is not built with TSan: tests/tsan.supp silences reports from inside Qt only.
#   installer/run_tests.sh --show-werror
#       prints this script's KVSCOPE_WERROR (.ci/run hands it to setup.sh's first configure).
#
# Warnings are errors (cmake -DKVSCOPE_WERROR=ON) in the Release tree when KVSCOPE_WERROR is ON.
# The default on the next line is the ONE switch, for CI (.ci/run runs this script) and for a
# developer running it alike; a single run may override it: KVSCOPE_WERROR=OFF installer/run_tests.sh.
# Sanitizer trees never use -Werror: at -O1, GCC's flow-based warnings (-Wmaybe-uninitialized,
# -Wstringop-*) differ from the Release build's, so their verdict would not be CI's.
set -euo pipefail
: "${KVSCOPE_WERROR:=ON}"   # <- the switch (ON: the tree builds without warnings; OFF for a one-off local run)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

sanitize=""
case "${1:-}" in
    --show-werror) echo "$KVSCOPE_WERROR"; exit 0 ;;
    --sanitize)
        sanitize=${2:?"--sanitize wants address or thread"}
        shift 2 ;;
esac
export QT_QPA_PLATFORM=offscreen

if [ -z "$sanitize" ]; then
    build_dir=${KVSCOPE_BUILD_DIR:-$here/build}
    cmake -S "$here" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSCOPE_WERROR="$KVSCOPE_WERROR" >/dev/null
    cmake --build "$build_dir"
    ctest --test-dir "$build_dir" --output-on-failure -j2 "$@"
    exit 0
fi

case "$sanitize" in
    address) build_dir=$here/build-asan
             select=(-L '^(unit|kernels|engine|model)$' -LE '^(bench|ui|program)$') ;;
    thread)  build_dir=$here/build-tsan; select=(-R '^(tst_engine|tst_telemetry|tst_main_window|tst_server|tst_server_openai|tst_server_fuzz|tst_parallel_choices)$') ;;
    *) echo "run_tests.sh: --sanitize wants address or thread, got '$sanitize'" >&2; exit 2 ;;
esac
build_dir=${KVSCOPE_SANITIZE_BUILD_DIR:-$build_dir}
cmake -S "$here" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DKVSCOPE_SANITIZE="$sanitize" \
      -DKVSCOPE_WERROR=OFF >/dev/null
# The tests are registered at configure time: build only the executables of the selected ones.
mapfile -t tests < <(ctest --test-dir "$build_dir" -N "${select[@]}" | sed -n 's/^ *Test *#[0-9]*: *//p')
if [ ${#tests[@]} -eq 0 ]; then
    echo "run_tests.sh: no tests selected in $build_dir" >&2
    exit 1
fi
echo "== $sanitize: building ${#tests[@]} tests: ${tests[*]}"
cmake --build "$build_dir" --target "${tests[@]}"
# Sanitizer run-time options (ASAN_OPTIONS, TSAN_OPTIONS...) are set per test by tests/CMakeLists.txt.
ctest --test-dir "$build_dir" --output-on-failure -j2 "${select[@]}" "$@"
