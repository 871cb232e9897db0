#!/usr/bin/env python3
"""An independent transcription of KV Scope's watermark detector (engine/sampling/watermark.h)
in Python + numpy: the green lists (splitmix64, partial Fisher-Yates) and Kirchenbauer et al.'s
z-score / one-sided p-value. tests/tst_watermark.cpp hands it token ids and compares.

Usage: watermark_reference.py INPUT.json   (INPUT: {"vocab", "gamma", "hash_key", "ids"})
Prints {"green": [0/1 per id], "n_scored", "n_green", "z", "p_value"} as JSON.
"""
import json
import math
import sys

import numpy as np

M64 = (1 << 64) - 1


def splitmix64(state):
    """Returns (new_state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def green_list(prev, vocab, gamma, key):
    k = int(vocab * gamma)
    a = np.arange(vocab, dtype=np.int64)
    state = (key * prev) & M64
    for i in range(k):
        state, x = splitmix64(state)
        j = i + ((x * (vocab - i)) >> 64)
        a[i], a[j] = a[j], a[i]
    return set(int(v) for v in a[:k])


def main():
    with open(sys.argv[1]) as f:
        inp = json.load(f)
    vocab, gamma, key, ids = inp["vocab"], np.float32(inp["gamma"]), inp["hash_key"], inp["ids"]
    gamma = float(gamma)  # the C++ side keeps gamma as a float
    cache = {}
    green = np.zeros(len(ids), dtype=np.int64)
    for i in range(1, len(ids)):
        prev = ids[i - 1]
        if prev not in cache:
            cache[prev] = green_list(prev, vocab, gamma, key)
        green[i] = 1 if ids[i] in cache[prev] else 0
    t = len(ids) - 1
    g = int(green.sum())
    z = (g - gamma * t) / np.sqrt(t * gamma * (1.0 - gamma))
    p = 0.5 * math.erfc(z / math.sqrt(2.0))
    print(json.dumps({"green": green.tolist(), "n_scored": t, "n_green": g, "z": float(z), "p_value": p}))


if __name__ == "__main__":
    main()
