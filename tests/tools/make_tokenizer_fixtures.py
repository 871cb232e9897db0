#!/usr/bin/env python3
"""Writes the tokenizer and chat-template fixtures that tests/tst_tokenizer.cpp checks against.

The reference is the Hugging Face `tokenizers` package (an independent Rust implementation)
and `jinja2` (the engine Hugging Face uses to render chat templates):

  (a) builds an HF tokenizer.json for the default model (SmolLM2-135M-Instruct) from its GGUF
      metadata (tokens, merges, control tokens) with the pre-tokenizer SmolLM2 ships:
      Sequence[Digits(individual_digits), ByteLevel], and sanity-checks it;
  (b) encodes a corpus with it -> tests/fixtures/tokenizer_smollm2.json;
  (c) trains three small synthetic tokenizers (Llama-3 regex split + byte-level BPE, Qwen2
      regex split + byte-level BPE, and a SentencePiece-style byte-fallback BPE as
      Llama-2/TinyLlama ship it) -> tests/fixtures/tokenizer_<name>_synth.json (the
      tokenizer.json itself) + tokenizer_<name>_synth_expected.json (corpus ids);
  (d) renders the SmolLM2 (from the GGUF), Llama-3 and Llama-2 chat templates with jinja2
      -> tests/fixtures/chat_templates.json.

Usage: python3 tests/tools/make_tokenizer_fixtures.py [path/to/SmolLM2-135M-Instruct.Q4_1.gguf]
Needs: pip install gguf tokenizers jinja2
"""
import json
import os
import sys

import gguf
import jinja2
import jinja2.ext
import jinja2.sandbox
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "fixtures"))
DEFAULT_GGUF = os.path.expanduser("~/.local/share/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf")

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    ("english", "The quick brown fox jumps over the lazy dog. It was a bright cold day in April."),
    ("korean", "안녕하세요, 세계! 오늘 날씨가 정말 좋네요."),
    ("chinese", "我们今天去公园散步，天气很好。机器学习是人工智能的一个分支。"),
    ("japanese_mixed", "東京タワーは333メートルです。Tokyo Tower is 333 m tall."),
    ("code_indent", "def add(a, b):\n    if a > b:\n        return a + b\n    return b - a\n\n\nclass Foo:\n\tpass\n"),
    ("code_cpp", "for (int i = 0; i < n; ++i) {\n  x[i] += y[i] * 2;  // axpy\n}"),
    ("emoji", "I love pizza 🍕🍕 and cats 😺! 👍🏽"),
    ("emoji_zwj", "Family: 👨‍👩‍👧‍👦, flag: 🏳️‍🌈, 🧑🏿‍💻 coder"),
    ("whitespace_runs", "a   \n\n\tb    c\n \n  d  "),
    ("only_whitespace", "   \n\n\t"),
    ("numbers", "12345 3.14 1,000,000 and 2024-06-01 x2 0.5e-10"),
    ("contractions", "don't I'll we're they've she'd it's YOU'RE I'M"),
    ("special_tokens", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
    ("special_inline", "text before<|endoftext|>after <|im_end|> end"),
    ("special_llama", "<|begin_of_text|>hi<|eot_id|> <s>[INST] x [/INST]</s>"),
    ("mixed_scripts", "Привет мир, hello κόσμε, مرحبا بالعالم, שלום עולם, नमस्ते दुनिया"),
    ("accented_latin", "Café naïve résumé über façade Ångström São Paulo Łódź"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis " + "a" * 300 + " "
     + "xyz" * 120),
    ("long_url", "https://example.com/some/very/long/path/with_underscores-and-dashes?query=1&other=two#frag"),
    ("punctuation", "Hello!!! What?? ... (yes) [no] {maybe} \"quoted\" 'single' -- — … «»"),
    ("control_chars", "tab\there\r\nwindows line\u00a0nbsp\u2009thin"),
    ("empty", ""),
    ("single_space", " "),
    ("leading_space", " leading space and trailing  "),
]


def build_smollm2_tokenizer(gguf_path):
    r = gguf.GGUFReader(gguf_path)
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()
    assert r.fields["tokenizer.ggml.pre"].contents() == "smollm"
    vocab = {t: i for i, t in enumerate(tokens)}
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    control = [tokens[i] for i in range(len(tokens)) if types[i] == 3]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    template = r.fields["tokenizer.chat_template"].contents()
    return tok, template, tokens


def sanity_check_smollm2(tok, tokens):
    # Known facts about SmolLM2's tokenizer (from its HF tokenizer.json): control tokens are
    # single ids, a space before a word is part of the word's token, digits are split.
    assert tok.encode("<|im_start|>").ids == [1], tok.encode("<|im_start|>").ids
    assert tok.encode("<|im_end|>").ids == [2]
    assert tok.encode("<|endoftext|>").ids == [0]
    ids = tok.encode(" the").ids
    assert len(ids) == 1 and tokens[ids[0]] == "Ġthe", ids
    ids = tok.encode("12345").ids
    assert [tokens[i] for i in ids] == list("12345"), [tokens[i] for i in ids]
    ids = tok.encode(" 42").ids
    assert [tokens[i] for i in ids] == ["Ġ", "4", "2"], [tokens[i] for i in ids]
    ids = tok.encode("Hello world").ids
    assert [tokens[i] for i in ids] == ["Hello", "Ġworld"], [tokens[i] for i in ids]
    for name, text in CORPUS:
        assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text, name


def corpus_rows(tok):
    rows = []
    for name, text in CORPUS:
        ids = tok.encode(text).ids
        rows.append({"name": name, "text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    return rows


TRAIN_TEXT = [
    "The quick brown fox jumps over the lazy dog while the other dogs sleep in the sun.",
    "Machine learning models learn patterns from data; language models predict the next token.",
    "def main():\n    print('hello world')\n    return 0\n",
    "for i in range(10):\n        total += i * i\n",
    "We're going to the park. They'll come later, won't they? I'd like that, it's fine.",
    "Numbers like 2024, 3.14159 and 1000000 appear in text 42 times out of 100.",
    "Paged attention stores the key value cache in fixed size blocks of sixteen tokens.",
    "The scheduler batches requests continuously and preempts sequences when memory runs out.",
    "Café résumé naïve über São Paulo, Ångström; the façade was beautiful.",
    "Hello hello HELLO Hello! What's up? Nothing much, just tokenizing some text.",
    "Привет мир! Это проверка токенизатора на русском языке.",
    "   indented line\n\tanother\n\n\nblank lines above and spaces    between   words",
] * 3


def train_byte_level(split_regex):
    tok = Tokenizer(models.BPE(ignore_merges=split_regex == LLAMA3_REGEX))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split_regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"] if split_regex == LLAMA3_REGEX \
        else ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=specials)
    tok.train_from_iterator(TRAIN_TEXT, trainer=trainer)
    return tok


def train_spm_style():
    """A SentencePiece-style BPE laid out as Llama-2's tokenizer.json: <unk>, <s>, </s>, the 256
    <0xNN> byte tokens, then pieces ordered by score; merges are every split of a piece into
    two pieces, ordered by the merged piece (what HF's SentencePiece converter writes), so that
    rank order equals score order."""
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=500, min_frequency=2, show_progress=False, limit_alphabet=60,
                                  special_tokens=["<unk>"])
    base.train_from_iterator(TRAIN_TEXT, trainer=trainer)
    trained = sorted(base.get_vocab().items(), key=lambda kv: kv[1])
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    pieces += [t for t, _ in trained if t not in ("<unk>",)]
    vocab = {t: i for i, t in enumerate(pieces)}
    merges = []
    for piece in pieces[259:]:
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                merges.append((vocab[piece], vocab[left], vocab[right], left, right))
    merges.sort()
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(m[3], m[4]) for m in merges], unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<unk>", "<s>", "</s>")])
    return tok


def write_json(name, obj, compact=False):
    path = os.path.join(FIXTURES, name)
    with open(path, "w", encoding="utf-8") as f:
        if compact:
            json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        else:
            json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def write_synthetic(name, tok, config):
    path = os.path.join(FIXTURES, f"tokenizer_{name}_synth.json")
    tok.save(path, pretty=False)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    assert os.path.getsize(path) < 100_000
    write_json(f"tokenizer_{name}_synth_config.json", config)
    rows = corpus_rows(tok)
    for row in rows:
        row["tokens"] = [tok.id_to_token(i) for i in row["ids"]]
    write_json(f"tokenizer_{name}_synth_expected.json", {"cases": rows})


LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")

CONVERSATIONS = [
    ("single_user", [{"role": "user", "content": "Hello!"}]),
    ("system_user", [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}]),
    ("multi_turn", [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello! How can I help?"},
                    {"role": "user", "content": "Tell me a joke."}]),
    ("system_multi_turn", [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "  padded  \n"},
                           {"role": "assistant", "content": "\nSure: 안녕 😺 "}, {"role": "user", "content": "More"}]),
]


def render(template, messages, add_generation_prompt, bos_token, eos_token):
    # The environment Hugging Face's apply_chat_template uses.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                            bos_token=bos_token, eos_token=eos_token)


def chat_rows(smollm_template):
    formats = [("ChatML", smollm_template, "", "<|im_end|>"),
               ("Llama3", LLAMA3_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>"),
               ("Llama2", LLAMA2_TEMPLATE, "<s>", "</s>")]
    rows = []
    for fmt, template, bos, eos in formats:
        for name, messages in CONVERSATIONS:
            for gen in (True, False):
                for bos_text in ((bos, "") if bos else ("",)):
                    rows.append({"format": fmt, "name": name, "messages": messages, "add_generation_prompt": gen,
                                 "bos_token": bos_text, "eos_token": eos,
                                 "rendered": render(template, messages, gen, bos_text, eos)})
    return {"templates": {"ChatML": smollm_template, "Llama3": LLAMA3_TEMPLATE, "Llama2": LLAMA2_TEMPLATE},
            "cases": rows}


def main():
    gguf_path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_GGUF
    os.makedirs(FIXTURES, exist_ok=True)
    tok, template, tokens = build_smollm2_tokenizer(gguf_path)
    sanity_check_smollm2(tok, tokens)
    if os.environ.get("KVS_SMOLLM2_TOKENIZER_JSON"):  # optional: the full tokenizer.json, for debugging
        tok.save(os.environ["KVS_SMOLLM2_TOKENIZER_JSON"])
    write_json("tokenizer_smollm2.json", {"model": os.path.basename(gguf_path), "cases": corpus_rows(tok)})

    write_synthetic("llama3", train_byte_level(LLAMA3_REGEX),
                    {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "add_bos_token": True,
                     "chat_template": LLAMA3_TEMPLATE})
    write_synthetic("qwen2", train_byte_level(QWEN2_REGEX),
                    {"bos_token": None, "eos_token": "<|im_end|>", "add_bos_token": False,
                     "chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
                                      "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"})
    write_synthetic("spm", train_spm_style(),
                    {"bos_token": {"content": "<s>", "special": True}, "eos_token": "</s>", "add_bos_token": True,
                     "chat_template": LLAMA2_TEMPLATE})
    write_json("chat_templates.json", chat_rows(template))


if __name__ == "__main__":
    main()
