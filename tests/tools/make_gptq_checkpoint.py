#!/usr/bin/env python3
"""Makes an AutoGPTQ-format checkpoint from a float Hugging Face safetensors folder, and a
float reference folder holding exactly the weights the checkpoint encodes.

Every linear of every layer (q/k/v/o_proj, gate/up/down_proj) is quantized with AutoGPTQ's
quantizer (auto_gptq/quantization/quantizer.py find_params, perchannel, groups along the
input dim; no error feedback: the packing is what is tested) and packed as AutoGPTQ's
QuantLinear.pack packs it (auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py):
  qweight int32 [in * bits / 32, out]: 32 / bits input rows per word, row i of a word at bits
          bits * i (ascending);
  qzeros  int32 [in / group, out * bits / 32]: 32 / bits output columns per word, likewise;
          the classic "gptq" format stores zero - 1, "gptq_v2" the zero itself;
  scales  fp16 [in / group, out]; g_idx int32 [in].
Written with numpy + safetensors only: independent of KV Scope's C++ code.

The reference folder has the same config (no quantization_config), tokenizer files and
non-linear tensors, and each linear as float32 scale * (q - zero) from the integers and fp16
scales the checkpoint holds, so a correct loader reproduces it exactly.

    python3 make_gptq_checkpoint.py SRC_DIR GPTQ_DIR REF_DIR [--group 128|64|32|-1] [--bits 4|8]
        [--asym] [--format gptq|gptq_v2] [--in-config] [--act-order static|permuted] [--defect NAME]
        [--matmul-check JSON]

--in-config writes the settings to config.json's quantization_config (transformers) instead of
quantize_config.json. --act-order static writes desc_act and static_groups true (g_idx stays
i // group); permuted writes a real desc_act g_idx the way AutoGPTQ makes it
(auto_gptq/quantization/gptq.py fasterquant): perm = argsort(diag H, descending) for a random
diagonal shared by the linears that share an input (q/k/v, gate/up), invperm = argsort(perm),
g_idx = [i // group for i in range(in)][invperm]; the groups are quantized from the columns
g_idx gives them.
--matmul-check writes JSON {"checks": [{"module", "x" [3][in], "y" [3][out]}]} for every linear
of layer 0: y = x . W_ref^T in float64 (numpy), W_ref the reference folder's weights.
--defect makes a broken checkpoint: bits3, missing_g_idx, qweight_shape, format_marlin,
g_idx_range, g_idx_uneven (a permuted g_idx whose group 0 has one column too many).
"""
import argparse
import json
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def find_params(x, bits, sym):
    maxq = 2 ** bits - 1
    xmin = np.minimum(x.min(axis=1), 0)
    xmax = np.maximum(x.max(axis=1), 0)
    if sym:
        xmax = np.maximum(np.abs(xmin), xmax)
        xmin = np.where(xmin < 0, -xmax, xmin)
    both = (xmin == 0) & (xmax == 0)
    xmin = np.where(both, -1, xmin)
    xmax = np.where(both, 1, xmax)
    scale = ((xmax - xmin) / maxq).astype(np.float16)
    zero = np.full(scale.shape, (maxq + 1) // 2) if sym else np.round(-xmin / scale.astype(np.float32))
    # zero 0 cannot be stored in the v1 format (zero - 1 = -1 spills into the neighbours)
    zero = np.clip(zero, 1, maxq).astype(np.int64)
    return scale, zero


def quantize(w, bits, group, sym, g_idx):
    """w [out, in] -> q [out, in], zeros [groups, out], scales [groups, out] fp16."""
    n_out, n_in = w.shape
    maxq = 2 ** bits - 1
    n_groups = n_in // group
    scales = np.zeros((n_groups, n_out), np.float16)
    zeros = np.zeros((n_groups, n_out), np.int64)
    for g in range(n_groups):
        cols = np.nonzero(g_idx == g)[0]
        scales[g], zeros[g] = find_params(w[:, cols], bits, sym)
    s = scales[g_idx].T.astype(np.float32)  # [out, in]
    z = zeros[g_idx].T
    q = np.clip(np.round(w / s) + z, 0, maxq).astype(np.int64)
    return q, zeros, scales


def pack_rows(values, bits):
    """values [rows, cols] -> uint32 [rows * bits / 32, cols]: 32/bits rows per word."""
    per = 32 // bits
    rows, cols = values.shape
    out = np.zeros((rows // per, cols), dtype=np.uint32)
    for j in range(per):
        out |= (values[j::per].astype(np.uint32) & np.uint32(2 ** bits - 1)) << np.uint32(bits * j)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("gptq")
    ap.add_argument("ref")
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--asym", action="store_true")
    ap.add_argument("--format", default="gptq")
    ap.add_argument("--in-config", action="store_true")
    ap.add_argument("--act-order", default="")
    ap.add_argument("--defect", default="")
    ap.add_argument("--matmul-check", default="")
    a = ap.parse_args()
    src, out_dir, ref_dir = Path(a.src), Path(a.gptq), Path(a.ref)
    for d in (out_dir, ref_dir):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
    rng = np.random.default_rng(3)
    tensors = {}
    for f in sorted(src.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    q_t, ref_t = {}, {}
    first = True
    diag = {}  # (layer, input) -> the random diag H that act-order sorts by
    checks = []
    for name, t in sorted(tensors.items()):
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        if module is None or not module.endswith(LINEARS):
            q_t[name] = ref_t[name] = t.astype(np.float16)
            continue
        w = t.astype(np.float32)
        n_out, n_in = w.shape
        group = n_in if a.group == -1 else a.group
        g_idx = np.arange(n_in) // group
        if a.act_order == "permuted":
            layer = module.split(".")[2]
            kind = {"q_proj": "attn_in", "k_proj": "attn_in", "v_proj": "attn_in", "o_proj": "attn_out",
                    "gate_proj": "ffn_in", "up_proj": "ffn_in", "down_proj": "down_in"}[module.split(".")[-1]]
            d = diag.setdefault((layer, kind), rng.random(n_in))
            perm = np.argsort(-d, kind="stable")
            invperm = np.argsort(perm)
            g_idx = g_idx[invperm]
            if first and a.defect == "g_idx_uneven":
                g_idx = g_idx.copy()
                g_idx[np.nonzero(g_idx == 1)[0][0]] = 0
        q, zeros, scales = quantize(w, a.bits, group, not a.asym, g_idx)
        ref_t[name] = scales[g_idx].T.astype(np.float32) * (q - zeros[g_idx].T).astype(np.float32)
        if a.matmul_check and module.startswith("model.layers.0."):
            x = rng.standard_normal((3, n_in)).astype(np.float32)
            y = x.astype(np.float64) @ ref_t[name].astype(np.float64).T
            checks.append({"module": module, "x": x.tolist(), "y": y.tolist()})
        qweight = pack_rows(q.T.copy(), a.bits).view(np.int32)          # [in * bits / 32, out]
        stored = zeros - (1 if a.format == "gptq" else 0)
        qzeros = pack_rows(stored.T.copy(), a.bits).T.copy().view(np.int32)  # [groups, out * bits / 32]
        if first and a.defect == "qweight_shape":
            qweight = qweight[:-1]
        gi = g_idx.astype(np.int32)
        if first and a.defect == "g_idx_range":
            gi = gi.copy()
            gi[5] = 1000
        q_t[module + ".qweight"] = qweight
        q_t[module + ".qzeros"] = qzeros
        q_t[module + ".scales"] = scales
        if not (first and a.defect == "missing_g_idx"):
            q_t[module + ".g_idx"] = gi
        first = False
    save_file(q_t, str(out_dir / "model.safetensors"))
    if a.matmul_check:
        Path(a.matmul_check).write_text(json.dumps({"checks": checks}))
    save_file(ref_t, str(ref_dir / "model.safetensors"))

    config = json.loads((src / "config.json").read_text())
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if (src / f).exists():
            shutil.copy(src / f, out_dir / f)
            shutil.copy(src / f, ref_dir / f)
    (ref_dir / "config.json").write_text(json.dumps(config, indent=2))
    quant = {"bits": a.bits, "group_size": a.group, "damp_percent": 0.01, "desc_act": a.act_order != "",
             "static_groups": a.act_order == "static", "sym": not a.asym, "true_sequential": True,
             "quant_method": "gptq", "checkpoint_format": a.format}
    if a.defect == "bits3":
        quant["bits"] = 3
    if a.defect == "format_marlin":
        quant["checkpoint_format"] = "marlin"
    if a.in_config:
        config["quantization_config"] = quant
    else:
        (out_dir / "quantize_config.json").write_text(json.dumps(quant, indent=2))
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))


if __name__ == "__main__":
    main()
