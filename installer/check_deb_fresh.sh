#!/usr/bin/env bash
# The .deb on a fresh Debian 12: debootstraps a minimal bookworm (variant minbase) into a
# temporary folder, copies the package and the installed default model into it, and there
# runs `apt-get install ./kvscope_*.deb` (which must pull every runtime dependency from the
# Debian archive), `kvscope --version`, a headless `kvscope generate`, and the removal.
#   installer/check_deb_fresh.sh [DEB]      (default: the newest build/kvscope_*.deb,
#                                           made by installer/check_deb.sh or cpack -G DEB)
# Needs root, debootstrap and network access to deb.debian.org; ~400 MB in $TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "check_deb_fresh: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || fail "debootstrap is not installed (apt-get install debootstrap)"
deb=${1:-$(ls -t build/kvscope_*.deb 2>/dev/null | head -1)}
[ -f "$deb" ] || fail "no package: give its path, or run installer/check_deb.sh first"
model=${XDG_DATA_HOME:-$HOME/.local/share}/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || fail "the default model is not installed ($model; installer/fetch_model.sh)"
root=$(mktemp -d "${TMPDIR:-/tmp}/kvscope-fresh.XXXXXX")
trap 'rm -rf --one-file-system "$root"' EXIT
echo "== debootstrap bookworm (minbase) into $root"
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
echo "   $(chroot "$root" dpkg-query -W | wc -l) packages"
cp "$deb" "$root/tmp/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/root/.local/share/kvscope/models"
cp "$model" "$root/root/.local/share/kvscope/models/"
chroot "$root" /bin/bash -euo pipefail -c "
    export DEBIAN_FRONTEND=noninteractive HOME=/root
    cd /tmp
    apt-get update -qq
    echo '== apt-get install ./$(basename "$deb")'
    apt-get install -y -q ./$(basename "$deb") 2>&1 | grep -E 'newly installed|^E: [^C]' || true
    dpkg-query -W -f='\${Status}' kvscope | grep -q 'install ok installed'
    echo '== kvscope --version'; kvscope --version
    echo '== kvscope generate'
    out=\$(kvscope generate --chat -p 'What is the capital of France? Answer in one word.' -n 12 --temp 0 --seed 1)
    echo \"\$out\"
    [ -n \"\$(tr -d '[:space:]' <<<\"\$out\")\" ]
    echo '== apt-get remove --purge kvscope'
    apt-get remove --purge -y -q kvscope >/dev/null 2>&1
    [ ! -e /usr/bin/kvscope ] && ! dpkg-query -W -f='\${Status}' kvscope 2>/dev/null | grep -q 'install ok installed'
" || fail "see above"
echo "check_deb_fresh: OK ($(basename "$deb") on a fresh Debian 12)"
