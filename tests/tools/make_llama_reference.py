#!/usr/bin/env python3
"""Reference token ids and logits for the default model, computed by llama.cpp.

Writes tests/fixtures/smollm2_reference.json: for ten varied prompts (plain text and
ChatML chat prompts), the prompt token ids as llama.cpp tokenizes them, the 64 greedy
continuation ids (argmax of the logits, computed here with numpy, never llama.cpp's
sampler chain; the prompt is evaluated as one batch, then every generated token one at
a time), the top-1/top-2 logit margin at each of those steps, and for the first 16
generated positions the top-20 (id, logit) pairs plus the full-vocabulary logsumexp,
so a test can compute log-probabilities and a top-k KL divergence.

For those 16 positions each step also holds "variants": llama.cpp's logits at the same
top-20 ids, and its full-vocabulary logsumexp, under other equally valid configurations
(VARIANTS below: flash attention on; F32 instead of F16 KV cache; the prompt fed one token
per call). A variant is fed the default run's prompt and greedy ids (teacher forcing, it
never picks a token), so its logits differ from the default ones only by rounding. They
measure how far llama.cpp moves from itself, the yardstick for how far our engine may be
from llama.cpp. Each case also holds "variant_greedy_ids": the 64 greedy ids each variant
picks when it runs free, which shows how often llama.cpp's own greedy continuations stay
token-identical across its own valid configurations.

Set-up (once; the binding reuses the llama.cpp that tests/tools/bench_llamacpp.sh builds):
    tests/tools/bench_llamacpp.sh --build-only
    python3 -m venv /opt/kvscope-ref-venv
    CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" /opt/kvscope-ref-venv/bin/pip install numpy \
        /tmp/llamacpp-src/llama_cpp_python-0.3.36.tar.gz
    mkdir -p /opt/kvscope-ref-venv/lib/python3.11/site-packages/llama_cpp/lib
    cp -a /tmp/llamacpp-build/bin/lib*.so* /opt/kvscope-ref-venv/lib/python3.11/site-packages/llama_cpp/lib/
(or skip the copy and set LLAMA_CPP_LIB_PATH=/tmp/llamacpp-build/bin). Then:
    /opt/kvscope-ref-venv/bin/python tests/tools/make_llama_reference.py [--model M] [--out F]
Takes about 4 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import sys

import numpy as np

DEFAULT_MODEL = pathlib.Path.home() / ".local/share/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "smollm2_reference.json"
# The vendored llama.cpp commit of llama-cpp-python 0.3.36 (its CHANGELOG.md).
LLAMA_CPP_COMMIT_BY_BINDING = {"0.3.36": "0c1e57098"}

N_GENERATE = 64   # greedy continuation length
N_DETAILED = 16   # generated positions with top-k logits
TOP_K = 20

# Other valid llama.cpp configurations: name -> extra Llama(...) keyword arguments.
# type_k/type_v 0 is GGML_TYPE_F32 (the default KV cache type is GGML_TYPE_F16).
# n_batch=n_ubatch=1 feeds the prompt one token per call instead of as one batch.
VARIANTS: dict[str, dict] = {
    "flash_attn": {"flash_attn": True},
    "kv_f32": {"type_k": 0, "type_v": 0},
    "prompt_token_by_token": {"n_batch": 1, "n_ubatch": 1},
}
VARIANT_DESCRIPTIONS = {
    "flash_attn": "flash_attn=True (LLAMA_FLASH_ATTN_TYPE_ENABLED; the default run has it disabled)",
    "kv_f32": "type_k=type_v=0 (GGML_TYPE_F32 KV cache; the default run uses F16)",
    "prompt_token_by_token": "n_batch=n_ubatch=1 (the prompt is evaluated one token per call, "
                             "the default run evaluates it as one batch)",
}

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chatml(turns: list[tuple[str, str]], system: str = SYSTEM) -> str:
    """The model's own chat template (tokenizer.chat_template), generation prompt added."""
    text = f"<|im_start|>system\n{system}<|im_end|>\n"
    for role, content in turns:
        text += f"<|im_start|>{role}\n{content}<|im_end|>\n"
    return text + "<|im_start|>assistant\n"


PROMPTS: list[tuple[str, str]] = [
    ("story_opening", "Once upon a time, in a small village at the edge of a vast forest, there lived"),
    ("chat_code_request", chatml([("user", "Write a Python function that checks whether a number is prime.")])),
    ("chat_factual", chatml([("user", "What is the capital of Australia, and why was it chosen?")])),
    ("list", "Here is a list of five fruits:\n1. Apple\n2."),
    ("chat_math_word_problem",
     chatml([("user", "A train travels 60 km in 45 minutes. What is its average speed in km/h? Think step by step.")])),
    ("multilingual", "Bonjour, je m'appelle Marie. Ich komme aus Berlin. 東京は日本の首都です。 El tiempo hoy es"),
    ("mid_word", "The quick brown fox jumps over the la"),
    ("long_paragraph",
     "The history of computing stretches back far beyond the electronic machines of the twentieth century. "
     "Mechanical calculators such as Pascal's arithmetic machine and Leibniz's stepped reckoner showed that "
     "arithmetic could be automated with gears and levers. In the nineteenth century, Charles Babbage designed "
     "the Analytical Engine, a general-purpose machine with a store for numbers and a mill for operating on "
     "them, and Ada Lovelace wrote what many consider the first program for it. A century later, wartime needs "
     "for code breaking and ballistics tables drove the construction of the first electronic computers, which "
     "filled entire rooms and consumed enormous amounts of power. The invention of the transistor and then the "
     "integrated circuit"),
    ("chat_multi_turn", chatml([
        ("user", "Give me a one-word name for a grey cat."),
        ("assistant", "Smokey"),
        ("user", "Now suggest a name for its sister, who is white, and explain why."),
    ])),
    ("code_completion", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'),
]


def logsumexp(x: np.ndarray) -> float:
    m = float(np.max(x))
    return m + float(np.log(np.sum(np.exp(x.astype(np.float64) - m))))


def top_k_desc(logits: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest logits, largest first, the lower id first on a tie."""
    return np.argsort(-logits, kind="stable")[:k]


def sha256_of(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def last_logits(llm) -> np.ndarray:
    """[n_vocab] float32 logits of the last evaluated position."""
    return np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32, copy=True)


def run_prompt(llm, name: str, text: str, eog_ids: set[int]) -> dict:
    prompt_ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    llm.reset()
    llm.eval(prompt_ids)                       # prompt as one batch
    generated, margins, steps = [], [], []
    for pos in range(N_GENERATE):
        logits = last_logits(llm)              # [n_vocab]
        top = top_k_desc(logits, TOP_K)
        next_id = int(top[0])                  # argmax, lowest id on a tie
        generated.append(next_id)
        margins.append(round(float(logits[top[0]] - logits[top[1]]), 5))
        if pos < N_DETAILED:
            steps.append({
                "top_ids": [int(i) for i in top],
                "top_logits": [round(float(logits[i]), 5) for i in top],
                "logsumexp": round(logsumexp(logits), 5),
            })
        llm.eval([next_id])                    # one token at a time
    first_eog = next((i for i, t in enumerate(generated) if t in eog_ids), None)
    return {
        "name": name,
        "prompt": text,
        "prompt_ids": [int(t) for t in prompt_ids],
        "greedy_ids": generated,
        "greedy_text": llm.detokenize(generated, special=True).decode("utf-8", errors="replace"),
        "first_eog_index": first_eog,
        "top1_margin": margins,
        "steps": steps,
    }


def greedy_ids(llm, prompt_ids: list[int]) -> list[int]:
    """N_GENERATE greedy ids, the prompt evaluated as configured, then one token per call."""
    llm.reset()
    llm.eval(prompt_ids)
    out = []
    for _ in range(N_GENERATE):
        next_id = int(top_k_desc(last_logits(llm), 1)[0])
        out.append(next_id)
        llm.eval([next_id])
    return out


def run_variant(llm, case: dict) -> list[dict]:
    """The variant's logits for the first N_DETAILED generated positions of `case`, fed the
    default run's prompt (one batch) and greedy ids (one at a time), at the default top ids."""
    llm.reset()
    llm.eval(case["prompt_ids"])
    out = []
    for pos, step in enumerate(case["steps"]):
        logits = last_logits(llm)
        out.append({
            "top_logits": [round(float(logits[i]), 5) for i in step["top_ids"]],
            "logsumexp": round(logsumexp(logits), 5),
        })
        if pos + 1 < len(case["steps"]):
            llm.eval([case["greedy_ids"][pos]])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=pathlib.Path, default=DEFAULT_MODEL)
    ap.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if not args.model.is_file():
        print(f"make_llama_reference.py: model file '{args.model}' not found", file=sys.stderr)
        return 1

    import llama_cpp  # imported late so --help works without the library
    from llama_cpp import Llama

    def load(**extra):
        return Llama(model_path=str(args.model), n_ctx=512, logits_all=True, n_threads=args.threads,
                     n_threads_batch=args.threads, seed=0, verbose=False, **extra)

    llm = load()
    vocab = llm._model.vocab  # noqa: SLF001 (the binding exposes no public accessor for it)
    n_vocab = llm.n_vocab()
    eog_ids = {i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)}

    cases = []
    for name, text in PROMPTS:
        case = run_prompt(llm, name, text, eog_ids)
        print(f"{name:24s} prompt {len(case['prompt_ids']):3d} tokens  "
              f"eog at {case['first_eog_index']}  {case['greedy_text'][:60]!r}", file=sys.stderr)
        cases.append(case)
    del llm

    for vname, extra in VARIANTS.items():
        vllm = load(**extra)
        for case in cases:
            for step, v in zip(case["steps"], run_variant(vllm, case)):
                step.setdefault("variants", {})[vname] = v
            case.setdefault("variant_greedy_ids", {})[vname] = greedy_ids(vllm, case["prompt_ids"])
        worst = max(abs(a - b) for case in cases for step in case["steps"]
                    for a, b in zip(step["top_logits"], step["variants"][vname]["top_logits"]))
        same = sum(case["variant_greedy_ids"][vname] == case["greedy_ids"] for case in cases)
        print(f"variant {vname}: max |delta| vs default over the top-{TOP_K} {worst:.4f}; "
              f"greedy identical to the default run in {same} of {len(cases)} cases", file=sys.stderr)
        del vllm

    version = llama_cpp.__version__
    fixture = {
        "description": "Greedy continuations and top-k logits of the default model computed by llama.cpp "
                       "(tests/tools/make_llama_reference.py). Logits are raw (no softmax); "
                       "log p(id) = logit - logsumexp.",
        "generator": {
            "llama_cpp_python": version,
            "llama_cpp_commit": LLAMA_CPP_COMMIT_BY_BINDING.get(version, "unknown"),
            "llama_version": llama_cpp.llama_version().decode(),
            "system_info": llama_cpp.llama_print_system_info().decode().strip(),
            "n_ctx": 512, "n_threads": args.threads, "prompt_eval": "one batch",
            "generation_eval": "one token per call", "argmax": "numpy, lowest id on a tie",
            "kv_cache": "F16 (type_k=type_v=GGML_TYPE_F16)", "flash_attn": False,
            "variants": {
                name: {"llama_kwargs": VARIANTS[name], "description": VARIANT_DESCRIPTIONS[name],
                       "fed": "the default run's prompt ids (one batch) and greedy ids (one per call)",
                       "recorded": "per step, steps[i].variants[name]: logits at steps[i].top_ids "
                                   "and the full-vocabulary logsumexp; per case, "
                                   "variant_greedy_ids[name]: the variant's own free-running greedy ids"}
                for name in VARIANTS
            },
        },
        "model": {
            "file": args.model.name,
            "size_bytes": args.model.stat().st_size,
            "sha256": sha256_of(args.model),
            "n_vocab": n_vocab,
            "add_bos": False,
            "eog_ids": sorted(eog_ids),
        },
        "n_generate": N_GENERATE, "n_detailed": N_DETAILED, "top_k": TOP_K,
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(fixture, ensure_ascii=False, indent=1)
    args.out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(text.encode('utf-8')) // 1024} KiB, {len(cases)} prompts)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
