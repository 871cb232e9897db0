#!/usr/bin/env python3
"""LoRA adapters for a tiny Hugging Face Llama / qwen2 folder, and the logits of the model
with each adapter MERGED into its weights (W + s * B @ A), computed here with numpy in
float64 (an independent forward pass: Hugging Face layout, rotate-half RoPE). tests/tst_lora
runs KV Scope's unmerged LoRA forward on the same folder (and on the GGUF of the same
weights) and compares.

Writes into --out:
  peft/            adapter_config.json + adapter_model.safetensors: r 4, alpha 8, all seven
                   projections of every layer
  peft_rslora/     r 8, alpha 4, use_rslora, only q_proj and v_proj, only layer 1
                   (layers_to_transform)
  adapter.gguf     the `peft` adapter as llama.cpp's convert_lora_to_gguf.py writes it
                   (general.type adapter, adapter.lora.alpha, blk.N.<proj>.weight.lora_a/_b,
                   B's Q/K rows permuted for "llama"), F32 tensors
  adapter_f16.gguf the same with F16 tensors (convert_lora_to_gguf.py's default)
  bad_rank/        peft with r 8 in adapter_config.json (the tensors have rank 4)
  bad_missing/     peft without one lora_B tensor
  bad_target/      peft whose target_modules name GPT-2's c_attn
  bad_arch.gguf    adapter.gguf claiming general.architecture = "gpt2"
  reference.json   {"tokens": [...], "logits": {"base"|"peft"|"peft_rslora"|"f16": [[n_vocab] per token]}}

Usage: make_lora_fixture.py --model DIR --out DIR --tokens 1,2,3   (needs numpy and gguf)
       make_lora_fixture.py --peft-to-gguf PEFT_DIR --out FILE.gguf --arch llama --heads 9,3
         (a PEFT folder as convert_lora_to_gguf.py would write it: for the default model's adapter)
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct

import numpy as np

PROJ = {  # PEFT module -> (Hugging Face weight under model.layers.N, GGUF name)
    "q_proj": ("self_attn.q_proj", "attn_q"),
    "k_proj": ("self_attn.k_proj", "attn_k"),
    "v_proj": ("self_attn.v_proj", "attn_v"),
    "o_proj": ("self_attn.o_proj", "attn_output"),
    "gate_proj": ("mlp.gate_proj", "ffn_gate"),
    "up_proj": ("mlp.up_proj", "ffn_up"),
    "down_proj": ("mlp.down_proj", "ffn_down"),
}

ST_DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(data[a:b], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(data[a:b], dtype=ST_DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"]).astype(np.float64)
    return out


def write_safetensors(path: str, tensors: dict[str, np.ndarray]) -> None:
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = np.ascontiguousarray(t, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def out_in(cfg: dict, module: str) -> tuple[int, int]:
    d, ff = cfg["hidden_size"], cfg["intermediate_size"]
    hd = d // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    return {"q_proj": (q, d), "k_proj": (kv, d), "v_proj": (kv, d), "o_proj": (d, q),
            "gate_proj": (ff, d), "up_proj": (ff, d), "down_proj": (d, ff)}[module]


def make_adapter(cfg, rng, r, modules, layers):
    """{(layer, module): (A [r, n_in], B [n_out, r])}, B non-zero (a trained adapter's B)."""
    pairs = {}
    for layer in layers:
        for m in modules:
            n_out, n_in = out_in(cfg, m)
            a = rng.normal(0, 1 / np.sqrt(n_in), size=(r, n_in))
            b = rng.normal(0, 0.15, size=(n_out, r))
            pairs[(layer, m)] = (a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64))
    return pairs


def peft_key(layer, module, half):
    return f"base_model.model.model.layers.{layer}.{PROJ[module][0]}.lora_{half}.weight"


def write_peft(d, pairs, config):
    os.makedirs(d, exist_ok=True)
    tensors = {}
    for (layer, m), (a, b) in sorted(pairs.items()):
        tensors[peft_key(layer, m, "A")] = a
        tensors[peft_key(layer, m, "B")] = b
    write_safetensors(os.path.join(d, "adapter_model.safetensors"), tensors)
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)


def llamacpp_permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute, applied to B as convert_lora_to_gguf.py does."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf_adapter(path, pairs, alpha, cfg, arch, dtype=np.float32):
    import gguf
    w = gguf.GGUFWriter(path, arch)
    w.add_type(gguf.GGUFType.ADAPTER)
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    for (layer, m), (a, b) in sorted(pairs.items()):
        if cfg["model_type"] == "llama" and m in ("q_proj", "k_proj"):
            heads = cfg["num_attention_heads"] if m == "q_proj" else cfg["num_key_value_heads"]
            b = llamacpp_permute(b, heads)
        name = f"blk.{layer}.{PROJ[m][1]}.weight"
        w.add_tensor(name + ".lora_a", np.ascontiguousarray(a, dtype=dtype))  # ne [n_in, r]
        w.add_tensor(name + ".lora_b", np.ascontiguousarray(b, dtype=dtype))  # ne [r, n_out]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_half(x, pos, base):
    """Rotate-half RoPE (Hugging Face Llama / qwen2). x [T, heads, hd]."""
    hd = x.shape[-1]
    inv = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def forward(weights, cfg, tokens, until_last_mlp=False, past=None, keep=None):
    """Logits [T, n_vocab] of the tokens as one causal sequence from position 0; with
    until_last_mlp, the residual stream [T, n_embd] after the last layer's attention.
    past: the `keep` of an earlier call on a prefix (its K/V per layer): the tokens follow
    it. keep: a dict this call fills with every layer's K/V (past + these tokens)."""
    d, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps, base = d // nh, cfg["rms_norm_eps"], cfg["rope_theta"]
    W = weights
    x = W["model.embed_tokens.weight"][tokens]
    dt = x.dtype  # float64 for references, float32 to train fast: every buffer keeps it
    T = len(tokens)
    start = past["n"] if past else 0
    pos = np.arange(start, start + T, dtype=np.float64)
    mask = np.triu(np.full((T, start + T), -np.inf), start + 1).astype(dt)
    if keep is not None:
        keep["n"] = start + T
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = h @ W[p + "self_attn.q_proj.weight"].T + W.get(p + "self_attn.q_proj.bias", 0)
        k = h @ W[p + "self_attn.k_proj.weight"].T + W.get(p + "self_attn.k_proj.bias", 0)
        v = h @ W[p + "self_attn.v_proj.weight"].T + W.get(p + "self_attn.v_proj.bias", 0)
        q = rope_half(q.reshape(T, nh, hd), pos, base).astype(dt)
        k = rope_half(k.reshape(T, nkv, hd), pos, base).astype(dt)
        v = v.reshape(T, nkv, hd)
        if past:
            k = np.concatenate([past[layer][0], k])
            v = np.concatenate([past[layer][1], v])
        if keep is not None:
            keep[layer] = (k, v)
        rep = nh // nkv
        att = np.empty((T, nh, hd), dtype=dt)
        for hq in range(nh):
            s = q[:, hq, :] @ k[:, hq // rep, :].T / dt.type(np.sqrt(hd)) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, hq, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, hq // rep, :]
        x = x + att.reshape(T, nh * hd) @ W[p + "self_attn.o_proj.weight"].T
        if until_last_mlp and layer == cfg["num_hidden_layers"] - 1:
            return x
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ W[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return x @ head.T


def merged(weights, pairs, scale):
    w = dict(weights)
    for (layer, m), (a, b) in pairs.items():
        key = f"model.layers.{layer}.{PROJ[m][0]}.weight"
        w[key] = w[key] + scale * (b @ a)
    return w


def peft_to_gguf(peft_dir, out, arch, n_head, n_kv_head):
    with open(os.path.join(peft_dir, "adapter_config.json")) as f:
        config = json.load(f)
    tensors = read_safetensors(os.path.join(peft_dir, "adapter_model.safetensors"))
    pairs = {}
    for name, t in tensors.items():
        m = name.split(".")  # base_model.model.model.layers.N.<block>.<proj>.lora_X.weight
        key = (int(m[4]), m[6])
        a, b = pairs.get(key, (None, None))
        pairs[key] = (t, b) if m[7] == "lora_A" else (a, t)
    cfg = {"model_type": arch, "num_attention_heads": n_head, "num_key_value_heads": n_kv_head}
    write_gguf_adapter(out, pairs, config["lora_alpha"], cfg, arch)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="tiny Hugging Face folder (config.json, model.safetensors)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", help="comma-separated token ids")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--peft-to-gguf", help="convert this PEFT folder to a GGUF adapter (--out) and stop")
    ap.add_argument("--arch", default="llama")
    ap.add_argument("--heads", default="9,3", help="n_head,n_kv_head (for B's Q/K permutation)")
    args = ap.parse_args()
    if args.peft_to_gguf:
        n_head, n_kv = (int(x) for x in args.heads.split(","))
        peft_to_gguf(args.peft_to_gguf, args.out, args.arch, n_head, n_kv)
        print("wrote", args.out)
        return
    if not args.model or not args.tokens:
        ap.error("--model and --tokens are needed")
    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    weights = {}
    for fn in sorted(os.listdir(args.model)):
        if fn.endswith(".safetensors"):
            weights.update(read_safetensors(os.path.join(args.model, fn)))
    tokens = [int(t) for t in args.tokens.split(",")]
    rng = np.random.default_rng(args.seed)
    n_layer = cfg["num_hidden_layers"]
    os.makedirs(args.out, exist_ok=True)

    r1, alpha1 = 4, 8.0
    p1 = make_adapter(cfg, rng, r1, list(PROJ), range(n_layer))
    c1 = {"peft_type": "LORA", "r": r1, "lora_alpha": alpha1, "target_modules": list(PROJ),
          "use_rslora": False, "base_model_name_or_path": "tiny", "task_type": "CAUSAL_LM"}
    write_peft(os.path.join(args.out, "peft"), p1, c1)
    write_gguf_adapter(os.path.join(args.out, "adapter.gguf"), p1, alpha1, cfg, cfg["model_type"])
    # convert_lora_to_gguf.py's default --outtype f16; its reference merges the f16 values.
    p1h = {k: (a.astype(np.float16).astype(np.float64), b.astype(np.float16).astype(np.float64))
           for k, (a, b) in p1.items()}
    write_gguf_adapter(os.path.join(args.out, "adapter_f16.gguf"), p1h, alpha1, cfg, cfg["model_type"], np.float16)

    r2, alpha2 = 8, 4.0
    p2 = make_adapter(cfg, rng, r2, ["q_proj", "v_proj"], [min(1, n_layer - 1)])
    c2 = {"peft_type": "LORA", "r": r2, "lora_alpha": alpha2, "target_modules": ["v_proj", "q_proj"],
          "use_rslora": True, "layers_to_transform": [min(1, n_layer - 1)], "task_type": "CAUSAL_LM"}
    write_peft(os.path.join(args.out, "peft_rslora"), p2, c2)

    # Broken variants.
    write_peft(os.path.join(args.out, "bad_rank"), p1, dict(c1, r=8))
    missing = dict(p1)
    write_peft(os.path.join(args.out, "bad_missing"), missing, c1)
    t = read_safetensors(os.path.join(args.out, "bad_missing", "adapter_model.safetensors"))
    del t[peft_key(n_layer - 1, "down_proj", "B")]
    write_safetensors(os.path.join(args.out, "bad_missing", "adapter_model.safetensors"), t)
    shutil.rmtree(os.path.join(args.out, "bad_target"), ignore_errors=True)
    write_peft(os.path.join(args.out, "bad_target"), p1, dict(c1, target_modules=["c_attn"]))
    write_gguf_adapter(os.path.join(args.out, "bad_arch.gguf"), p1, alpha1, cfg, "gpt2")

    ref = {
        "tokens": tokens,
        "scale": {"peft": alpha1 / r1, "peft_rslora": alpha2 / np.sqrt(r2)},
        "logits": {
            "base": forward(weights, cfg, tokens).tolist(),
            "peft": forward(merged(weights, p1, alpha1 / r1), cfg, tokens).tolist(),
            "peft_rslora": forward(merged(weights, p2, alpha2 / np.sqrt(r2)), cfg, tokens).tolist(),
            "f16": forward(merged(weights, p1h, alpha1 / r1), cfg, tokens).tolist(),
        },
    }
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(ref, f)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
