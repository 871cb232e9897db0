#!/usr/bin/env bash
# Peer benchmark: llama.cpp's own llama-bench on the default model, so `kvscope bench`
# numbers can be compared with a well-tuned engine on the same machine.
#
# Builds llama.cpp (the copy vendored in the llama-cpp-python source package, so the
# Python reference in make_llama_reference.py and this benchmark use the same code)
# when the build is missing, then runs
#     llama-bench -m <model> -t 2 -p 512 -n 128 -r 5 -o json
# and prints the JSON followed by a one-line summary per test (mean ± sd tokens/s).
#
# Usage: tests/tools/bench_llamacpp.sh [--build-only] [model.gguf]
# Environment (all optional):
#   LLAMA_CPP_PYTHON_VERSION  source package version      (default 0.3.36)
#   LLAMACPP_SRC              where the source is unpacked (default /tmp/llamacpp-src)
#   LLAMACPP_BUILD            CMake build directory        (default /tmp/llamacpp-build)
#   BENCH_THREADS             llama-bench -t               (default 2)
#   BENCH_JOBS                parallel compile jobs        (default 2)
#   LLAMACPP_EXTRA_TARGETS    more targets to build, e.g. llama-server (bench_serve_llamacpp.sh)
# Nothing is written inside the KV Scope source tree.
set -euo pipefail

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
src_root="${LLAMACPP_SRC:-/tmp/llamacpp-src}"
build_dir="${LLAMACPP_BUILD:-/tmp/llamacpp-build}"
threads="${BENCH_THREADS:-2}"
jobs="${BENCH_JOBS:-2}"
build_only=0
if [[ "${1:-}" == "--build-only" ]]; then
    build_only=1
    shift
fi
model="${1:-$HOME/.local/share/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf}"

llama_src="$src_root/llama_cpp_python-$version/vendor/llama.cpp"

fetch_source() {
    if [[ -f "$llama_src/CMakeLists.txt" ]]; then
        return
    fi
    mkdir -p "$src_root"
    local sdist="$src_root/llama_cpp_python-$version.tar.gz"
    if [[ ! -f "$sdist" ]]; then
        echo "== downloading llama-cpp-python $version source package" >&2
        python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$src_root" >&2
    fi
    tar -xzf "$sdist" -C "$src_root"
}

extra_targets=(${LLAMACPP_EXTRA_TARGETS:-})

build_llamacpp() {
    local missing=0 t
    for t in llama-bench "${extra_targets[@]}"; do
        [[ -x "$build_dir/bin/$t" ]] || missing=1
    done
    if [[ $missing -eq 0 && -f "$build_dir/bin/libllama.so" ]]; then
        return
    fi
    fetch_source
    echo "== building llama.cpp from $llama_src into $build_dir (-j$jobs)" >&2
    # Shared libraries with an $ORIGIN rpath: the Python binding can load libllama.so
    # from this directory (LLAMA_CPP_LIB_PATH) or from a copy next to its package.
    cmake -S "$llama_src" -B "$build_dir" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=ON \
        -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
        -DCMAKE_INSTALL_RPATH='$ORIGIN' \
        -DGGML_NATIVE=ON \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_COMMON=ON >&2
    nice -n 10 cmake --build "$build_dir" --target llama llama-bench "${extra_targets[@]}" -j"$jobs" >&2
}

build_llamacpp
if [[ $build_only -eq 1 ]]; then
    echo "llama-bench: $build_dir/bin/llama-bench"
    exit 0
fi
if [[ ! -f "$model" ]]; then
    echo "bench_llamacpp.sh: model file '$model' not found (install the default model or pass a path)" >&2
    exit 1
fi

# llama.cpp's worker threads spin-wait: other busy processes on the same cores make the
# numbers (tg above all) collapse and scatter, so say how busy the machine was.
echo "== load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2
out_json="$(mktemp /tmp/llama-bench.XXXXXX.json)"
trap 'rm -f "$out_json"' EXIT
"$build_dir/bin/llama-bench" -m "$model" -t "$threads" -p 512 -n 128 -r 5 -o json >"$out_json"
cat "$out_json"
python3 - "$out_json" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
for r in rows:
    test = f"pp{r['n_prompt']}" if r.get("n_gen", 0) == 0 else f"tg{r['n_gen']}"
    print(f"llama.cpp {r.get('build_commit', '?')} (build {r.get('build_number', '?')}) "
          f"{r.get('model_type', '?')} t={r.get('n_threads', '?')} {test}: "
          f"{r['avg_ts']:.2f} ± {r['stddev_ts']:.2f} tokens/s")
EOF
