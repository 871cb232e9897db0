#!/usr/bin/env bash
# Developer check: does the CUDA backend library (kernels/cuda, target kvscope_cuda) compile
# with Debian 12's CUDA 11.8 (nvidia-cuda-toolkit 11.8.89, non-free) and its host compiler
# g++-11? Not part of CI or CTest: CI must not depend on non-free packages.
#
# Nothing is installed system-wide (the toolkit's packages would pull in libcuda1, the driver
# library). The script
#   1. downloads the few .deb files nvcc needs with `apt-get download` (no root needed) and
#      unpacks them with `dpkg -x` into CACHE/root;
#   2. lays out CACHE/toolkit the way NVIDIA's installer does (bin/, include/, lib64/,
#      nvvm/libdevice) with symbolic links into CACHE/root, a copy of nvcc and its own
#      nvcc.profile (Debian's points at /etc/nvcc.profile and /usr/lib/nvidia-cuda-toolkit),
#      so CMake's CUDA detection and FindCUDAToolkit take it as an ordinary toolkit;
#   3. configures BUILD with that nvcc, -ccbin g++-11, KVSCOPE_CUDA=ON and KVSCOPE_WERROR=ON,
#      builds only kvscope_cuda, and checks the library: sm_80 and sm_90 code, libcublas.so.11,
#      kvscope_create_cuda_backend exported.
# It exits non-zero on any compile or link error and on a failed check. Nothing can run
# without a GPU: this checks the build only.
#
# Usage: tests/tools/check_cuda118.sh [CACHE_DIR] [BUILD_DIR]
#   CACHE_DIR  .deb files, unpacked packages, toolkit layout (default ~/.cache/kvscope/cuda118;
#              about 1.1 GB of downloads, 3 GB unpacked; kept between runs)
#   BUILD_DIR  CMake build directory (default CACHE_DIR/build)
# Environment (all optional):
#   CUDA118_HOST_CXX         host compiler for nvcc (default g++-11: `sudo apt-get install g++-11`)
#   CUDA118_APT_SOURCEPARTS  a sources.list.d-style folder whose lists apt already has (e.g. a
#                            bookworm non-free .sources file after `apt-get update` with it);
#                            without it the system's apt sources are used when they offer
#                            nvidia-cuda-toolkit 11.8, else the script keeps its own apt state
#                            (Debian bookworm non-free) under CACHE_DIR/apt and updates it
#   CUDA118_JOBS             parallel compile jobs (default 2)
#   CUDA118_DECODERS_TEST=1  also build and run tests/tst_cuda_decoders (the device decoders
#                            run on the host with CUDA 11.8's cuda_fp16.h / cuda_bf16.h; no GPU)
set -euo pipefail

cache="${1:-$HOME/.cache/kvscope/cuda118}"
build="${2:-$cache/build}"
host_cxx="${CUDA118_HOST_CXX:-g++-11}"
jobs="${CUDA118_JOBS:-2}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"

# What nvcc and the link of kvscope_cuda need: the compiler (nvcc, cicc, ptxas, fatbinary,
# libdevice), the headers and static CUDA runtime, and the cuBLAS / cuBLASLt shared objects
# that nvidia-cuda-dev's libcublas*.so links point at (libcudart11.0 likewise for libcudart.so).
packages=(nvidia-cuda-toolkit nvidia-cuda-dev libcudart11.0 libcublas11 libcublaslt11)
want_version="11.8."

die() {
    echo "check_cuda118: $*" >&2
    exit 1
}
for tool in apt-get apt-cache dpkg cmake ninja objdump nm; do
    command -v "$tool" >/dev/null || die "'$tool' not found (Debian: apt-get install apt dpkg cmake ninja-build binutils)"
done
command -v "$host_cxx" >/dev/null ||
    die "host compiler '$host_cxx' not found: nvcc 11.8 needs g++ <= 11 (Debian 12: sudo apt-get install g++-11)"

# 1. apt configuration that knows the non-free CUDA 11.8 packages.
apt_opts=()
candidate() {  # prints the candidate version of nvidia-cuda-toolkit under "${apt_opts[@]}"
    apt-cache "${apt_opts[@]}" policy nvidia-cuda-toolkit 2>/dev/null | awk '/Candidate:/ {print $2}'
}
if [[ -n "${CUDA118_APT_SOURCEPARTS:-}" ]]; then
    apt_opts=(-o Dir::Etc::sourcelist=/dev/null -o "Dir::Etc::sourceparts=$CUDA118_APT_SOURCEPARTS")
elif [[ "$(candidate)" != "$want_version"* ]]; then
    apt_dir="$cache/apt"
    mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    cat >"$apt_dir/sources.list.d/debian-non-free.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt_opts=(-o Dir::Etc::sourcelist=/dev/null -o "Dir::Etc::sourceparts=$apt_dir/sources.list.d"
        -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o Debug::NoLocking=1)
    if [[ "$(candidate)" != "$want_version"* ]]; then
        echo "== apt-get update (bookworm non-free, state in $apt_dir)"
        apt-get "${apt_opts[@]}" update || die "apt-get update of Debian bookworm non-free failed"
    fi
fi
version="$(candidate)"
[[ "$version" == "$want_version"* ]] ||
    die "apt offers nvidia-cuda-toolkit '${version:-none}', expected $want_version* (Debian 12 bookworm non-free)"
echo "== nvidia-cuda-toolkit $version"

# Download what is missing, then unpack everything once per set of .deb files.
mkdir -p "$cache/debs"
for p in "${packages[@]}"; do
    if ! compgen -G "$cache/debs/${p}_*.deb" >/dev/null; then
        echo "== apt-get download $p"
        (cd "$cache/debs" && apt-get "${apt_opts[@]}" download "$p") || die "apt-get download $p failed"
    fi
done
debs=()
for p in "${packages[@]}"; do
    debs+=("$(compgen -G "$cache/debs/${p}_*.deb" | sort | tail -n 1)")
done
stamp="$cache/root/.unpacked"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "${debs[*]}" ]]; then
    rm -rf "$cache/root"
    mkdir -p "$cache/root"
    for d in "${debs[@]}"; do
        echo "== dpkg -x $(basename "$d")"
        dpkg -x "$d" "$cache/root" || die "dpkg -x $d failed"
    done
    echo "${debs[*]}" >"$stamp"
fi

# 2. An NVIDIA-style toolkit tree over the unpacked Debian layout (binaries in
# usr/lib/nvidia-cuda-toolkit/bin and usr/bin, headers in usr/include, libraries in
# usr/lib/x86_64-linux-gnu). nvcc reads nvcc.profile next to its own executable (symbolic
# links resolved), hence the copy; the other tools are found through the profile's PATH.
root="$cache/root"
tk="$cache/toolkit"
rm -rf "$tk"
mkdir -p "$tk/bin" "$tk/nvvm"
cp -p "$root/usr/lib/nvidia-cuda-toolkit/bin/nvcc" "$tk/bin/nvcc"
for f in "$root/usr/lib/nvidia-cuda-toolkit/bin/cicc" "$root/usr/lib/nvidia-cuda-toolkit/bin/crt" \
    "$root"/usr/bin/{ptxas,fatbinary,nvlink,cudafe++,bin2c,nvprune,cuobjdump,nvdisasm,cu++filt}; do
    [[ -e "$f" ]] || die "missing from the unpacked packages: ${f#"$root"/}"
    ln -s "$f" "$tk/bin/"
done
ln -s "$root/usr/include" "$tk/include"
ln -s "$root/usr/lib/x86_64-linux-gnu" "$tk/lib64"
ln -s "$root/usr/lib/nvidia-cuda-toolkit/libdevice" "$tk/nvvm/libdevice"
cat >"$tk/bin/nvcc.profile" <<'EOF'
TOP                = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
PATH              += $(_HERE_):
INCLUDES          +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES          =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
EOF
"$tk/bin/nvcc" --version || die "the unpacked nvcc does not run"

# 3. Configure and build kvscope_cuda only. No CUDAToolkit_ROOT hint: CMAKE_CUDA_COMPILER alone
# must decide the toolkit everywhere (tests/ takes kvscope_cuda's headers, KVSCOPE_CUDA_INCLUDE_DIRS).
echo "== configure $build"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSCOPE_WERROR=ON -DKVSCOPE_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$tk/bin/nvcc" -DCMAKE_CUDA_HOST_COMPILER="$host_cxx" \
    || die "cmake configure failed"
grep -qs 'set(CMAKE_CUDA_COMPILER_VERSION "11\.8\.' "$build/CMakeFiles/"*/CMakeCUDACompiler.cmake ||
    die "$build was configured with another CUDA compiler (remove it and run again)"
echo "== build kvscope_cuda"
t0=$SECONDS
cmake --build "$build" -j"$jobs" --target kvscope_cuda || die "kvscope_cuda does not build with CUDA 11.8"
echo "== built in $((SECONDS - t0)) s"

lib="$build/lib/libkvscope_cuda.so"
[[ -f "$lib" ]] || die "$lib not found after the build"
elfs="$("$tk/bin/cuobjdump" --list-elf "$lib")"
for sm in sm_80 sm_90; do
    grep -q "\.$sm\.cubin" <<<"$elfs" || die "$lib has no $sm code"
done
objdump -p "$lib" | grep -q 'NEEDED *libcublas\.so\.11$' || die "$lib does not link libcublas.so.11"
nm -D --defined-only "$lib" | grep -q ' T kvscope_create_cuda_backend$' ||
    die "$lib does not export kvscope_create_cuda_backend"
if [[ "${CUDA118_DECODERS_TEST:-0}" == 1 ]]; then
    echo "== build and run tst_cuda_decoders"
    cmake --build "$build" -j"$jobs" --target tst_cuda_decoders || die "tst_cuda_decoders does not build with CUDA 11.8's headers"
    QT_QPA_PLATFORM=offscreen "$build/tests/tst_cuda_decoders" || die "tst_cuda_decoders failed with CUDA 11.8's headers"
fi
echo "== OK: $lib (CUDA 11.8, sm_80 + sm_90, NEEDED libcublas.so.11, exports kvscope_create_cuda_backend)"
