"""Tokens/s of `llm --serve` with one stream, then with several at once (the Batcher's slots decoding together).

  python3 bench/serve_bench.py [--url http://127.0.0.1:8080] [--tokens 128] [--streams 1,2,4] [--rounds 2] [--temperature 0]
  python3 bench/serve_bench.py --long 1000 [--streams 2] [--tokens 256]

Start the server first (`llm --model MODEL.gguf --serve 8080`, its default 4 slots). Each stream is a streamed
`/v1/completions` request for `--tokens` tokens after its own prompt (greedy; `--temperature T`: sampled, seeded); the figure is all streams' completion
tokens over the wall time from the first request sent to the last token received (prefill included). The last of
`--rounds` rounds is printed per stream count: the first compiles the decode step for that set of slots.

`--long N`: while `--streams` streams (the first of `--streams`) decode, a request with a prompt of about N tokens
arrives (the server needs `--max_context` above N); prints each stream's median gap between tokens before it came
and its worst and 95th-percentile gaps from its arrival until its first token, and their ratios to the median (the worst
gap before it came tells the machine's own noise), then the same gaps over those of a control round without the
prompt at the same tokens (a stream's own gap grows with its context: what the prompt adds, apart from that) (llama-server keeps streams going by
running long prompts a chunk at a time in the streams' decode steps). Two warm-ups come first: a new step compiles at
its first call and is captured at its second.
"""
import argparse, json, threading, time, urllib.request

PROMPTS = ["Once upon a time, in a small village by the sea,", "The history of the printing press begins",
           "Here is a recipe for a simple tomato soup:", "The three laws of motion state that"]

TEMPERATURE = 0

def stream(url, prompt, tokens, out, i, times=None):
  body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": TEMPERATURE, "seed": i, "stream": True,
                     "stream_options": {"include_usage": True}}).encode()
  req = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
  with urllib.request.urlopen(req, timeout=600) as r:
    for line in r:
      if not line.startswith(b"data: {"): continue
      if (chunk := json.loads(line[6:])).get("usage"): out[i] = chunk["usage"]["completion_tokens"]
      elif times is not None: times.append(time.perf_counter())

def control(url, streams, tokens):
  """Each stream's gaps between tokens with no prompt arriving: a gap grows with the stream's context (its attention
  reads more cache rows), so a gap during the prompt is also compared with the gap at the same token here."""
  times, out = [[] for _ in range(streams)], [0] * streams
  threads = [threading.Thread(target=stream, args=(url, PROMPTS[i % len(PROMPTS)], tokens, out, i, times[i])) for i in range(streams)]
  for th in threads: th.start()
  for th in threads: th.join()
  return [[b - a for a, b in zip(ts, ts[1:])] for ts in times]

def long_prompt(url, n, streams, tokens, sentence, ctrl=None):
  """Each stream's median gap before a prompt of about `n` tokens arrives and its worst gap until that prompt's
  first token (one streamed token: its prefill is the wait); with `ctrl` ([`control`]'s gaps), also each gap over
  the control's at the same token (the median of the 21 control gaps around it)."""
  times, out = [[] for _ in range(streams)], [0] * (streams + 1)
  threads = [threading.Thread(target=stream, args=(url, PROMPTS[i % len(PROMPTS)], tokens, out, i, times[i])) for i in range(streams)]
  for th in threads: th.start()
  while min(len(t) for t in times) < 40: time.sleep(0.01)
  first = []
  sent = time.perf_counter()
  # (a new first word each time: a prompt the server's slots already hold would be a prefix hit, not a prefill)
  stream(url, f"{time.time_ns() % 997}. " + sentence * (n // 10), 1, out, streams, first)
  done = first[0] if first else time.perf_counter()
  for th in threads: th.join()
  print(f"a prompt of {n // 10 * 10} words: its first token after {done - sent:.2f} s")
  for i, ts in enumerate(times):
    before = [b - a for a, b in zip(ts, ts[1:]) if b < sent]
    during = [(b - a, a - sent) for a, b in zip(ts, ts[1:]) if b > sent and a < done]
    idle, (worst, at) = sorted(before)[len(before) // 2], max(during, default=(0, 0))
    p95 = sorted(g for g, _ in during)[len(during) * 95 // 100] if during else 0
    print(f"stream {i}: idle gap {idle * 1e3:.1f} ms (worst before the prompt {max(before) * 1e3:.1f} ms), during the prompt: worst gap "
          f"{worst * 1e3:.1f} ms ({at:+.2f} s from its arrival), {worst / idle:.2f}x; 95th percentile {p95 * 1e3:.1f} ms, {p95 / idle:.2f}x")
    if ctrl and during:
      c = ctrl[i]
      same = lambda k: sorted(c[max(0, k - 10):k + 11])[len(c[max(0, k - 10):k + 11]) // 2]
      rel = sorted((b - a) / same(k) for k, (a, b) in enumerate(zip(ts, ts[1:])) if b > sent and a < done and k < len(c))
      if rel: print(f"  over the gap at the same token without the prompt ({same(0) * 1e3:.1f} ms at the start): worst {rel[-1]:.2f}x, "
            f"95th percentile {rel[len(rel) * 95 // 100]:.2f}x, median {rel[len(rel) // 2]:.2f}x")

def run(url, n, tokens):
  out = [0] * n
  threads = [threading.Thread(target=stream, args=(url, PROMPTS[i % len(PROMPTS)], tokens, out, i)) for i in range(n)]
  t = time.perf_counter()
  for th in threads: th.start()
  for th in threads: th.join()
  return sum(out), time.perf_counter() - t

if __name__ == "__main__":
  p = argparse.ArgumentParser()
  p.add_argument("--url", default="http://127.0.0.1:8080")
  p.add_argument("--tokens", type=int, default=128)
  p.add_argument("--streams", default="1,2,4")
  p.add_argument("--rounds", type=int, default=2)
  p.add_argument("--long", type=int, default=0)
  p.add_argument("--temperature", type=float, default=0)
  a = p.parse_args()
  TEMPERATURE = a.temperature
  if a.long:
    n = int(a.streams.split(",")[0])
    # (twice: a TinyJit captures a step's kernels at its second call, and the first warm-up's streams may meet a prompt
    # chunk at spans the second meets again)
    for _ in range(2):
      print("warm-up (compiles and captures the decode steps for these slots and the prompt chunks joining them):")
      long_prompt(a.url, a.long, n, a.tokens, "A lazy dog sleeps under a tree while the fox runs. ")
    print("measured:")
    ctrl = control(a.url, n, a.tokens)
    long_prompt(a.url, a.long, n, a.tokens, "The quick brown fox jumps over the lazy dog. ", ctrl)
    raise SystemExit
  for n in map(int, a.streams.split(",")):
    for _ in range(a.rounds): made, s = run(a.url, n, a.tokens)
    print(f"{n} streams: {made} tokens in {s:.2f} s, {made / s:.1f} tok/s in total")
