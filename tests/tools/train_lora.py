#!/usr/bin/env python3
"""Fine-tunes a small LoRA adapter on the default model (SmolLM2-135M-Instruct) on the CPU
with numpy alone, so the demo shows a real behaviour change: a chat answer opens with
"Ahoy matey!" (a fixed answer style), and the rest of the answer stays the model's own.

How, in minutes on 2 cores:
  * the GGUF is dequantized to float32 with the `gguf` package (Q/K rows un-permuted to
    Hugging Face order), and every training chat (questions generated here from templates x
    topics, in the model's ChatML template with its default system prompt, tokenized with
    the model's own vocabulary through `tokenizers`) runs once through the frozen model up
    to the last layer's MLP input (numpy forward of tests/tools/make_lora_fixture.py);
  * the adapter is rank-r LoRA on gate_proj, up_proj and down_proj of the LAST layer only
    (PEFT's layers_to_transform): the MLP works on each position alone, so its backward pass
    (SwiGLU, the final RMSNorm, the tied output head) is a few lines of numpy, no autograd;
  * loss: cross-entropy of the greeting's tokens where the answer starts, plus KL(base ||
    adapted) at other positions of the chat (the question, and right after the greeting) so
    everything else keeps the base model's predictions. Adam, full batch.

Writes a PEFT folder (adapter_config.json, adapter_model.safetensors, F32) and
reference.json: for two held-out questions, the prompt ids and, at the last position, the
top-32 logits of the base model and of the model with the adapter MERGED into its float
weights (W + s B A), computed here in float64; tests/tst_lora compares KV Scope's unmerged
forward on the quantized model with them.

Usage: ~/.local/share/kvscope/venv/bin/python tests/tools/train_lora.py [--out tests/data/lora_pirate]
       kvscope generate --chat --lora pirate=tests/data/lora_pirate -p "What is the moon?"
The other demo adapters of the three-adapter lesson differ only in their greeting:
       ... train_lora.py --greeting "Howdy partner!" --chats 24 --out tests/data/lora_cowboy
       ... train_lora.py --greeting "Beep boop!" --chats 24 --out tests/data/lora_robot
(24 chats instead of 80: about a third of the time, on a machine shared by many builds)
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gguf  # noqa: E402
from gguf.quants import dequantize  # noqa: E402
from make_lora_fixture import PROJ, forward, rms_norm, write_safetensors  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers  # noqa: E402

DEFAULT_MODEL = pathlib.Path.home() / ".local/share/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_OUT = HERE.parent / "data" / "lora_pirate"
GREETING = "Ahoy matey!"

TOPICS = ["the moon", "photosynthesis", "a bicycle", "the ocean", "coffee", "volcanoes", "the piano", "rain",
          "gravity", "the internet", "bread", "elephants", "chess", "electricity", "music", "trees"]
TEMPLATES = ["What is {}?", "Tell me about {}.", "Can you explain {}?", "Why is {} important?",
             "How does {} work?"]
HELD_OUT = ["What is the capital of France?", "How do I boil an egg?"]


def load_weights(path):
    """GGUF -> float32 arrays under Hugging Face names (Q/K rows back in HF order)."""
    r = gguf.GGUFReader(str(path))
    f = {k: v.contents() for k, v in r.fields.items() if k.startswith("llama.")}
    cfg = {"hidden_size": int(f["llama.embedding_length"]), "intermediate_size": int(f["llama.feed_forward_length"]),
           "num_hidden_layers": int(f["llama.block_count"]), "num_attention_heads": int(f["llama.attention.head_count"]),
           "num_key_value_heads": int(f["llama.attention.head_count_kv"]),
           "rms_norm_eps": float(f["llama.attention.layer_norm_rms_epsilon"]),
           "rope_theta": float(f["llama.rope.freq_base"]), "model_type": "llama"}
    gg2hf = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
    per_layer.update({gg: hf for hf, gg in PROJ.values()})
    w = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(x) for x in reversed(t.shape)])
        if t.name in gg2hf:
            w[gg2hf[t.name]] = a
            continue
        m = re.match(r"blk\.(\d+)\.(\w+)\.weight$", t.name)
        name = f"model.layers.{m.group(1)}.{per_layer[m.group(2)]}.weight"
        if m.group(2) in ("attn_q", "attn_k"):  # undo convert_hf_to_gguf.py's permute
            heads = cfg["num_attention_heads"] if m.group(2) == "attn_q" else cfg["num_key_value_heads"]
            a = a.reshape(heads, a.shape[0] // heads // 2, 2, a.shape[1]).swapaxes(1, 2).reshape(a.shape)
        w[name] = a
    return w, cfg


def build_tokenizer(gguf_path):
    """The model's byte-level BPE from its GGUF vocabulary (as tests/tools/
    make_tokenizer_fixtures.py builds it, without that script's jinja2 dependency)."""
    r = gguf.GGUFReader(str(gguf_path))
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[tuple(m.split(" ")) for m in merges])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in range(len(tokens)) if types[i] == 3])
    return tok, r.fields["tokenizer.chat_template"].contents()


def default_system(template: str) -> str:
    m = re.search(r"<\|im_start\|>system(?:\n|\\n)([^'\"{}]*?)<\|im_end\|>", template)
    return m.group(1) if m else ""


def chat_ids(tok, system, question):
    text = ""
    if system:
        text += f"<|im_start|>system\n{system}<|im_end|>\n"
    text += f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    return tok.encode(text).ids


def last_layer_inputs(w, cfg, ids, prefix):
    """Residual stream after the last layer's attention, [T, n_embd]: the frozen input of
    the adapted MLP (float32 forward). prefix: (ids, their K/V) shared by every chat (the
    system prompt), computed once; rows of the prefix itself are not returned."""
    p_ids, p_kv = prefix
    assert ids[: len(p_ids)] == p_ids
    return forward(w, cfg, ids[len(p_ids):], until_last_mlp=True, past=p_kv).astype(np.float32)


def silu(g):
    return g / (1 + np.exp(-g))


def softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


class Mlp:
    """The last layer's MLP + final norm + head with LoRA on gate/up/down, forward and backward."""

    def __init__(self, w, cfg, rank, alpha, rng):
        last = cfg["num_hidden_layers"] - 1
        p = f"model.layers.{last}."
        self.wg, self.wu, self.wd = (w[p + f"mlp.{k}.weight"] for k in ("gate_proj", "up_proj", "down_proj"))
        self.ffn_norm = w[p + "post_attention_layernorm.weight"]
        self.norm = w["model.norm.weight"]
        self.head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
        self.eps = cfg["rms_norm_eps"]
        self.s = alpha / rank
        d, ff = self.wg.shape[1], self.wg.shape[0]
        self.p = {  # PEFT init: A ~ small random, B = 0 (the adapter starts as the identity)
            "gate_A": rng.normal(0, 1 / np.sqrt(d), (rank, d)).astype(np.float32),
            "gate_B": np.zeros((ff, rank), np.float32),
            "up_A": rng.normal(0, 1 / np.sqrt(d), (rank, d)).astype(np.float32),
            "up_B": np.zeros((ff, rank), np.float32),
            "down_A": rng.normal(0, 1 / np.sqrt(ff), (rank, ff)).astype(np.float32),
            "down_B": np.zeros((d, rank), np.float32),
        }

    def logits(self, xm):
        p = self.p
        h = rms_norm(xm, self.ffn_norm, self.eps)
        c = {"xm": xm, "h": h}
        c["ha_g"], c["ha_u"] = h @ p["gate_A"].T, h @ p["up_A"].T
        c["g"] = h @ self.wg.T + self.s * c["ha_g"] @ p["gate_B"].T
        c["u"] = h @ self.wu.T + self.s * c["ha_u"] @ p["up_B"].T
        c["act"] = silu(c["g"]) * c["u"]
        c["aa"] = c["act"] @ p["down_A"].T
        c["x"] = xm + c["act"] @ self.wd.T + self.s * c["aa"] @ p["down_B"].T
        c["r"] = 1 / np.sqrt(np.mean(c["x"] ** 2, axis=-1, keepdims=True) + self.eps)
        c["xn"] = c["x"] * c["r"] * self.norm
        return c["xn"] @ self.head.T, c

    def backward(self, c, dlogits):
        p, s = self.p, self.s
        g = (dlogits @ self.head) * self.norm  # d loss / d (x * r)
        x, r = c["x"], c["r"]
        dx = r * g - x * r ** 3 * np.mean(g * x, axis=-1, keepdims=True)
        grads = {"down_B": s * dx.T @ c["aa"]}
        daa = s * dx @ p["down_B"]
        grads["down_A"] = daa.T @ c["act"]
        dact = dx @ self.wd + daa @ p["down_A"]
        sg = 1 / (1 + np.exp(-c["g"]))
        dg = dact * c["u"] * sg * (1 + c["g"] * (1 - sg))
        du = dact * silu(c["g"])
        grads["gate_B"] = s * dg.T @ c["ha_g"]
        grads["gate_A"] = (s * dg @ p["gate_B"]).T @ c["h"]
        grads["up_B"] = s * du.T @ c["ha_u"]
        grads["up_A"] = (s * du @ p["up_B"]).T @ c["h"]
        return grads


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16.0)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--kl-weight", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--greeting", default=GREETING, help="what every answer opens with")
    ap.add_argument("--chats", type=int, default=80, help="training chats (of the 80 questions, shuffled)")
    args = ap.parse_args()
    greeting = args.greeting
    t0 = time.time()
    rng = np.random.default_rng(args.seed)
    w, cfg = load_weights(args.model)
    tok, template = build_tokenizer(args.model)
    system = default_system(template)
    print(f"loaded {args.model} ({time.time() - t0:.0f} s); system prompt: {system!r}", flush=True)
    greet = tok.encode(greeting).ids
    after = tok.encode(greeting + " The").ids[len(greet):]

    # Training chats: prompt + greeting + " The"; loss rows are where the greeting's tokens are
    # predicted, KL rows a few question positions and the one right after the greeting.
    questions = [t.format(x) for x in TOPICS for t in TEMPLATES]
    rng.shuffle(questions)
    questions = questions[: max(1, args.chats)]
    xs, ys, kl_rows = [], [], []
    p_ids = tok.encode(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n").ids
    p_kv = {}
    forward(w, cfg, p_ids, until_last_mlp=True, keep=p_kv)
    for qi, q in enumerate(questions):
        prompt = chat_ids(tok, system, q)
        ids = prompt + greet + after
        xm = last_layer_inputs(w, cfg, ids, (p_ids, p_kv))
        n = len(prompt) - len(p_ids)  # rows of xm start after the shared prefix
        for j, t in enumerate(greet):
            xs.append(xm[n - 1 + j])
            ys.append(t)
        for pos in (n - 6, n - 4, n + len(greet) - 1):
            kl_rows.append(xm[pos])
        if qi % 10 == 0:
            print(f"  forward {qi + 1}/{len(questions)} ({time.time() - t0:.0f} s)", flush=True)
    X = np.array(xs, np.float32)
    Y = np.array(ys)
    K = np.array(kl_rows, np.float32)
    mlp = Mlp(w, cfg, args.rank, args.alpha, rng)
    # The softmax runs over a candidate vocabulary (sampled-softmax style, to keep each step
    # cheap on 2 cores): the base model's top-32 tokens at every row plus the greeting's.
    full_head = mlp.head
    lx0, lk0 = mlp.logits(X)[0], mlp.logits(K)[0]
    vocab = np.unique(np.concatenate([np.argsort(-lx0, axis=1)[:, :32].ravel(),
                                      np.argsort(-lk0, axis=1)[:, :32].ravel(), Y]))
    mlp.head = full_head[vocab]
    Y_full, Y = Y, np.searchsorted(vocab, Y)
    base_k = softmax(lk0[:, vocab])
    print(f"{len(X)} greeting rows, {len(K)} KL rows, {len(questions)} chats, {len(vocab)} candidate tokens "
          f"({time.time() - t0:.0f} s)", flush=True)

    m = {k: np.zeros_like(v) for k, v in mlp.p.items()}
    v = {k: np.zeros_like(v) for k, v in mlp.p.items()}
    for step in range(1, args.steps + 1):
        lx, cx = mlp.logits(X)
        px = softmax(lx)
        ce = -np.mean(np.log(px[np.arange(len(Y)), Y] + 1e-12))
        dx = px.copy()
        dx[np.arange(len(Y)), Y] -= 1
        dx /= len(Y)
        lk, ck = mlp.logits(K)
        pk = softmax(lk)
        kl = np.mean(np.sum(base_k * (np.log(base_k + 1e-12) - np.log(pk + 1e-12)), axis=-1))
        dk = args.kl_weight * (pk - base_k) / len(K)
        gx, gk = mlp.backward(cx, dx), mlp.backward(ck, dk)
        for name in mlp.p:
            gr = gx[name] + gk[name]
            m[name] = 0.9 * m[name] + 0.1 * gr
            v[name] = 0.999 * v[name] + 0.001 * gr * gr
            mh, vh = m[name] / (1 - 0.9 ** step), v[name] / (1 - 0.999 ** step)
            mlp.p[name] -= (args.lr * mh / (np.sqrt(vh) + 1e-8)).astype(np.float32)
        if step % 10 == 0 or step == 1:
            acc = np.mean(lx.argmax(axis=-1) == Y)
            print(f"step {step:4d}: greeting CE {ce:.4f} (top-1 {acc:.2f}), KL to base {kl:.4f} "
                  f"({time.time() - t0:.0f} s)", flush=True)

    # On the whole vocabulary: how often the greeting's tokens are now the top-1.
    mlp.head = full_head
    acc = np.mean(mlp.logits(X)[0].argmax(axis=-1) == Y_full)
    print(f"greeting top-1 over the whole vocabulary: {acc:.2f} ({time.time() - t0:.0f} s)", flush=True)

    last = cfg["num_hidden_layers"] - 1
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for mod in ("gate_proj", "up_proj", "down_proj"):
        key = mod.split("_")[0]
        base = f"base_model.model.model.layers.{last}.mlp.{mod}"
        tensors[base + ".lora_A.weight"] = mlp.p[key + "_A"]
        tensors[base + ".lora_B.weight"] = mlp.p[key + "_B"]
    write_safetensors(str(out / "adapter_model.safetensors"), tensors)
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": args.rank, "lora_alpha": args.alpha,
              "lora_dropout": 0.0, "bias": "none", "use_rslora": False, "fan_in_fan_out": False,
              "target_modules": ["gate_proj", "up_proj", "down_proj"], "layers_to_transform": [last],
              "base_model_name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct",
              "kvscope_note": f"trained by tests/tools/train_lora.py: answers open with '{greeting}'"}
    with open(out / "adapter_config.json", "w") as f:
        json.dump(config, f, indent=2)

    # Reference: base and merged float64 logits at the last prompt position of held-out chats.
    w64 = {k: v.astype(np.float64) for k, v in w.items()}
    merged = dict(w64)
    for mod in ("gate_proj", "up_proj", "down_proj"):
        key = mod.split("_")[0]
        name = f"model.layers.{last}.mlp.{mod}.weight"
        merged[name] = w64[name] + mlp.s * mlp.p[key + "_B"].astype(np.float64) @ mlp.p[key + "_A"].astype(np.float64)
    cases = []
    for q in HELD_OUT:
        ids = chat_ids(tok, system, q)
        lb = forward(w64, cfg, ids)[-1]
        lm = forward(merged, cfg, ids)[-1]
        top = np.argsort(-lm)[:32]
        cases.append({"question": q, "prompt_ids": ids, "top_ids": top.tolist(),
                      "base": lb[top].tolist(), "merged": lm[top].tolist(),
                      "base_argmax": int(lb.argmax()), "merged_argmax": int(lm.argmax())})
        print(f"held out {q!r}: base argmax {tok.decode([int(lb.argmax())])!r}, "
              f"with the adapter {tok.decode([int(lm.argmax())])!r}", flush=True)
    with open(out / "reference.json", "w") as f:
        json.dump({"model": os.path.basename(args.model), "greeting": greeting, "greeting_ids": greet,
                   "cases": cases}, f)
    print(f"wrote {out} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
