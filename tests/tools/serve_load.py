#!/usr/bin/env python3
"""N concurrent streaming clients against a running `kvscope serve` (a measurement, not a
test): mixed prompts and lengths, each stream read to its end and checked (every data line
JSON, the last one [DONE]); then /metrics' running / waiting / KV usage and the server
process's peak RSS (VmHWM of --pid).

Usage: serve_load.py BASE_URL --pid PID [--clients 256] [--min-tokens 16] [--max-tokens 128]
"""
import argparse
import json
import random
import threading
import time
import urllib.request

PROMPTS = ["Explain why the sky is blue.", "Write a haiku about autumn.", "List three prime numbers.",
           "What is a KV cache?", "Tell me a short story about a robot.", "Summarise the water cycle.",
           "Give two tips for learning to cook.", "Describe the moon in one paragraph."]


def one(base, i, n_tokens, results):
    body = {"messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}], "max_tokens": n_tokens,
            "stream": True, "ignore_eos": True, "temperature": 0.7, "seed": i}
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.time()
    try:
        with urllib.request.urlopen(req, timeout=900) as r:
            done, chunks, bad = False, 0, 0
            for raw in r:
                line = raw.decode().strip()
                if not line or line.startswith(":"):
                    continue
                if line == "data: [DONE]":
                    done = True
                    continue
                try:
                    json.loads(line[6:])
                    chunks += 1
                except ValueError:
                    bad += 1
        results[i] = (done and bad == 0, time.time() - t0, chunks)
    except Exception as e:  # noqa: BLE001  a failed client is counted, not fatal
        results[i] = (False, time.time() - t0, str(e))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--min-tokens", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    a = ap.parse_args()
    rng = random.Random(1)
    results = [None] * a.clients
    threads = [threading.Thread(target=one, args=(a.base, i, rng.randint(a.min_tokens, a.max_tokens), results))
               for i in range(a.clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    ok = sum(1 for r in results if r and r[0])
    metrics = urllib.request.urlopen(a.base + "/metrics", timeout=60).read().decode()
    vals = {}
    for line in metrics.splitlines():
        for k in ("vllm:num_requests_running{", "vllm:num_requests_waiting{", "vllm:kv_cache_usage_perc{",
                  "vllm:generation_tokens_total{"):
            if line.startswith(k):
                vals[k.rstrip("{")] = float(line.rsplit(" ", 1)[1])
    hwm = rss = None
    with open(f"/proc/{a.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    print(json.dumps({"clients": a.clients, "completed_well_formed": ok, "wall_s": round(wall, 1),
                      "after": vals, "server_peak_rss_mib": hwm, "server_rss_mib_after": rss}))


if __name__ == "__main__":
    main()
