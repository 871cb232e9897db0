#!/usr/bin/env python3
"""vLLM's serving-benchmark metrics (vllm/benchmarks/serve.py, calculate_metrics), transcribed
with numpy, for tests/tst_serve_bench.cpp to compare app/net/serve_metrics against.

Usage: serve_metrics_reference.py INPUT.json
INPUT: {"duration_s", "goodput": {"ttft": ms, "tpot": ms, "e2el": ms} (any subset),
        "outcomes": [{"success", "ttft_s", "latency_s", "itl_s": [...], "prompt_len", "output_tokens"}]}
Prints the metrics as JSON (ms for latencies).
"""
import json
import sys

import numpy as np


def main():
    inp = json.load(open(sys.argv[1]))
    dur_s = inp["duration_s"]
    goodput = inp.get("goodput", {})
    total_input = completed = good_completed = 0
    actual_output_lens, itls, tpots, all_tpots, ttfts, e2els = [], [], [], [], [], []
    for o in inp["outcomes"]:
        if not o["success"]:
            actual_output_lens.append(0)
            continue
        output_len = o["output_tokens"]
        actual_output_lens.append(output_len)
        total_input += o["prompt_len"]
        tpot = 0.0
        if output_len > 1:
            tpot = (o["latency_s"] - o["ttft_s"]) / (output_len - 1)
            tpots.append(tpot)
        all_tpots.append(tpot)
        itls += o["itl_s"]
        ttfts.append(o["ttft_s"])
        e2els.append(o["latency_s"])
        completed += 1
    if goodput:
        valid, slo = [], []
        for key, values in (("ttft", ttfts), ("tpot", all_tpots), ("e2el", e2els)):
            if key in goodput:
                valid.append(values)
                slo.append(goodput[key] / 1000)
        for req in zip(*valid):
            if all(s >= r for s, r in zip(slo, req)):
                good_completed += 1

    def stat(x):
        return {"mean": float(np.mean(x or 0) * 1000), "median": float(np.median(x or 0) * 1000),
                "std": float(np.std(x or 0) * 1000), "p90": float(np.percentile(x or 0, 90) * 1000),
                "p99": float(np.percentile(x or 0, 99) * 1000)}

    out = {
        "completed": completed,
        "failed": len(inp["outcomes"]) - completed,
        "total_input_tokens": total_input,
        "total_output_tokens": int(sum(actual_output_lens)),
        "request_throughput": completed / dur_s,
        "request_goodput": good_completed / dur_s if goodput else None,
        "output_throughput": sum(actual_output_lens) / dur_s,
        "total_token_throughput": (total_input + sum(actual_output_lens)) / dur_s,
        "ttft_ms": stat(ttfts), "tpot_ms": stat(tpots), "itl_ms": stat(itls), "e2el_ms": stat(e2els),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
