"""Drives `llm --serve` with the official openai client; run by tests/serve.rs.

  openai_client.py api BASE_URL EXPECTED_JSON   chat and text completions against greedy references
  openai_client.py auth BASE_URL KEY            a server started with --api-key KEY

EXPECTED_JSON: {"count": N, "turns": [[question, greedy answer, rendered chat prompt], ...]}, a conversation whose
answers `llm --prompt RENDERED --temperature 0 --count N` gave. Exits non-zero at the first failed check.
"""
import json
import sys
import threading

import openai
from openai import OpenAI


def check(cond, what):
  if not cond: sys.exit(f"FAILED: {what}")
  print(f"ok: {what}")


def expect_error(cls, fn, what):
  try:
    fn()
  except cls as e:
    check(True, f"{what} ({e.status_code} {type(e).__name__})")
    return e
  sys.exit(f"FAILED: {what}: no {cls.__name__}")


def api(client, expected):
  model = client.models.list().data[0].id
  n, turns = expected["count"], expected["turns"]
  (q1, a1, p1), (q2, a2, p2) = turns
  msgs = [{"role": "user", "content": q1}]
  chat = lambda max_tokens=n, **kw: client.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=max_tokens, **kw)

  r = chat()
  text, finish = r.choices[0].message.content, r.choices[0].finish_reason
  check(text == a1, f"greedy chat reply equals llm --prompt's: {text!r}")
  check(r.object == "chat.completion" and r.choices[0].message.role == "assistant", "chat.completion object")
  check((finish, r.usage.completion_tokens) in (("length", n), ("stop", r.usage.completion_tokens)) and r.usage.completion_tokens <= n,
        f"finish_reason {finish}, {r.usage.completion_tokens} tokens")
  check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "usage adds up")

  chunks = list(chat(stream=True, stream_options={"include_usage": True}))
  deltas = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
  finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
  check(deltas == text, "streamed deltas join to the same text")
  check(finishes == [finish] and chunks[-1].usage.completion_tokens == r.usage.completion_tokens, "one final chunk with finish_reason, then usage")
  check(all(c.object == "chat.completion.chunk" for c in chunks), "chat.completion.chunk objects")

  # the next turn: its prompt starts with the previous one, whose KV cache is reused, and the reply is still right
  msgs += [{"role": "assistant", "content": a1}, {"role": "user", "content": q2}]
  r2 = chat()
  check(r2.choices[0].message.content == a2, f"second turn equals llm --prompt's: {r2.choices[0].message.content!r}")
  cached = r2.usage.prompt_tokens_details.cached_tokens
  check(cached >= r.usage.prompt_tokens, f"{cached} of {r2.usage.prompt_tokens} prompt tokens came from the cache")
  msgs = msgs[:1]

  # stop strings: the text ends before the first one, which is not returned, also when streamed
  stop = text[len(text) // 2 - 3:len(text) // 2 + 3]  # (likely across two tokens: the first part is held back)
  cut = text[:text.find(stop)]
  r = chat(stop=[stop, "never appears"])
  check(r.choices[0].message.content == cut and r.choices[0].finish_reason == "stop", f"stop {stop!r} cuts to {cut!r}")
  streamed = "".join(c.choices[0].delta.content or "" for c in chat(stop=stop, stream=True))
  check(streamed == cut, f"streamed stop cuts to the same text: {streamed!r}")

  r = chat(max_tokens=5)
  check(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5 and a1.startswith(r.choices[0].message.content),
        "max_tokens 5: finish_reason length, 5 tokens, the greedy text's start")
  r = chat(max_tokens=None, max_completion_tokens=3)
  check(r.usage.completion_tokens == 3, "max_completion_tokens 3")

  # the text completion endpoint on the rendered chat prompt gives the same greedy text
  r = client.completions.create(model=model, prompt=p1, temperature=0, max_tokens=n)
  check(r.object == "text_completion" and r.choices[0].text == a1, "completions on the rendered prompt: the same text")
  streamed = "".join(c.choices[0].text for c in client.completions.create(model=model, prompt=p1, temperature=0, max_tokens=n, stream=True))
  check(streamed == a1, "streamed completions: the same text")

  # sampling: a seed repeats its draw
  sample = lambda seed: client.chat.completions.create(model=model, messages=msgs, temperature=1.0, top_p=0.9, seed=seed, max_tokens=12, extra_body={"top_k": 40}).choices[0].message.content
  s1 = sample(42)
  check(s1 and sample(42) == s1, f"seed 42 draws the same text twice: {s1!r}")

  e = expect_error(openai.BadRequestError, lambda: client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hello " * 3000}]),
                   "a prompt past the context")
  check(e.code == "context_length_exceeded", "code context_length_exceeded")
  expect_error(openai.BadRequestError, lambda: client.chat.completions.create(model=model, messages=msgs, temperature="hot"), "temperature 'hot'")

  # four streams at once, each with its own prompt: each gets the answer it gets alone
  questions = ["What is the capital of France?", "Name a primary color.", "What is 2 plus 2?", "Say hello in Spanish."]
  ask = lambda q, **kw: client.chat.completions.create(model=model, messages=[{"role": "user", "content": q}], temperature=0, max_tokens=n, **kw)
  alone = [ask(q).choices[0].message.content for q in questions]
  got = [None] * 4
  def stream(i):
    got[i] = "".join(c.choices[0].delta.content or "" for c in ask(questions[i], stream=True))
  threads = [threading.Thread(target=stream, args=(i,)) for i in range(4)]
  for th in threads: th.start()
  for th in threads: th.join()
  for q, a, g in zip(questions, alone, got): check(g == a, f"concurrent {q!r}: {g!r}")


def auth(base, key):
  e = expect_error(openai.AuthenticationError, lambda: OpenAI(base_url=base, api_key="wrong", max_retries=0).models.list(), "a wrong key")
  check(e.status_code == 401, "401")
  r = OpenAI(base_url=base, api_key=key, max_retries=0).chat.completions.create(model="any", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
  check(r.usage.completion_tokens <= 2, "the right key is served")


if __name__ == "__main__":
  mode, base = sys.argv[1], sys.argv[2] + "/v1"
  if mode == "api": api(OpenAI(base_url=base, api_key="none", max_retries=0), json.loads(sys.argv[3]))
  else: auth(base, sys.argv[3])
