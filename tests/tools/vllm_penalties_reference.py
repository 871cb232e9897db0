#!/usr/bin/env python3
"""vLLM's penalties, transcribed with numpy (tst_vllm_penalties checks the engine against it).

vllm/model_executor/layers/utils.py (v0.10):

    def apply_penalties(logits, prompt_tokens_tensor, output_tokens_tensor,
                        presence_penalties, frequency_penalties, repetition_penalties):
        num_seqs, vocab_size = logits.shape
        _, prompt_mask = get_token_bin_counts_and_mask(prompt_tokens_tensor, vocab_size, num_seqs)
        output_bin_counts, output_mask = get_token_bin_counts_and_mask(output_tokens_tensor, vocab_size, num_seqs)
        repetition_penalties = repetition_penalties.unsqueeze(dim=1).repeat(1, vocab_size)
        repetition_penalties[~(prompt_mask | output_mask)] = 1.0
        logits = torch.where(logits > 0, logits / repetition_penalties, logits * repetition_penalties)
        logits -= frequency_penalties.unsqueeze(dim=1) * output_bin_counts
        logits -= presence_penalties.unsqueeze(dim=1) * output_mask
        return logits

Reads {"cases": [{"logits": [...], "prompt": [...], "output": [...], "presence": p,
"frequency": f, "repetition": r}]} from the file named by the first argument, writes {"logits": [[...], ...]} (float32
arithmetic, as vLLM's float32 logits) on stdout.
"""
import json
import sys

import numpy as np


def bin_counts(tokens, vocab_size):
    counts = np.zeros(vocab_size + 1, dtype=np.int64)  # vLLM pads with vocab_size, then drops that bin
    np.add.at(counts, np.asarray(tokens, dtype=np.int64), 1)
    counts = counts[:vocab_size]
    return counts, counts > 0


def apply_penalties(logits, prompt, output, presence, frequency, repetition):
    vocab_size = logits.shape[0]
    _, prompt_mask = bin_counts(prompt, vocab_size)
    output_counts, output_mask = bin_counts(output, vocab_size)
    rep = np.full(vocab_size, repetition, dtype=np.float32)
    rep[~(prompt_mask | output_mask)] = 1.0
    logits = np.where(logits > 0, logits / rep, logits * rep).astype(np.float32)
    logits -= np.float32(frequency) * output_counts.astype(np.float32)
    logits -= np.float32(presence) * output_mask.astype(np.float32)
    return logits


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        data = json.load(f)
    out = []
    for c in data["cases"]:
        l = apply_penalties(np.asarray(c["logits"], dtype=np.float32), c["prompt"], c["output"],
                            c["presence"], c["frequency"], c["repetition"])
        out.append([float(x) for x in l])
    json.dump({"logits": out}, sys.stdout)


if __name__ == "__main__":
    main()
