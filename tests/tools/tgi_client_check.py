#!/usr/bin/env python3
"""huggingface_hub's InferenceClient (TGI's client) against a running `kvscope serve`
(tst_server_tgi): the course's text_generation(...) calls, plain, details=True, stream=True
(with and without details), seeded sampling, GET /info, and the watermark: 200 watermarked
tokens score z > 4 at POST /watermark/detect, 200 plain sampled tokens |z| < 2.

Usage: tgi_client_check.py BASE_URL
Exit 0 and a JSON summary when every check holds; 2 when huggingface_hub is missing (the
test skips); 1 with the failed check on stderr otherwise.
"""
import json
import sys
import urllib.request

try:
    from huggingface_hub import InferenceClient
    import huggingface_hub
except ImportError:
    print("huggingface_hub is not installed in this Python", file=sys.stderr)
    sys.exit(2)


def check(cond, what):
    if not cond:
        print("FAILED: " + what, file=sys.stderr)
        sys.exit(1)


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def main():
    base = sys.argv[1]
    client = InferenceClient(base, timeout=120)
    prompt = "The capital of France is"
    summary = {"huggingface_hub": huggingface_hub.__version__}

    text = client.text_generation(prompt, max_new_tokens=12)
    check(isinstance(text, str) and text, f"text_generation gives a string: {text!r}")

    d = client.text_generation(prompt, max_new_tokens=12, details=True)
    check(d.generated_text == text, "details: same greedy text")
    check(d.details.generated_tokens == len(d.details.tokens), "details: one entry per token")
    check(d.details.finish_reason in ("length", "eos_token", "stop_sequence"), f"finish_reason {d.details.finish_reason}")
    check("".join(t.text for t in d.details.tokens) == text, "details tokens spell the text")

    # Log-probabilities: every token's, top_n_tokens alternatives, and the prompt's with
    # decoder_input_details (the first prompt token has none).
    lp = client.text_generation(prompt, max_new_tokens=8, details=True, decoder_input_details=True, top_n_tokens=3)
    check(lp.generated_text == text[:len(lp.generated_text)], "logprob request: the same greedy text")
    toks, pre = lp.details.tokens, lp.details.prefill
    # huggingface_hub parses the nested top_tokens lists as plain dicts: read both spellings.
    tops = [[t if hasattr(t, "id") else type("Tok", (), t) for t in tt] for tt in (lp.details.top_tokens or [])]
    check(all(isinstance(t.logprob, float) and t.logprob <= 0 for t in toks), "every token has a logprob <= 0")
    check(len(tops) == len(toks) and all(len(t) == 3 for t in tops), "top_tokens: 3 per token")
    check(all(tt[0].id == t.id and abs(tt[0].logprob - t.logprob) < 1e-6 for t, tt in zip(toks, tops)),
          "greedy: the token is its position's most likely")
    check(all(tt[0].logprob >= tt[1].logprob >= tt[2].logprob for tt in tops), "top_tokens best first")
    check(len(pre) >= 2 and pre[0].logprob is None, "prefill: the first prompt token has no logprob")
    check(all(isinstance(p.logprob, float) and p.logprob <= 0 for p in pre[1:]), "prefill: the others have one")
    check("".join(p.text for p in pre) == prompt, "prefill tokens spell the prompt")
    stream_tops = [r.top_tokens for r in client.text_generation(prompt, max_new_tokens=8, stream=True, details=True,
                                                                top_n_tokens=3)]
    check([[t["id"] if isinstance(t, dict) else t.id for t in s] for s in stream_tops] ==
          [[t.id for t in tt] for tt in tops], "streamed top_tokens")
    summary.update(prefill_logprobs=[p.logprob for p in pre], token_logprobs=[t.logprob for t in toks])

    streamed = "".join(client.text_generation(prompt, max_new_tokens=12, stream=True))
    check(streamed == text, f"stream {streamed!r} != {text!r}")
    last = None
    pieces = []
    for r in client.text_generation(prompt, max_new_tokens=12, stream=True, details=True):
        pieces.append(r.token.text)
        last = r
    check(last is not None and last.generated_text == text, "stream details: generated_text at the end")
    check(last.details.generated_tokens == len(pieces), "stream details: token count")

    s1 = client.text_generation(prompt, max_new_tokens=16, do_sample=True, temperature=0.9, seed=5)
    s2 = client.text_generation(prompt, max_new_tokens=16, do_sample=True, temperature=0.9, seed=5)
    check(s1 == s2, "seeded sampling repeats")

    with urllib.request.urlopen(base + "/info", timeout=30) as r:
        info = json.loads(r.read())
    for k in ("model_id", "max_total_tokens", "max_input_tokens", "max_concurrent_requests", "version"):
        check(k in info, f"/info has {k}")

    # Watermark: TGI's per-request flag, scored by the detector endpoint on the token ids.
    wm = client.text_generation("Write a story about a cat.", max_new_tokens=200, do_sample=True, temperature=1.0,
                                seed=3, watermark=True, details=True, stop=[])
    ids = [t.id for t in wm.details.tokens]
    z_wm = post(base + "/watermark/detect", {"tokens": ids})["z"]
    plain = client.text_generation("Write a story about a cat.", max_new_tokens=200, do_sample=True, temperature=1.0,
                                   seed=3, details=True)
    z_plain = post(base + "/watermark/detect", {"tokens": [t.id for t in plain.details.tokens]})["z"]
    summary.update(text=text, z_watermarked=z_wm, z_plain=z_plain, n_watermarked=len(ids),
                   n_plain=len(plain.details.tokens))
    check(len(ids) >= 150, f"watermarked reply long enough: {len(ids)} tokens")
    check(z_wm is not None and z_wm > 4, f"watermarked z {z_wm} > 4")
    check(z_plain is not None and abs(z_plain) < 2, f"plain |z| {z_plain} < 2")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
