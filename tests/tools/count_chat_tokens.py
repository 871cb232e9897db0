#!/usr/bin/env python3
"""Counts the tokens of a conversation as SmolLM2-Instruct sees it, independently of KV Scope:
the vocabulary and merges read from the GGUF with gguf-py, a Hugging Face `tokenizers` BPE
(SmolLM2's pre-tokenizer: digits split, byte-level), and the conversation written in ChatML
as SmolLM2's chat template renders it (its default system prompt when the first message is
not a system one, then the assistant generation prompt).

usage: count_chat_tokens.py MODEL.gguf MESSAGES.json   (a JSON list of {role, content})
prints the number of tokens.
"""
import json
import sys

import gguf
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def smollm2_tokenizer(path):
    r = gguf.GGUFReader(path)
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)},
                               merges=[tuple(m.split(" ")) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in range(len(tokens)) if types[i] == 3])
    return tok


def chatml(messages):
    text = ""
    if not messages or messages[0]["role"] != "system":
        text += "<|im_start|>system\n" + DEFAULT_SYSTEM + "<|im_end|>\n"
    for m in messages:
        text += "<|im_start|>" + m["role"] + "\n" + m["content"] + "<|im_end|>\n"
    return text + "<|im_start|>assistant\n"


def main():
    tok = smollm2_tokenizer(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        messages = json.load(f)
    print(len(tok.encode(chatml(messages)).ids))


if __name__ == "__main__":
    main()
