#!/usr/bin/env python3
"""GPTQ fixture: a numpy transcription of the reference algorithm (IST-DASLab gptq, as
AutoGPTQ carries it in auto_gptq/quantization/gptq.py GPTQ.fasterquant and quantizer.py
Quantizer.find_params / quantize, perchannel=True), run on one layer with known inputs.
Independent of KV Scope's C++ code; tests/tst_gptq.cpp compares its GPTQ with this.

Written from the reference, step by step:
  H = 2/n X^T X; dead = diag(H) == 0: H[dead, dead] = 1, W[:, dead] = 0;
  static groups: each group's (scale, zero) from W before any update;
  act-order: perm = columns by descending diag(H) (a stable sort: ties keep index order);
  H += percdamp * mean(diag(H)) * I; Hinv = cholesky(inverse(H)) upper;
  for each block [i1, i2) of blocksize columns: W1 = W[:, i1:i2] (a copy); per column i:
    at a group's first column, params from W[:, col:col + group] (W, not W1: the
    block-start state, as the reference does); q = quantize(w); err = (w - q) / Hinv[i, i];
    W1[:, i:] -= err * Hinv[i, i:]; afterwards W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:].
  g_idx: static groups: perm[i] // group (then un-permuted: i // group), else i // group in
  permuted order, un-permuted.
The one step the reference does not take inside the algorithm: the scale is rounded to
float16 (nearest; the smallest positive fp16 if it rounds to 0) before zero and q, because
float16 is what the checkpoint stores (the reference rounds it only when packing).

    python3 make_gptq_fixture.py OUT.json [--seed N]
"""
import argparse
import json

import numpy as np


def fp16_scale(s):
    h = s.astype(np.float16).astype(np.float64)
    return np.where(h > 0, h, float(np.float16(2.0 ** -24)))


def find_params(x, bits, sym, mse=False):
    """x [rows, cols] -> per-row (scale, zero), Quantizer.find_params(perchannel, weight);
    mse: the Quantizer's mse search (norm 2.4, grid 100, maxshrink 0.8): the range shrunk by
    p = 1 - i / 100, i < 80, keeping per row the first p with the least sum |x - x_hat|^2.4
    (summed left to right: np.cumsum, so the same order as the C++ loop)."""
    maxq = 2 ** bits - 1
    xmin = np.minimum(x.min(axis=1), 0.0)
    xmax = np.maximum(x.max(axis=1), 0.0)
    if sym:
        xmax = np.maximum(np.abs(xmin), xmax)
        xmin = np.where(xmin < 0, -xmax, xmin)
    both = (xmin == 0) & (xmax == 0)
    xmin = np.where(both, -1.0, xmin)
    xmax = np.where(both, 1.0, xmax)
    scale = fp16_scale((xmax - xmin) / maxq)
    if sym:
        zero = np.full_like(scale, (maxq + 1) // 2)
    else:
        zero = np.clip(np.round(-xmin / scale), 0, maxq)
    if mse:
        best = np.full(x.shape[0], np.inf)
        for i in range(int(0.8 * 100)):
            p = 1 - i / 100
            xmin1, xmax1 = p * xmin, p * xmax
            scale1 = fp16_scale((xmax1 - xmin1) / maxq)
            zero1 = np.full_like(scale1, (maxq + 1) // 2) if sym else np.clip(np.round(-xmin1 / scale1), 0, maxq)
            q = quantize(x, scale1[:, None], zero1[:, None], maxq)[1]
            err = np.cumsum(np.abs(q - x) ** 2.4, axis=1)[:, -1]
            better = err < best
            best = np.where(better, err, best)
            scale = np.where(better, scale1, scale)
            zero = np.where(better, zero1, zero)
    return scale, zero


def quantize(x, scale, zero, maxq):
    q = np.clip(np.round(x / scale) + zero, 0, maxq)
    return q, scale * (q - zero)


def gptq(W, H, bits, group, sym, act_order, static_groups, blocksize=128, percdamp=0.01, mse=False):
    W = W.astype(np.float64).copy()
    H = H.copy()
    rows, cols = W.shape
    maxq = 2 ** bits - 1
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    groups = []
    if static_groups:
        for i in range(0, cols, group):
            groups.append(find_params(W[:, i:i + group], bits, sym, mse))
    perm = np.arange(cols)
    if act_order:
        perm = np.argsort(-np.diag(H), kind="stable")
        W = W[:, perm]
        H = H[perm][:, perm]
    invperm = np.argsort(perm)
    damp = percdamp * np.mean(np.diag(H))
    H[np.arange(cols), np.arange(cols)] += damp
    Hinv = np.linalg.cholesky(np.linalg.inv(H)).T  # upper: inv(H) = U^T U
    Q = np.zeros_like(W)
    Qint = np.zeros(W.shape, dtype=np.int64)
    scales, zeros = [], []
    cur = None
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1 = W[:, i1:i2].copy()
        Err1 = np.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            col = i1 + i
            w = W1[:, i]
            d = Hinv1[i, i]
            if static_groups:
                cur = groups[perm[col] // group]
            elif col % group == 0:
                cur = find_params(W[:, col:col + group], bits, sym, mse)
                scales.append(cur[0])
                zeros.append(cur[1])
            qi, q = quantize(w, cur[0], cur[1], maxq)
            Q[:, col] = q
            Qint[:, col] = qi
            err1 = (w - q) / d
            W1[:, i:] -= np.outer(err1, Hinv1[i, i:])
            Err1[:, i] = err1
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    if static_groups:
        g_idx = perm // group
        scales = [g[0] for g in groups]
        zeros = [g[1] for g in groups]
    else:
        g_idx = np.arange(cols) // group
    Q = Q[:, invperm]
    Qint = Qint[:, invperm]
    g_idx = g_idx[invperm]
    return Q, Qint, np.stack(scales), np.stack(zeros), g_idx


def rtn(W, bits, group, sym, mse=False):
    maxq = 2 ** bits - 1
    Q = np.zeros_like(W, dtype=np.float64)
    for i in range(0, W.shape[1], group):
        s, z = find_params(W[:, i:i + group].astype(np.float64), bits, sym, mse)
        Q[:, i:i + group] = quantize(W[:, i:i + group], s[:, None], z[:, None], maxq)[1]
    return Q


CONFIGS = [
    # name, bits, group, sym, act_order, static_groups, percdamp, mse
    ("g32_asym", 4, 32, False, False, False, 0.01, False),
    ("g64_sym", 4, 64, True, False, False, 0.01, False),
    ("g128_asym_act", 4, 128, False, True, False, 0.01, False),
    ("g64_asym_act_static", 4, 64, False, True, True, 0.01, False),
    ("g32_sym_act", 4, 32, True, True, False, 0.01, False),
    ("g128_8bit_sym", 8, 128, True, False, False, 0.01, False),
    ("g64_asym_mse_damp10", 4, 64, False, False, False, 0.1, True),
    ("g128_asym_act_mse", 4, 128, False, True, False, 0.01, True),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n_out, n_in, n_cal, n_held = 24, 256, 192, 192
    # inputs with correlated channels and very different channel scales (one outlier channel,
    # one dead channel), as a transformer's activations have
    mix = rng.standard_normal((n_in, n_in)) * 0.3 + np.eye(n_in)
    chan = np.exp(rng.standard_normal(n_in) * 0.8)
    chan[17] = 40.0
    chan[5] = 0.0

    def inputs(n):
        return ((rng.standard_normal((n, n_in)) @ mix) * chan).astype(np.float32)

    x_cal, x_held = inputs(n_cal), inputs(n_held)
    W = (rng.standard_normal((n_out, n_in)) * 0.05).astype(np.float32)
    W[3, 40:72] += 0.4  # a row with a shifted group (asymmetric ranges)
    X = x_cal.astype(np.float64)
    H = 2.0 / n_cal * X.T @ X
    out = {"n_out": n_out, "n_in": n_in, "n_cal": n_cal, "n_held": n_held,
           "w": W.astype(np.float64).ravel().tolist(), "x_cal": X.ravel().tolist(),
           "x_held": x_held.astype(np.float64).ravel().tolist(), "h": H.ravel().tolist(), "configs": []}
    Xh = x_held.astype(np.float64)
    for name, bits, group, sym, act, static, damp, mse in CONFIGS:
        Q, Qint, scales, zeros, g_idx = gptq(W, H, bits, group, sym, act, static, percdamp=damp, mse=mse)
        R = rtn(W, bits, group, sym, mse)
        err = lambda A: float(np.linalg.norm((W.astype(np.float64) - A) @ Xh.T))
        out["configs"].append({
            "name": name, "bits": bits, "group": group, "sym": sym, "act_order": act, "static_groups": static,
            "damp_percent": damp, "mse": mse,
            "deq": Q.ravel().tolist(), "q": Qint.ravel().tolist(), "scales": scales.ravel().tolist(),
            "zeros": zeros.astype(np.int64).ravel().tolist(), "g_idx": g_idx.astype(np.int64).tolist(),
            "held_err_gptq": err(Q), "held_err_rtn": err(R)})
    with open(args.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
