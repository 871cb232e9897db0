#!/usr/bin/env python3
"""Beam search through the official `openai` Python client (vLLM's extension fields sent in
extra_body) against a running KV Scope server (tst_server_beam).

Usage: openai_beam_check.py BASE_URL EXPECTED_JSON
EXPECTED_JSON: {"model": served id, "prompt": [token ids], "max_tokens": n, "n": beams,
                "length_penalty": alpha, "texts": [the engine's hypotheses, best first],
                "finish": ["stop" | "length", ...]}
Checks: completions.create(n=beams, extra_body={"use_beam_search": true, "length_penalty":
alpha}) parses into `beams` choices whose text and finish_reason are the expected ones, in
order; streamed, the chunks give the same per index; min_tokens above max_tokens and
use_beam_search with one beam raise BadRequestError (400) naming min_tokens and n.
Exit 0 with a JSON summary on stdout; 2 when the openai package is missing; 1 with the failed
check on stderr.
"""
import json
import sys

try:
    import openai
except ImportError:
    print("the openai package is not installed in this Python", file=sys.stderr)
    sys.exit(2)


def check(cond, what):
    if not cond:
        print("FAILED: " + what, file=sys.stderr)
        sys.exit(1)


def main():
    base_url, want = sys.argv[1], json.loads(sys.argv[2])
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="none", max_retries=0, timeout=120)
    args = dict(model=want["model"], prompt=want["prompt"], max_tokens=want["max_tokens"], n=want["n"],
                temperature=0, extra_body={"use_beam_search": True, "length_penalty": want["length_penalty"]})
    r = client.completions.create(**args)
    check(len(r.choices) == want["n"], f"{len(r.choices)} choices, want {want['n']}")
    for i, c in enumerate(r.choices):
        check(c.index == i, f"choice {i} has index {c.index}")
        check(c.text == want["texts"][i], f"choice {i}: {c.text!r} != {want['texts'][i]!r}")
        check(c.finish_reason == want["finish"][i], f"choice {i}: finish {c.finish_reason} != {want['finish'][i]}")
    texts = [""] * want["n"]
    finish = [None] * want["n"]
    for chunk in client.completions.create(stream=True, **args):
        for c in chunk.choices:
            texts[c.index] += c.text
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    check(texts == want["texts"], f"streamed texts {texts} != {want['texts']}")
    check(finish == want["finish"], f"streamed finish reasons {finish} != {want['finish']}")
    for extra, param in (({"min_tokens": want["max_tokens"] + 1}, "min_tokens"), ({"use_beam_search": True}, "n")):
        try:
            client.completions.create(model=want["model"], prompt=want["prompt"], max_tokens=want["max_tokens"],
                                      n=1, extra_body=extra)
            check(False, f"{extra} was accepted")
        except openai.BadRequestError as e:
            check(e.status_code == 400, f"{extra}: status {e.status_code}")
            body = e.body if isinstance(e.body, dict) else {}
            body = body.get("error", body) if isinstance(body.get("error"), dict) else body
            got = body.get("param")
            check(got == param, f"{extra}: param {got!r}, want {param!r} ({e.body})")
    print(json.dumps({"choices": len(r.choices), "texts": [c.text for c in r.choices]}))


if __name__ == "__main__":
    main()
