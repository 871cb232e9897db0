#!/usr/bin/env bash
# Builds KV Scope's .deb from a Release build folder (default build/, the one setup.sh makes),
# installs it with apt as a user would (`apt install ./kvscope_*.deb`, which pulls its runtime
# dependencies), runs the installed program — `kvscope --version` and a headless
# `kvscope generate` with the default model — checks the files it installed (desktop entry,
# icon, AppStream metainfo, man page, lessons) and that the binary finds every library, then
# removes it and checks that none of its files is left.
#   installer/check_deb.sh [BUILD_DIR]
# Needs root or sudo (apt). Refuses to run when a kvscope package is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
fail() { echo "check_deb: FAIL: $*" >&2; exit 1; }
[ -f "$build/CMakeCache.txt" ] || fail "$build is not a configured build folder (run installer/setup.sh first)"
grep -q '^CMAKE_BUILD_TYPE:STRING=Release' "$build/CMakeCache.txt" || fail "$build is not a Release build"
if dpkg-query -W -f='${Status}' kvscope 2>/dev/null | grep -q 'install ok installed'; then
    fail "a kvscope package is installed already: remove it first (apt-get remove kvscope)"
fi
command -v dpkg-shlibdeps >/dev/null || fail "dpkg-shlibdeps missing (Debian package dpkg-dev; installer/setup.sh installs it)"

echo "== build the program and the package"
cmake --build "$build" --target kvscope kvscope_man
rm -f "$build"/kvscope_*.deb
(cd "$build" && cpack -G DEB)
deb=$(ls "$build"/kvscope_*.deb)
deb=$(realpath "$deb")
dpkg-deb --field "$deb" Package Version Architecture Installed-Size Depends Recommends
dpkg-deb --contents "$deb" | awk '{print $NF}'
depends=$(dpkg-deb --field "$deb" Depends)
for need in libqt6widgets6 libqt6gui6 libqt6core6 qt6-qpa-plugins fonts-noto-cjk libstdc6 libc6; do
    grep -q "${need/libstdc6/libstdc++6}" <<<"$depends" || fail "Depends lacks $need: $depends"
done

echo "== apt install $deb"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y "$deb"
files=$(dpkg -L kvscope)
for f in /usr/bin/kvscope /usr/share/applications/io.github.kvscope.KVScope.desktop \
         /usr/share/icons/hicolor/scalable/apps/io.github.kvscope.KVScope.svg \
         /usr/share/metainfo/io.github.kvscope.KVScope.metainfo.xml /usr/share/man/man1/kvscope.1.gz; do
    [ -f "$f" ] || fail "$f not installed"
done
ls /usr/share/kvscope/lessons/*.json >/dev/null || fail "no lessons in /usr/share/kvscope/lessons"
! ldd /usr/bin/kvscope | grep 'not found' || fail "the installed binary misses libraries"
! ls /usr/lib/*/libkvscope_cuda* /usr/lib/libkvscope_cuda* 2>/dev/null || fail "the CUDA library was packaged"
if command -v appstreamcli >/dev/null; then
    appstreamcli validate --no-net /usr/share/metainfo/io.github.kvscope.KVScope.metainfo.xml
fi
man -w kvscope >/dev/null 2>&1 || zcat /usr/share/man/man1/kvscope.1.gz | head -3 | grep -q '^.TH KVSCOPE' ||
    fail "the man page is not readable"

echo "== run the installed program"
cd /tmp  # nothing from the source tree or build folder
/usr/bin/kvscope --version
model=${XDG_DATA_HOME:-$HOME/.local/share}/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || fail "the default model is not installed ($model; installer/fetch_model.sh)"
out=$(env -u DISPLAY -u WAYLAND_DISPLAY /usr/bin/kvscope generate -m smollm2-135m --chat \
      -p "What is the capital of France? Answer in one word." -n 12 --temp 0 --seed 1)
echo "$out"
[ -n "$(tr -d '[:space:]' <<<"$out")" ] || fail "kvscope generate printed nothing"
cd - >/dev/null

echo "== apt remove"
$sudo apt-get remove --purge -y kvscope
dpkg-query -W -f='${Status}' kvscope 2>/dev/null | grep -q 'install ok installed' && fail "still installed"
left=0
while read -r f; do
    [ -n "$f" ] || continue
    if [ -f "$f" ] || [ -L "$f" ]; then echo "left behind: $f"; left=1; fi
done <<<"$files"
[ "$left" -eq 0 ] || fail "files of the package are left after removal"
[ ! -e /usr/bin/kvscope ] || fail "/usr/bin/kvscope is still there"
echo "check_deb: OK ($(basename "$deb"))"
