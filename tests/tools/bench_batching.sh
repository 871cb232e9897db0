#!/usr/bin/env bash
# The batching benchmarks of docs/benchmarks.md (issue 4), one after the other on the
# default model: continuous vs static on the mixed workloads, prefix caching on the
# shared-prefix workload, preemption by recompute and swap under a small KV pool, and the
# batch-size sweep. Usage: tests/tools/bench_batching.sh [kvscope binary] [out dir] [extra bench args...]
# (e.g. --backend cuda)
set -euo pipefail
KV=${1:-kvscope}
OUT=${2:-bench-batching}
EXTRA=("${@:3}")
mkdir -p "$OUT"
run() {  # name, args...
    local name=$1
    shift
    echo "== $name: $KV bench $*" | tee "$OUT/$name.txt"
    local t0=$SECONDS
    "$KV" bench "$@" "${EXTRA[@]}" --json-out "$OUT/$name.json" 2>&1 | tee -a "$OUT/$name.txt"
    echo "wall $((SECONDS - t0)) s" | tee -a "$OUT/$name.txt"
}
run sweep --sweep 1,2,4,8,16,32,64 --sweep-prompt 32 --sweep-gen 64
run mixed --workload mixed --max-seqs 16
run mixed_long --workload mixed:output=16..1024 --max-seqs 16
run shared_prefix --workload shared-prefix --policy continuous --max-seqs 16
run shared_prefix_off --workload shared-prefix --policy continuous --max-seqs 16 --no-prefix-cache
run pressure_recompute --workload mixed:n=32,prompt=16..256,output=16..256 --policy continuous --max-seqs 16 --kv-blocks 96 --preemption recompute
run pressure_swap --workload mixed:n=32,prompt=16..256,output=16..256 --policy continuous --max-seqs 16 --kv-blocks 96 --preemption swap --host-blocks 512
