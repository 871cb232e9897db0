#!/usr/bin/env python3
"""A /metrics page exactly as vLLM writes it, for tst_prometheus.

vLLM's PrometheusStatLogger (vllm/v1/metrics/loggers.py) and SpecDecodingProm
(vllm/v1/spec_decode/metrics.py) register their metrics with prometheus_client, labelled
[model_name, engine] (plus finished_reason / position), with the bucket lists below; this
script registers the same families with the same client library, records known
observations on two data-parallel engines, and prints prometheus_client's exposition text.
The expected values in tst_prometheus are worked out by hand from these observations and
Prometheus's histogram_quantile, not from this output.

usage: make_vllm_metrics.py > tests/fixtures/vllm_metrics_page.txt
"""
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LABELS = ["model_name", "engine"]
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0]
LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0]
ITER_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


def build_1_2_5_buckets(max_value):
    out, exponent = [], 0
    while True:
        for m in (1, 2, 5):
            v = m * 10 ** exponent
            if v > max_value:
                return out
            out.append(v)
        exponent += 1


def main():
    r = CollectorRegistry()
    running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", LABELS, registry=r)
    waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", LABELS, registry=r)
    usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", LABELS, registry=r)
    pq = Counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", LABELS,
                 registry=r)
    ph = Counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", LABELS,
                 registry=r)
    pre = Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", LABELS, registry=r)
    ptok = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", LABELS, registry=r)
    gtok = Counter("vllm:generation_tokens", "Number of generation tokens processed.", LABELS, registry=r)
    succ = Counter("vllm:request_success", "Count of successfully processed requests.", LABELS + ["finished_reason"],
                   registry=r)
    plen = Histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", LABELS,
                     buckets=build_1_2_5_buckets(8192), registry=r)
    iters = Histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", LABELS,
                      buckets=ITER_BUCKETS, registry=r)
    ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", LABELS,
                     buckets=TTFT_BUCKETS, registry=r)
    tpot = Histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", LABELS,
                     buckets=TPOT_BUCKETS, registry=r)
    e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", LABELS,
                    buckets=LATENCY_BUCKETS, registry=r)
    drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", LABELS, registry=r)
    dtok = Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", LABELS, registry=r)
    acc = Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", LABELS, registry=r)
    acc_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                      "Accepted tokens per draft position.", LABELS + ["position"], registry=r)
    cache_info = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                       ["block_size", "gpu_memory_utilization", "swap_space", "cache_dtype", "num_gpu_blocks",
                        "num_cpu_blocks", "enable_prefix_caching", "engine"], registry=r)

    for e, (run, wait, use, q, h) in enumerate([(3, 1, 0.25, 100, 40), (2, 0, 0.75, 300, 60)]):
        lab = (MODEL, str(e))
        running.labels(*lab).set(run)
        waiting.labels(*lab).set(wait)
        usage.labels(*lab).set(use)
        pq.labels(*lab).inc(q)
        ph.labels(*lab).inc(h)
        cache_info.labels(block_size="16", gpu_memory_utilization="0.9", swap_space="4", cache_dtype="auto",
                          num_gpu_blocks="1000", num_cpu_blocks="2048", enable_prefix_caching="True",
                          engine=str(e)).set(1)
    e0, e1 = (MODEL, "0"), (MODEL, "1")
    pre.labels(*e0).inc(7)
    pre.labels(*e1)
    ptok.labels(*e0).inc(1200)
    gtok.labels(*e0).inc(345)
    succ.labels(*e0, "stop").inc(5)
    succ.labels(*e1, "length").inc(2)
    succ.labels(*e1, "abort")
    for v in (10, 200):
        plen.labels(*e0).observe(v)
    for v in (1, 8, 100, 300):
        iters.labels(*e0).observe(v)
    for _ in range(10):
        ttft.labels(*e0).observe(0.05)
        ttft.labels(*e1).observe(0.3)
    for _ in range(4):
        tpot.labels(*e0).observe(0.02)
    for v in (1.2, 1.2, 9000.0):
        e2e.labels(*e1).observe(v)
    drafts.labels(*e0).inc(10)
    dtok.labels(*e0).inc(30)
    acc.labels(*e0).inc(18)
    for pos, n in enumerate((8, 6, 4)):
        acc_pos.labels(*e0, str(pos)).inc(n)
    print(generate_latest(r).decode(), end="")


if __name__ == "__main__":
    main()
