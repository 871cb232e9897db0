#!/usr/bin/env python3
"""Reads a running kvscope server's /metrics with prometheus_client's own text parser (an
independent implementation of the exposition format) and checks it against vLLM's metric
definitions as tests/tools/make_vllm_metrics.py transcribes them from vLLM's source: every
family the issue and vLLM's Grafana dashboard use is there with vLLM's type, histogram
buckets are vLLM's, every sample is labelled model_name, and the counts agree with the
requests this script sent.

Usage: server_metrics_check.py BASE_URL MODEL MAX_MODEL_LEN
Exit 0 with a JSON summary; 2 when prometheus_client is missing; 1 with the failed check.
"""
import json
import os
import sys
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("prometheus_client is not installed in this Python", file=sys.stderr)
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_vllm_metrics as vllm  # noqa: E402  vLLM's bucket lists, transcribed from its source


def check(cond, what):
    if not cond:
        print("FAILED: " + what, file=sys.stderr)
        sys.exit(1)


def main():
    base, model, max_model_len = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(4):
        body = {"model": model, "prompt": "metrics check", "max_tokens": 3 + i, "ignore_eos": True}
        req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=120).read()
    text = urllib.request.urlopen(base + "/metrics", timeout=30).read().decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}

    want = {
        "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
        "vllm:num_requests_swapped": "gauge", "vllm:kv_cache_usage_perc": "gauge",
        "vllm:gpu_cache_usage_perc": "gauge", "vllm:cpu_cache_usage_perc": "gauge",
        "vllm:prefix_cache_queries": "counter", "vllm:prefix_cache_hits": "counter",
        "vllm:num_preemptions": "counter", "vllm:prompt_tokens": "counter", "vllm:generation_tokens": "counter",
        "vllm:request_success": "counter", "vllm:spec_decode_num_drafts": "counter",
        "vllm:spec_decode_num_draft_tokens": "counter", "vllm:spec_decode_num_accepted_tokens": "counter",
        "vllm:spec_decode_num_accepted_tokens_per_pos": "counter",
        "vllm:time_to_first_token_seconds": "histogram", "vllm:time_per_output_token_seconds": "histogram",
        "vllm:inter_token_latency_seconds": "histogram", "vllm:e2e_request_latency_seconds": "histogram",
        "vllm:request_queue_time_seconds": "histogram", "vllm:request_prefill_time_seconds": "histogram",
        "vllm:request_decode_time_seconds": "histogram", "vllm:request_inference_time_seconds": "histogram",
        "vllm:request_prompt_tokens": "histogram", "vllm:request_generation_tokens": "histogram",
        "vllm:request_max_num_generation_tokens": "histogram", "vllm:iteration_tokens_total": "histogram",
        "vllm:request_params_n": "histogram", "vllm:request_params_max_tokens": "histogram",
        "vllm:cache_config_info": "gauge",
    }
    for name, typ in want.items():
        check(name in fams, f"family {name} present")
        check(fams[name].type == typ, f"{name} is a {typ}, got {fams[name].type}")
        for s in fams[name].samples:
            check(s.labels.get("model_name") == model, f"{s.name} labelled model_name={model}: {s.labels}")

    def bounds(name):
        return [float(s.labels["le"]) for s in fams[name].samples
                if s.name == name + "_bucket" and s.labels["le"] != "+Inf"]

    lens = [float(b) for b in vllm.build_1_2_5_buckets(max_model_len)]
    expect = {
        "vllm:time_to_first_token_seconds": vllm.TTFT_BUCKETS,
        "vllm:time_per_output_token_seconds": vllm.TPOT_BUCKETS,
        "vllm:inter_token_latency_seconds": vllm.TPOT_BUCKETS,
        "vllm:e2e_request_latency_seconds": vllm.LATENCY_BUCKETS,
        "vllm:request_queue_time_seconds": vllm.LATENCY_BUCKETS,
        "vllm:request_prefill_time_seconds": vllm.LATENCY_BUCKETS,
        "vllm:request_decode_time_seconds": vllm.LATENCY_BUCKETS,
        "vllm:iteration_tokens_total": vllm.ITER_BUCKETS,
        "vllm:request_prompt_tokens": lens,
        "vllm:request_generation_tokens": lens,
        "vllm:request_max_num_generation_tokens": lens,
    }
    for name, b in expect.items():
        check(bounds(name) == [float(x) for x in b], f"{name} buckets {bounds(name)} == vLLM's {b}")

    def value(name, sample, **labels):
        for s in fams[name].samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
        return None

    n = value("vllm:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds_count")
    check(n == 4, f"4 requests in the e2e histogram, got {n}")
    gen = value("vllm:request_generation_tokens", "vllm:request_generation_tokens_sum")
    check(gen == 3 + 4 + 5 + 6, f"generation tokens sum {gen}")
    check(value("vllm:request_success", "vllm:request_success_total", finished_reason="length") == 4, "4 length")
    check(value("vllm:num_requests_running", "vllm:num_requests_running") == 0, "none running")
    print(json.dumps({"families": len(fams), "checked": len(want)}))


if __name__ == "__main__":
    main()
