#!/usr/bin/env python3
"""Makes an AutoAWQ-format (GEMM) checkpoint from a float Hugging Face safetensors folder,
and a float reference folder holding exactly the weights the checkpoint encodes.

Every linear of every layer (q/k/v/o_proj, gate/up/down_proj) is quantized the way
AutoAWQ's quantizer does it without activation scaling (awq/quantize/quantizer.py
pseudo_quantize_tensor, zero_point=True, 4 bits, groups along the input dim), and packed
as AutoAWQ's WQLinear_GEMM.from_linear packs it (awq/modules/linear/gemm.py):
  qweight int32 [in, out/8], qzeros int32 [in/group, out/8], scales fp16 [in/group, out],
  8 nibbles per word, nibble i holding column AWQ_ORDER[i] = [0, 2, 4, 6, 1, 3, 5, 7].
Written with numpy + safetensors only: independent of KV Scope's C++ code.

The reference folder has the same config (no quantization_config), tokenizer files and
non-linear tensors, and each linear as float32 (q - z) * s from the integers and fp16
scales the checkpoint holds, so a correct loader reproduces it exactly.

    python3 make_awq_checkpoint.py SRC_DIR AWQ_DIR REF_DIR [--group 128|64] [--legacy]
                                   [--defect NAME]

--group is AutoAWQ's q_group_size (128, its default, or 64): every linear's in_features
must be a multiple of it.

--legacy writes the settings to quant_config.json (older AutoAWQ) instead of
config.json's quantization_config. --defect makes a broken checkpoint for error tests:
bits3, group32 (the config claims group_size 32), gemv, missing_qzeros, qweight_shape,
scales_dtype.
"""
import argparse
import json
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def quantize(w, group):
    """w [out, in] float32 -> q [out, in] int, zeros [out, in/group] int, scales [out, in/group] fp16."""
    n_out, n_in = w.shape
    g = w.reshape(-1, group)
    max_val = g.max(axis=1, keepdims=True)
    min_val = g.min(axis=1, keepdims=True)
    scales = np.maximum(max_val - min_val, 1e-5) / 15.0
    zeros = np.clip(-np.round(min_val / scales), 0, 15)
    scales_h = scales.astype(np.float16)
    q = np.clip(np.round(g / scales_h.astype(np.float32)) + zeros, 0, 15)
    return (q.reshape(n_out, n_in).astype(np.int64), zeros.reshape(n_out, -1).astype(np.int64),
            scales_h.reshape(n_out, -1))


def pack_columns(values):
    """values [rows, cols] 0..15 -> int32 [rows, cols/8], AutoAWQ GEMM order."""
    rows, cols = values.shape
    out = np.zeros((rows, cols // 8), dtype=np.uint32)
    for col in range(cols // 8):
        for i in range(8):
            out[:, col] |= values[:, col * 8 + AWQ_ORDER[i]].astype(np.uint32) << np.uint32(4 * i)
    return out.view(np.int32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("awq")
    ap.add_argument("ref")
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--legacy", action="store_true")
    ap.add_argument("--defect", default="")
    a = ap.parse_args()
    src, awq_dir, ref_dir = Path(a.src), Path(a.awq), Path(a.ref)
    for d in (awq_dir, ref_dir):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)

    tensors = {}
    for f in sorted(src.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    awq_t, ref_t = {}, {}
    first = True
    for name, t in sorted(tensors.items()):
        if name.endswith(".weight") and name[: -len(".weight")].endswith(LINEARS) and t.shape[1] % a.group:
            raise SystemExit(f"{name}: in_features {t.shape[1]} is not a multiple of --group {a.group}")
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        if module is None or not module.endswith(LINEARS):
            awq_t[name] = ref_t[name] = t.astype(np.float16)  # AutoAWQ saves the rest in fp16
            continue
        w = t.astype(np.float32)
        q, z, s = quantize(w, a.group)
        ref_t[name] = ((q - np.repeat(z, a.group, axis=1)).astype(np.float32)
                       * np.repeat(s.astype(np.float32), a.group, axis=1))
        qweight = pack_columns(q.T.copy())   # [in, out/8]
        qzeros = pack_columns(z.T.copy())    # [in/group, out/8]
        scales = s.T.copy()                  # [in/group, out] fp16
        if first and a.defect == "qweight_shape":
            qweight = qweight[:-1]
        if first and a.defect == "scales_dtype":
            scales = scales.astype(np.float32)
        awq_t[module + ".qweight"] = qweight
        if not (first and a.defect == "missing_qzeros"):
            awq_t[module + ".qzeros"] = qzeros
        awq_t[module + ".scales"] = scales
        first = False
    save_file(awq_t, str(awq_dir / "model.safetensors"))
    save_file(ref_t, str(ref_dir / "model.safetensors"))

    config = json.loads((src / "config.json").read_text())
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if (src / f).exists():
            shutil.copy(src / f, awq_dir / f)
            shutil.copy(src / f, ref_dir / f)
    (ref_dir / "config.json").write_text(json.dumps(config, indent=2))
    quant = {"quant_method": "awq", "bits": 4, "group_size": a.group, "zero_point": True, "version": "gemm"}
    if a.defect == "bits3":
        quant["bits"] = 3
    if a.defect == "group32":
        quant["group_size"] = 32
    if a.defect == "gemv":
        quant["version"] = "gemv"
    if a.legacy:
        legacy = {"zero_point": quant["zero_point"], "q_group_size": quant["group_size"],
                  "w_bit": quant["bits"], "version": quant["version"].upper()}
        (awq_dir / "quant_config.json").write_text(json.dumps(legacy, indent=2))
    else:
        config["quantization_config"] = quant
    (awq_dir / "config.json").write_text(json.dumps(config, indent=2))


if __name__ == "__main__":
    main()
