#!/usr/bin/env python3
"""Weight-space error of NF4 and INT4 grids on a GGUF model's linears, next to Gaussian weights.

An independent numpy check of why NF4 (bitsandbytes' NormalFloat code, symmetric absmax blocks
of 64) can lose to asymmetric INT4 RTN on a model that is already stored as asymmetric 4-bit
groups (SmolLM2-135M Q4_1), while it wins on normally distributed weights (what the code book
was built for, QLoRA section 3). For every linear of the model and for Gaussian matrices of the
same shapes (raw, and rounded to Q4_1 first like the model), it prints the mean relative error
||W - Q(W)||^2 / ||W||^2 of:
  nf4        NF4, absmax blocks of 64 (4.5 bits per weight with an fp32 absmax)
  int4-sym   symmetric INT4 absmax blocks of 64 (levels -7..7, same bits as nf4)
  int4-asym  asymmetric INT4 min/max groups of 128 (64 where 128 does not divide the row),
             fp16 scale and zero, as `kvscope quantize -s int4-rtn` (4.25-4.5 bits)
Usage: nf4_vs_int4_weights.py MODEL.gguf [--layers N]
"""
import argparse
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=np.float32)
LINEARS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def blocks(w, size):
    return w.reshape(-1, size)


def nf4(w):
    b = blocks(w, 64)
    absmax = np.abs(b).max(axis=1, keepdims=True)
    absmax[absmax == 0] = 1.0
    x = b / absmax
    idx = np.abs(x[..., None] - NF4).argmin(axis=-1)
    return (NF4[idx] * absmax).reshape(w.shape)


def int4_sym(w):
    b = blocks(w, 64)
    d = np.abs(b).max(axis=1, keepdims=True) / 7.0
    d[d == 0] = 1.0
    return (np.clip(np.rint(b / d), -7, 7) * d).reshape(w.shape)


def int4_asym(w, group):
    b = blocks(w, group)
    lo = np.minimum(b.min(axis=1, keepdims=True), 0)
    hi = np.maximum(b.max(axis=1, keepdims=True), 0)
    d = ((hi - lo) / 15.0).astype(np.float16).astype(np.float32)
    d[d == 0] = 1.0
    z = np.clip(np.rint(-lo / d), 0, 15)
    return ((np.clip(np.rint(b / d) + z, 0, 15) - z) * d).reshape(w.shape)


def q4_1(w):
    b = blocks(w, 32)
    lo, hi = b.min(axis=1, keepdims=True), b.max(axis=1, keepdims=True)
    d = (hi - lo) / 15.0
    d[d == 0] = 1.0
    return (np.clip(np.rint((b - lo) / d), 0, 15) * d + lo).reshape(w.shape)


def rel_err(w, q):
    return float(((w - q) ** 2).sum() / (w ** 2).sum())


def scores(w):
    group = 128 if w.shape[1] % 128 == 0 else 64
    return {"nf4": rel_err(w, nf4(w)), "int4-sym": rel_err(w, int4_sym(w)),
            "int4-asym": rel_err(w, int4_asym(w, group))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--layers", type=int, default=0, help="first N layers only (0: all)")
    args = ap.parse_args()
    reader = GGUFReader(args.model)
    rng = np.random.default_rng(0)
    sums = {k: {"nf4": [], "int4-sym": [], "int4-asym": []} for k in ("model", "gaussian", "gaussian-q4_1")}
    for t in reader.tensors:
        parts = t.name.split(".")
        if len(parts) < 3 or parts[0] != "blk" or parts[2] not in LINEARS:
            continue
        if args.layers and int(parts[1]) >= args.layers:
            continue
        w = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(int(t.shape[1]), int(t.shape[0]))
        g = rng.standard_normal(w.shape).astype(np.float32) * w.std()
        for kind, m in (("model", w), ("gaussian", g), ("gaussian-q4_1", q4_1(g))):
            for k, v in scores(m).items():
                sums[kind][k].append(v)
    n = len(sums["model"]["nf4"])
    if n == 0:
        sys.exit(f"{args.model}: no linear weights (blk.N.{{{','.join(LINEARS)}}}) found")
    print(f"{n} linear weights of {args.model}; mean relative squared error ||W - Q(W)||^2 / ||W||^2")
    print(f"{'weights':<16}{'nf4':>12}{'int4-sym':>12}{'int4-asym':>12}   best")
    for kind, s in sums.items():
        means = {k: float(np.mean(v)) for k, v in s.items()}
        best = min(means, key=means.get)
        print(f"{kind:<16}" + "".join(f"{means[k]:>12.5f}" for k in ("nf4", "int4-sym", "int4-asym")) + f"   {best}")


if __name__ == "__main__":
    main()
