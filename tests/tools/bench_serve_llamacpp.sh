#!/usr/bin/env bash
# Serving benchmark against the peer: `kvscope bench --serve` (a vllm-bench-serve-style
# client, app/net/serve_bench) drives `kvscope serve` and llama.cpp's llama-server in turn,
# on the same GGUF, the same thread count, llama-server with as many parallel slots as
# kvscope's --max-seqs and continuous batching on. For every workload, concurrency and round
# each server is started fresh, waited for, benchmarked and stopped; the order of the two
# alternates from round to round. Prints a table (every round, median, min..max spread,
# ratios kvscope / llama-server) and keeps every run's JSON.
#
# llama-server is built by tests/tools/bench_llamacpp.sh (same llama-cpp-python source
# package, same cache dirs) with LLAMACPP_EXTRA_TARGETS=llama-server. --no-repack is passed
# when this llama-server has it (its CPU weight repacking crashes on Intel AMX machines).
#
# Usage: tests/tools/bench_serve_llamacpp.sh [model.gguf]
# Environment (all optional):
#   KVSCOPE        the kvscope binary                     (default: build/bin/kvscope)
#   ROUNDS         rounds per configuration               (default 3)
#   ROUND_START    number of the first round (default 1); with the same OUT a later call adds
#                  rounds to an earlier one's (odd rounds start with kvscope, even ones with llama-server)
#   CONCURRENCY    concurrencies                          (default "1 8 32 64")
#   WORKLOADS      kvscope workload specs                 (default "mixed shared-prefix")
#   MAX_SEQS       kvscope --max-seqs = llama-server -np  (default 64)
#   SLOT_CTX       context per sequence / slot in tokens  (default 1024)
#   THREADS        -t for both servers                    (default 2)
#   PROMPTS_MIN    requests per run: max(PROMPTS_MIN, PROMPTS_PER_CONC x concurrency) (default 16)
#   PROMPTS_PER_CONC                                      (default 2)
#   OUT            where the JSON of every run goes       (default /tmp/bench_serve.<date>)
#   PORT           first port tried                       (default 18400)
# Loopback only. Nothing is written inside the KV Scope source tree.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
model="${1:-$HOME/.local/share/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
kvscope="${KVSCOPE:-$repo/build/bin/kvscope}"
rounds="${ROUNDS:-3}"
round_start="${ROUND_START:-1}"
concurrency="${CONCURRENCY:-1 8 32 64}"
workloads="${WORKLOADS:-mixed shared-prefix}"
max_seqs="${MAX_SEQS:-64}"
slot_ctx="${SLOT_CTX:-1024}"
threads="${THREADS:-2}"
prompts_min="${PROMPTS_MIN:-16}"
prompts_per_conc="${PROMPTS_PER_CONC:-2}"
out="${OUT:-/tmp/bench_serve.$(date +%Y%m%d-%H%M%S)}"
port="${PORT:-18400}"
build_dir="${LLAMACPP_BUILD:-/tmp/llamacpp-build}"

[[ -f "$model" ]] || { echo "bench_serve_llamacpp.sh: model '$model' not found" >&2; exit 1; }
[[ -x "$kvscope" ]] || { echo "bench_serve_llamacpp.sh: no kvscope binary at '$kvscope' (set KVSCOPE)" >&2; exit 1; }
LLAMACPP_EXTRA_TARGETS=llama-server "$here/bench_llamacpp.sh" --build-only >&2
llama_server="$build_dir/bin/llama-server"
[[ -x "$llama_server" ]] || { echo "bench_serve_llamacpp.sh: llama-server was not built" >&2; exit 1; }
mkdir -p "$out"

repack=()
if "$llama_server" --help 2>&1 | grep -q -- '--no-repack'; then repack=(--no-repack); fi

server_pid=""
stop_server() {
    if [[ -n "$server_pid" ]]; then
        kill "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
trap stop_server EXIT

# start_server NAME PORT LOG: starts it in the background, waits (at most 120 s) for /v1/models.
start_server() {
    local name=$1 p=$2 log=$3
    if [[ $name == kvscope ]]; then
        "$kvscope" serve -m "$model" --host 127.0.0.1 --port "$p" -t "$threads" --max-seqs "$max_seqs" \
            --ctx "$slot_ctx" >"$log" 2>&1 &
    else
        "$llama_server" -m "$model" --host 127.0.0.1 --port "$p" -t "$threads" -tb "$threads" \
            -np "$max_seqs" -c $((max_seqs * slot_ctx)) -cb "${repack[@]}" >"$log" 2>&1 &
    fi
    server_pid=$!
    for _ in $(seq 1 1200); do
        if curl -sf "http://127.0.0.1:$p/v1/models" >/dev/null 2>&1; then return 0; fi
        kill -0 "$server_pid" 2>/dev/null || { echo "$name exited; its log:" >&2; tail -20 "$log" >&2; return 1; }
        sleep 0.1
    done
    echo "$name did not answer /v1/models within 120 s" >&2
    return 1
}

echo "== $(date -u +%FT%TZ) kvscope $("$kvscope" --version 2>/dev/null) vs llama-server ($("$llama_server" --version 2>&1 | grep -m1 version || true))" >&2
echo "== model $model, -t $threads, max-seqs / -np $max_seqs, $slot_ctx tokens per slot, rounds $rounds" >&2
for round in $(seq "$round_start" $((round_start + rounds - 1))); do
    for wl in $workloads; do
        for c in $concurrency; do
            n=$((prompts_per_conc * c)); ((n < prompts_min)) && n=$prompts_min
            if ((round % 2 == 1)); then order="kvscope llama-server"; else order="llama-server kvscope"; fi
            for srv in $order; do
                port=$((port + 1))
                tag="${srv}_${wl%%:*}_c${c}_r${round}"
                echo "== round $round $wl c=$c n=$n $srv (load $(cut -d' ' -f1 /proc/loadavg))" >&2
                if ! start_server "$srv" "$port" "$out/$tag.server.log"; then stop_server; continue; fi
                "$kvscope" bench --serve "http://127.0.0.1:$port" --dataset "$wl" --num-prompts "$n" \
                    --max-concurrency "$c" --request-rate inf --no-progress --label "$srv $wl c=$c round $round" \
                    --json-out "$out/$tag.json" >"$out/$tag.txt" 2>&1 || echo "   bench failed: $(tail -2 "$out/$tag.txt")" >&2
                stop_server
            done
        done
    done
done

python3 - "$out" <<'EOF'
import glob, json, os, statistics, sys
runs = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    j = json.load(open(f))
    srv, wl, c, r = os.path.basename(f)[:-5].rsplit("_", 3)
    runs.setdefault((wl, int(c[1:])), {}).setdefault(srv, []).append((int(r[1:]), j))
def fmt(vals):
    return f"{statistics.median(vals):8.1f} [{min(vals):.1f}..{max(vals):.1f}]"
print("| workload | conc | server | output tok/s per round | median [min..max] | p99 TTFT ms median [min..max] | failed |")
print("|---|---|---|---|---|---|---|")
for (wl, c) in sorted(runs):
    med = {}
    for srv in ("kvscope", "llama-server"):
        rs = sorted(runs[(wl, c)].get(srv, []), key=lambda x: x[0])
        if not rs: continue
        tps = [j["output_throughput"] for _, j in rs]
        ttft = [j["ttft_ms"]["p99"] for _, j in rs]
        med[srv] = (statistics.median(tps), statistics.median(ttft))
        print(f"| {wl} | {c} | {srv} | {', '.join(f'{v:.1f}' for v in tps)} | {fmt(tps)} | {fmt(ttft)} | "
              f"{sum(j['failed'] for _, j in rs)} |")
    if len(med) == 2:
        print(f"| {wl} | {c} | ratio kvscope / llama-server | | {med['kvscope'][0] / med['llama-server'][0]:.2f}x "
              f"| {med['kvscope'][1] / med['llama-server'][1]:.2f}x | |")
EOF
echo "== every run's JSON and table: $out" >&2
