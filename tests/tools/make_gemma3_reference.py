#!/usr/bin/env python3
"""Reference token ids and logits for Gemma 3 270M (Q4_K_M GGUF), computed by llama.cpp.

Writes tests/fixtures/gemma3_reference.json, in the layout of make_llama_reference.py (whose
functions it reuses; read its docstring for what each field means):
  - "tokenizer": for a set of texts (multilingual, emoji, whitespace runs, code, special
    tokens), llama.cpp's ids with add_bos=True and parse_special=True, and for some also
    with parse_special=False.
  - "cases": prompts (plain text, Gemma chat turns, and one longer than the model's
    512-position sliding window, so its local layers really slide) with the prompt ids,
    greedy continuation ids, top-1 margins, top-20 logits of the first positions, and the
    same under llama.cpp's other valid configurations (flash attention, F32 KV cache, the
    prompt fed one token per call): llama.cpp's own spread.

Set-up: as make_llama_reference.py (the venv with llama-cpp-python on the llama.cpp that
tests/tools/bench_llamacpp.sh --build-only builds), the model from
installer/fetch_model.sh gemma3-270m. Then:
    /opt/kvscope-ref-venv/bin/python tests/tools/make_gemma3_reference.py [--model M] [--out F]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_llama_reference as ref  # noqa: E402

DEFAULT_MODEL = pathlib.Path.home() / ".local/share/kvscope/models/gemma-3-270m-q4_k_m.gguf"
DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "gemma3_reference.json"
N_CTX = 1024
N_GENERATE = 32


def gemma_chat(turns: list[tuple[str, str]]) -> str:
    """Gemma 3's chat template (the GGUF carries none; this is Google's), generation prompt
    added, without the leading <bos> (the tokenizer adds it)."""
    text = ""
    for role, content in turns:
        text += f"<start_of_turn>{'model' if role == 'assistant' else role}\n{content.strip()}<end_of_turn>\n"
    return text + "<start_of_turn>model\n"


TOKENIZER_TEXTS: list[tuple[str, str, bool]] = [  # (name, text, also without parse_special)
    ("plain", "Hello world! This is a test.", False),
    ("leading_space", " Hello", False),
    ("spaces_runs", "a  b   c    d\t\te\n\n\nf", False),
    ("only_spaces", "     ", False),
    ("newlines", "\n\nline one\r\nline two\n", False),
    ("french_german", "Bonjour, je m'appelle Marie. Ich komme aus Berlin und heiße Jürgen.", False),
    ("cjk", "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.", False),
    ("arabic_hindi_russian", "مرحبا بالعالم. नमस्ते दुनिया। Привет, мир!", False),
    ("emoji", "I love pizza 🍕🍕 and cats 🐈‍⬛! 👍🏽 🇫🇷", False),
    ("rare_chars", "∑_{i=1}^{n} x_i ≤ ∞ — «quotes» ‘single’ … ℃ ﬁ", False),
    ("code", 'def f(x):\n    return {"a": [1, 2, 3], "b": x ** 2}  # comment\n', False),
    ("numbers", "3.14159 2026-11-26 1,000,000 0x1F 12345678901234567890", False),
    ("special_turns", "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", True),
    ("special_inline", "text <bos> and <eos> and <pad> inside", True),
    ("html_like", "<div class=\"x\"><p>Hi</p></div> <br> <unused0>", True),
    ("byte_fallback", "\u0001\u0002 control \u007f and \U0001F9FF \U000E0041", False),
    ("empty", "", False),
]

LONG_PARAGRAPH = (
    "The history of computing stretches back far beyond the electronic machines of the twentieth century. "
    "Mechanical calculators such as Pascal's arithmetic machine and Leibniz's stepped reckoner showed that "
    "arithmetic could be automated with gears and levers. In the nineteenth century, Charles Babbage designed "
    "the Analytical Engine, a general-purpose machine with a store for numbers and a mill for operating on "
    "them, and Ada Lovelace wrote what many consider the first program for it. "
)
LONG_SECTIONS = [
    "Chapter one: the mechanical age. ", "Chapter two: relays and tubes. ", "Chapter three: the transistor. ",
    "Chapter four: integrated circuits. ", "Chapter five: the personal computer. ",
    "Chapter six: networks. ", "Chapter seven: the web. ",
]
# > 512 tokens: the local layers' window slides before the last positions.
LONG_PROMPT = "".join(s + LONG_PARAGRAPH for s in LONG_SECTIONS) + "In summary, the single most important invention was"

PROMPTS: list[tuple[str, str]] = [
    ("story_opening", "Once upon a time, in a small village at the edge of a vast forest, there lived"),
    ("chat_factual", gemma_chat([("user", "What is the capital of Australia, and why was it chosen?")])),
    ("list", "Here is a list of five fruits:\n1. Apple\n2."),
    ("multilingual", "Bonjour, je m'appelle Marie. Ich komme aus Berlin. 東京は日本の首都です。 El tiempo hoy es"),
    ("chat_multi_turn", gemma_chat([
        ("user", "Give me a one-word name for a grey cat."),
        ("assistant", "Smokey"),
        ("user", "Now suggest a name for its sister, who is white, and explain why."),
    ])),
    ("code_completion", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'),
    ("long_past_window", LONG_PROMPT),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=pathlib.Path, default=DEFAULT_MODEL)
    ap.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if not args.model.is_file():
        print(f"make_gemma3_reference.py: model file '{args.model}' not found "
              "(installer/fetch_model.sh gemma3-270m)", file=sys.stderr)
        return 1

    import llama_cpp
    from llama_cpp import Llama

    ref.N_GENERATE = N_GENERATE

    # logits_all=False: llama.cpp computes only the last row (262144 x n_prompt logits would
    # cost more than the model); read it straight from the context, as ref.last_logits would
    # read llm.scores. n_batch = N_CTX so the default run evaluates each prompt as one batch.
    def load(**extra):
        kw = {"n_batch": N_CTX, **extra}
        return Llama(model_path=str(args.model), n_ctx=N_CTX, logits_all=False, n_threads=args.threads,
                     n_threads_batch=args.threads, seed=0, verbose=False, **kw)

    def last_logits(llm) -> np.ndarray:
        return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float32, copy=True)

    ref.last_logits = last_logits

    llm = load()
    vocab = llm._model.vocab  # noqa: SLF001
    n_vocab = llm.n_vocab()
    eog_ids = {i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)}

    tokenizer = []
    for name, text, plain_too in TOKENIZER_TEXTS:
        entry = {"name": name, "text": text,
                 "ids": [int(t) for t in llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)]}
        if plain_too:
            entry["ids_no_special"] = [int(t) for t in llm.tokenize(text.encode("utf-8"), add_bos=True,
                                                                     special=False)]
        tokenizer.append(entry)

    cases = []
    for name, text in PROMPTS:
        # ref.run_prompt tokenizes with add_bos=False: Gemma wants <bos>, so put it in the text
        case = ref.run_prompt(llm, name, "<bos>" + text, eog_ids)
        case["prompt"] = text
        print(f"{name:24s} prompt {len(case['prompt_ids']):3d} tokens  "
              f"eog at {case['first_eog_index']}  {case['greedy_text'][:60]!r}", file=sys.stderr)
        cases.append(case)
    del llm

    for vname, extra in ref.VARIANTS.items():
        vllm = load(**extra)
        for case in cases:
            for step, v in zip(case["steps"], ref.run_variant(vllm, case)):
                step.setdefault("variants", {})[vname] = v
            case.setdefault("variant_greedy_ids", {})[vname] = ref.greedy_ids(vllm, case["prompt_ids"])
        worst = max(abs(a - b) for case in cases for step in case["steps"]
                    for a, b in zip(step["top_logits"], step["variants"][vname]["top_logits"]))
        same = sum(case["variant_greedy_ids"][vname] == case["greedy_ids"] for case in cases)
        print(f"variant {vname}: max |delta| vs default over the top-{ref.TOP_K} {worst:.4f}; "
              f"greedy identical to the default run in {same} of {len(cases)} cases", file=sys.stderr)
        del vllm

    version = llama_cpp.__version__
    fixture = {
        "description": "Gemma 3 270M Q4_K_M: tokenizer ids, greedy continuations and top-k logits computed by "
                       "llama.cpp (tests/tools/make_gemma3_reference.py). Logits are raw; "
                       "log p(id) = logit - logsumexp. Prompt ids start with <bos> (add_bos).",
        "generator": {
            "llama_cpp_python": version,
            "llama_cpp_commit": ref.LLAMA_CPP_COMMIT_BY_BINDING.get(version, "unknown"),
            "llama_version": llama_cpp.llama_version().decode(),
            "system_info": llama_cpp.llama_print_system_info().decode().strip(),
            "n_ctx": N_CTX, "n_batch": N_CTX, "n_threads": args.threads, "prompt_eval": "one batch",
            "generation_eval": "one token per call", "argmax": "numpy, lowest id on a tie",
            "kv_cache": "F16", "flash_attn": False,
            "variants": {name: {"llama_kwargs": ref.VARIANTS[name], "description": ref.VARIANT_DESCRIPTIONS[name]}
                         for name in ref.VARIANTS},
        },
        "model": {
            "file": args.model.name,
            "size_bytes": args.model.stat().st_size,
            "sha256": ref.sha256_of(args.model),
            "n_vocab": n_vocab,
            "add_bos": True,
            "eog_ids": sorted(eog_ids),
        },
        "n_generate": N_GENERATE, "n_detailed": ref.N_DETAILED, "top_k": ref.TOP_K,
        "tokenizer": tokenizer,
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(fixture, ensure_ascii=False, indent=1)
    args.out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(text.encode('utf-8')) // 1024} KiB, {len(cases)} prompts)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
