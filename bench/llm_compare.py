"""Decode and prefill speed of `llm --benchmark` beside llama.cpp (llama-cpp-python, built from source into the venv:
`pip install llama-cpp-python`, about 13 minutes here) on the same GGUF file and thread count, in one run.

  python3 bench/llm_compare.py [MODEL.gguf ...] [--tokens 64] [--depth 128] [--max_context 1024] [--threads 2]

Defaults to the two models the tests use, in $TINYGRAD_MODELS_DIR (~/.cache/tinygrad/models). Ours is timed by the
binary (median decode step after the TinyJit captured; a 128-token prefill, second run); llama.cpp's the same way:
a 128-token prompt evaluated, then greedy steps of one token each, median. `--depth N` prefills N tokens instead (decode
at a longer context: more of each step is attention over the KV cache). tinygrad 0.14's own `llm` can't load
either file (its tokenizer rejects the `smollm` preset; it has no `gemma3`), so it is not in the table.
"""
import argparse, os, re, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("TINYGRAD_MODELS_DIR", os.path.expanduser("~/.cache/tinygrad/models"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402  (bench/bench_python.py: $PYTHON, else a venv under the cache)

def ours(path, tokens, ctx, depth):
  out = subprocess.run([f"{ROOT}/target/release/llm", "--model", path, "--benchmark", str(tokens), "--depth", str(depth), "--max_context", str(ctx)],
                       capture_output=True, text=True, check=True).stdout
  prefill = [float(m) for m in re.findall(r"prefill: \d+ tokens in [\d.]+ ms, ([\d.]+) tok/s", out)][-1]
  decode = float(re.search(r"decode: [\d.]+ ms/token, ([\d.]+) tok/s", out).group(1))
  copy = float(re.search(r"machine read bandwidth: ([\d.]+)", out).group(1))
  return prefill, decode, copy

LLAMA = r'''
import sys, time, statistics, numpy as np, llama_cpp
path, tokens, ctx, threads, depth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if "amx_tile" in open("/proc/cpuinfo").read():
  # (ggml's AMX matmuls die of SIGILL in this workplace's VMs, which list AMX; without the extra buffer types llama.cpp
  # runs its AVX-512 kernels)
  default = llama_cpp.llama_cpp.llama_model_default_params
  def no_extra():
    p = default(); p.use_extra_bufts = False; return p
  llama_cpp.llama_cpp.llama_model_default_params = no_extra
l = llama_cpp.Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=ctx, verbose=False)
prompt = l.tokenize(("The quick brown fox jumps over the lazy dog. " * (depth // 8 + 1)).encode(), add_bos=True)[:min(depth, ctx // 2)]
for _ in range(2):
  l.reset(); t = time.time(); l.eval(prompt); pf = len(prompt) / (time.time() - t)
times = []
for _ in range(tokens):
  # (the last token's logits: `l.scores` is filled only under logits_all)
  logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(l.ctx, -1), shape=(l.n_vocab(),))
  nxt = int(np.argmax(logits)); t = time.time(); l.eval([nxt]); times.append(time.time() - t)
print(pf, 1 / statistics.median(times[2:]))
'''

def llama(path, tokens, ctx, threads, depth):
  out = subprocess.run([bench_python.python("llama-cpp-python"), "-c", LLAMA, path, str(tokens), str(ctx), str(threads), str(depth)], capture_output=True, text=True, check=True).stdout
  pf, dec = out.split()[-2:]
  return float(pf), float(dec)

if __name__ == "__main__":
  ap = argparse.ArgumentParser()
  ap.add_argument("models", nargs="*", default=[f"{MODELS}/SmolLM2-135M-Instruct.Q4_1.gguf", f"{MODELS}/gemma-3-270m-q4_k_m.gguf"])
  ap.add_argument("--tokens", type=int, default=64)
  ap.add_argument("--max_context", type=int, default=1024)
  ap.add_argument("--depth", type=int, default=128)
  ap.add_argument("--threads", type=int, default=2)
  a = ap.parse_args()
  subprocess.run(["cargo", "build", "--release", "--bin", "llm"], cwd=ROOT, check=True)
  rows = []
  for m in a.models:
    (opf, odec, copy), (lpf, ldec) = ours(m, a.tokens, a.max_context, a.depth), llama(m, a.tokens, a.max_context, a.threads, a.depth)
    size = os.path.getsize(m) / 1e9
    rows.append(f"| {os.path.basename(m)} | {odec:.1f} | {ldec:.1f} | {odec / ldec:.2f}x | {odec * size:.1f} of {copy:.1f} | {opf:.1f} | {lpf:.1f} | {opf / lpf:.2f}x |")
  print("| model | decode tok/s (ours) | llama.cpp | ratio | our GB/s (file bytes per token) / machine read GB/s | prefill tok/s (ours) | llama.cpp | ratio |")
  print("|---|---|---|---|---|---|---|---|")
  print("\n".join(rows))
