#!/usr/bin/env python3
"""LoRA adapters served as models, checked with the official `openai` Python client against a
running `kvscope serve --lora-modules NAME=PATH --enable-lora-runtime` (tst_server_lora).

Usage: openai_lora_check.py BASE_URL EXPECTED_JSON
EXPECTED_JSON: {"base": served model id, "adapter": name, "path": adapter folder,
                "question": chat message, "max_tokens": n,
                "base_text": what `kvscope generate --chat` answers greedy,
                "adapter_text": what `kvscope generate --chat --lora NAME=PATH` answers greedy}
Checks: /v1/models lists the base model and the adapter in vLLM's shape (parent = base,
root = the path); base and adapter requests sent at once (so they share engine steps) answer
exactly the generate texts and name the model they ran; an unknown model is a NotFoundError
with code model_not_found; vLLM's runtime routes load the adapter under a second name (it
then answers like the first), refuse a name taken or a bad path (400), unload it (its name is
then unknown) and refuse to unload it twice (404).
Exit 0 with a JSON summary on stdout; 2 when the openai package is missing; 1 with the failed
check on stderr.
"""
import json
import sys
import threading
import urllib.error
import urllib.request

try:
    import openai
except ImportError:
    print("the openai package is not installed in this Python", file=sys.stderr)
    sys.exit(2)


def check(cond, what):
    if not cond:
        print("FAILED: " + what, file=sys.stderr)
        sys.exit(1)


def post(url, body):
    """(status, text) of a JSON POST; errors are answers too."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def main():
    base_url, want = sys.argv[1], json.loads(sys.argv[2])
    base, name, path = want["base"], want["adapter"], want["path"]
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=300)
    summary = {"openai_version": openai.__version__}

    models = client.models.list().data
    ids = [m.id for m in models]
    check(ids[0] == base and name in ids, f"models.list(): the base model first, then the adapter: {ids}")
    card = next(m for m in models if m.id == name)
    extra = card.model_extra or {}
    check(extra.get("parent") == base, f"the adapter's parent is the base model: {extra}")
    check(extra.get("root") == path, f"the adapter's root is its path: {extra}")
    check(card.object == "model", "object model")
    summary["models"] = ids

    messages = [{"role": "user", "content": want["question"]}]

    def ask(model):
        r = client.chat.completions.create(model=model, messages=messages, max_tokens=want["max_tokens"],
                                           temperature=0)
        return r.model, r.choices[0].message.content

    # Base and adapter requests at once, twice each: they run in the same engine steps.
    order = [base, name, base, name]
    answers = [None] * len(order)

    def run(i):
        answers[i] = ask(order[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(order))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for model, (replied_model, text) in zip(order, answers):
        expected = want["adapter_text"] if model == name else want["base_text"]
        check(replied_model == model, f"the reply names the model that ran: {replied_model!r} for {model!r}")
        check(text == expected, f"{model}: {text!r} != generate's {expected!r}")
    summary["adapter_text"] = answers[1][1]
    summary["base_text"] = answers[0][1]

    try:
        client.chat.completions.create(model="no-such-adapter", messages=messages, max_tokens=2)
        check(False, "an unknown model was accepted")
    except openai.NotFoundError as e:
        check(e.status_code == 404 and e.code == "model_not_found", f"unknown model: {e.status_code} {e.code}")
        check(name in str(e), f"the error names what is served: {e}")

    # vLLM's runtime routes.
    second = name + "-again"
    status, text = post(base_url + "/v1/load_lora_adapter", {"lora_name": second, "lora_path": path})
    check(status == 200 and text == f"Success: LoRA adapter '{second}' added successfully.", f"load: {status} {text}")
    check(second in [m.id for m in client.models.list().data], "the loaded adapter is listed")
    check(ask(second)[1] == want["adapter_text"], "the adapter loaded at run time answers like the first")
    status, text = post(base_url + "/v1/load_lora_adapter", {"lora_name": second, "lora_path": path})
    check(status == 400 and "already been loaded" in text, f"load twice: {status} {text}")
    status, text = post(base_url + "/v1/load_lora_adapter", {"lora_name": "bad", "lora_path": path + "/nowhere"})
    check(status == 400 and "nowhere" in text, f"a bad path: {status} {text}")
    status, text = post(base_url + "/v1/load_lora_adapter", {"lora_name": "x"})
    check(status == 400 and "lora_path" in text, f"no path: {status} {text}")
    status, text = post(base_url + "/v1/unload_lora_adapter", {"lora_name": second})
    check(status == 200 and text == f"Success: LoRA adapter '{second}' removed successfully.", f"unload: {status} {text}")
    check(second not in [m.id for m in client.models.list().data], "the unloaded adapter is not listed")
    try:
        ask(second)
        check(False, "an unloaded adapter still answers")
    except openai.NotFoundError as e:
        check(e.code == "model_not_found", f"unloaded adapter: {e.code}")
    status, text = post(base_url + "/v1/unload_lora_adapter", {"lora_name": second})
    check(status == 404 and "cannot be found" in text, f"unload twice: {status} {text}")
    check(ask(name)[1] == want["adapter_text"], "the first adapter still answers")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
