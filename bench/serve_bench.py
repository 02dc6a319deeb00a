"""Tokens/s of `llm --serve` with one stream, then with several at once (the Batcher's slots decoding together).

  python3 bench/serve_bench.py [--url http://127.0.0.1:8080] [--tokens 128] [--streams 1,2,4] [--rounds 2]

Start the server first (`llm --model MODEL.gguf --serve 8080`, its default 4 slots). Each stream is a streamed
`/v1/completions` request for `--tokens` greedy tokens after its own prompt; the figure is all streams' completion
tokens over the wall time from the first request sent to the last token received (prefill included). The last of
`--rounds` rounds is printed per stream count: the first compiles the decode step for that set of slots.
"""
import argparse, json, threading, time, urllib.request

PROMPTS = ["Once upon a time, in a small village by the sea,", "The history of the printing press begins",
           "Here is a recipe for a simple tomato soup:", "The three laws of motion state that"]

def stream(url, prompt, tokens, out, i):
  body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True,
                     "stream_options": {"include_usage": True}}).encode()
  req = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
  with urllib.request.urlopen(req, timeout=600) as r:
    for line in r:
      if line.startswith(b"data: {") and (chunk := json.loads(line[6:])).get("usage"):
        out[i] = chunk["usage"]["completion_tokens"]

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
  a = p.parse_args()
  for n in map(int, a.streams.split(",")):
    for _ in range(a.rounds): made, s = run(a.url, n, a.tokens)
    print(f"{n} streams: {made} tokens in {s:.2f} s, {made / s:.1f} tok/s in total")
