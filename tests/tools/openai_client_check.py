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

    # What the server refuses, the client sees as the right exception.
    try:
        client.chat.completions.create(model=model, messages=messages, max_tokens=4, logprobs=True)
        check(False, "logprobs should be refused (the engine gives none)")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "logprobs" in str(e), "logprobs refusal")
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
