#!/usr/bin/env python3
"""The official `openai` Python client against a running `kvscope serve` (tst_server_openai).

Usage: openai_client_check.py BASE_URL MODEL
Exit 0 and a JSON summary on stdout when every check holds; exit 2 when the openai package
is missing (the test skips); exit 1 with the failed check on stderr otherwise.
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
    base, model = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
    summary = {"openai_version": openai.__version__}

    ids = [m.id for m in client.models.list()]
    check(model in ids, f"models.list() has {model}: {ids}")

    messages = [{"role": "user", "content": "Name three colours."}]
    chat = client.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=0)
    text = chat.choices[0].message.content
    check(isinstance(text, str) and chat.choices[0].message.role == "assistant", "chat message")
    check(chat.choices[0].finish_reason in ("stop", "length"), f"finish_reason {chat.choices[0].finish_reason}")
    check(chat.usage.completion_tokens > 0 and chat.usage.prompt_tokens > 0, "chat usage")
    check(chat.usage.total_tokens == chat.usage.prompt_tokens + chat.usage.completion_tokens, "usage total")

    # Streaming: the deltas join to the same greedy text; the last chunk carries the usage.
    pieces, usage, finish = [], None, None
    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    check("".join(pieces) == text, f"streamed chat {''.join(pieces)!r} != {text!r}")
    check(usage is not None and usage.completion_tokens == chat.usage.completion_tokens, "stream usage")
    check(finish == chat.choices[0].finish_reason, "stream finish_reason")

    prompt = "The capital of France is"
    comp = client.completions.create(model=model, prompt=prompt, max_tokens=24, temperature=0, extra_body={"ignore_eos": True})
    ctext = comp.choices[0].text
    check(comp.choices[0].finish_reason == "length" and comp.usage.completion_tokens == 24, "completion length")
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=model, prompt=prompt, max_tokens=24, temperature=0, stream=True, extra_body={"ignore_eos": True})
        if c.choices)
    check(streamed == ctext, f"streamed completion {streamed!r} != {ctext!r}")

    # A stop string taken from the middle of the greedy text ends the reply just before it.
    stop = ctext[len(ctext) // 2:len(ctext) // 2 + 3]
    if stop.strip():
        cut = client.completions.create(model=model, prompt=prompt, max_tokens=24, temperature=0, stop=[stop],
                                        extra_body={"ignore_eos": True})
        check(cut.choices[0].finish_reason == "stop", "stop finish_reason")
        check(cut.choices[0].text == ctext[:ctext.find(stop)], f"stop cut {cut.choices[0].text!r}")
        summary["stop"] = stop

    # n > 1: n choices, each indexed; a fixed seed repeats them.
    a = client.completions.create(model=model, prompt=prompt, max_tokens=8, n=3, seed=11, temperature=1.0)
    b = client.completions.create(model=model, prompt=prompt, max_tokens=8, n=3, seed=11, temperature=1.0)
    check(sorted(c.index for c in a.choices) == [0, 1, 2], "n=3 indices")
    check([c.text for c in a.choices] == [c.text for c in b.choices], "seeded n=3 repeats")

    # logprobs on chat: one entry per generated token with token / logprob / bytes and
    # top_logprobs k entries, best first; greedy picks the best, so its logprob is top[0]'s.
    lp = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0,
                                        logprobs=True, top_logprobs=3, n=2)
    check(len(lp.choices) == 2, "chat n=2 with logprobs")
    for c in lp.choices:
        content = c.logprobs.content
        check(len(content) == lp.usage.completion_tokens // 2, f"one logprobs entry per token: {len(content)}")
        for e in content:
            check(isinstance(e.token, str) and e.logprob <= 0 and isinstance(e.bytes, list), "chat logprob entry")
            check(len(e.top_logprobs) == 3, f"top_logprobs has 3 entries: {len(e.top_logprobs)}")
            tops = [t.logprob for t in e.top_logprobs]
            check(tops == sorted(tops, reverse=True), "top_logprobs best first")
            check(abs(e.logprob - tops[0]) < 1e-6, "greedy token is the most likely one")
            check(sum(2.718281828459045 ** t for t in tops) <= 1.0 + 1e-5, "top probabilities sum to at most 1")
        check("".join(bytes(e.bytes).decode("utf-8", "replace") for e in content).startswith(c.message.content[:1]),
              "the entries' bytes spell the reply")
    check([e.logprob for e in lp.choices[0].logprobs.content] == [e.logprob for e in lp.choices[1].logprobs.content],
          "greedy choices of one prompt have the same logprobs")
    # Streamed: the same entries, spread over the chunks.
    streamed_lp = []
    for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0,
                                                logprobs=True, top_logprobs=3, stream=True):
        for c in chunk.choices:
            if c.logprobs is not None and c.logprobs.content:
                streamed_lp += [e.logprob for e in c.logprobs.content]
    check(streamed_lp == [e.logprob for e in lp.choices[0].logprobs.content], "streamed chat logprobs")
    # Legacy completions: logprobs=k gives tokens, token_logprobs, top_logprobs (k + the sampled
    # token at most), text_offset.
    cl = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, logprobs=2,
                                   extra_body={"ignore_eos": True})
    l = cl.choices[0].logprobs
    check(len(l.tokens) == len(l.token_logprobs) == len(l.top_logprobs) == len(l.text_offset) == 6,
          "completions logprobs lengths")
    check(all(1 <= len(t) <= 3 for t in l.top_logprobs), "completions top_logprobs sizes")
    check(l.text_offset == sorted(l.text_offset) and l.text_offset[0] == 0, "text_offset grows from 0")
    # text_offset counts characters of the text (Python's str), not bytes: each whole token's
    # string starts at its offset.
    for tok, off in zip(l.tokens, l.text_offset):
        if not tok.startswith("bytes:"):
            check(cl.choices[0].text[off:].startswith(tok), f"token {tok!r} at character {off} of the text")
    check(all(abs(max(t.values()) - v) < 1e-6 for t, v in zip(l.top_logprobs, l.token_logprobs)),
          "greedy completion tokens are the most likely")
    summary["logprobs"] = [round(v, 4) for v in l.token_logprobs]

    # What the server refuses, the client sees as the right exception.
    try:
        client.chat.completions.create(model=model, messages=messages, max_tokens=4, logprobs=True, top_logprobs=21)
        check(False, "top_logprobs 21 should be refused")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "top_logprobs" in str(e), "top_logprobs refusal")
    try:
        client.chat.completions.create(model=model, messages=messages, max_tokens=4, logprobs=5)
        check(False, "chat logprobs must be a boolean")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "logprobs" in str(e), "chat logprobs type refusal")
    try:
        client.chat.completions.create(model="no-such-model", messages=messages, max_tokens=4)
        check(False, "unknown model should be refused")
    except openai.NotFoundError as e:
        check(e.status_code == 404, "unknown model 404")
    try:
        client.completions.create(model=model, prompt=prompt, max_tokens=4, top_p=1.5)
        check(False, "top_p 1.5 should be refused")
    except openai.BadRequestError as e:
        check(e.status_code == 400, "top_p 400")

    summary.update(chat=text, completion=ctext, n_choices=len(a.choices))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
