"""Reference logits for the `llm` tests: the same Transformer forward in numpy float32 from
`gguf.quants.dequantize`d weights (no KV cache: every step recomputes the whole sequence), for llama, qwen2, qwen3
and gemma3 GGUF files. Writes, per prompt: its ids, the greedy continuation, and at every prompt position a sample of the
logits (every `stride`-th token's) and the top 8 tokens, as JSON.

usage: python bench/llm_reference.py MODEL.gguf OUT.json [--count 32]  (needs numpy, gguf, and llama-cpp-python for
the prompts' token ids). tests/llm/ holds its output for the two models the tests use.
"""
import json, sys
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

def load(path):
  r = GGUFReader(path)
  meta = {}
  for k, f in r.fields.items():
    if not f.types: continue
    t = f.types[0].name
    if t == "STRING": meta[k] = bytes(f.parts[f.data[0]]).decode()
    elif t != "ARRAY": meta[k] = f.parts[f.data[0]][0].item()
  w = {}
  for t in r.tensors:
    a = dequantize(t.data, t.tensor_type).astype(np.float32)
    w[t.name] = a.reshape([int(d) for d in reversed(t.shape)])
  return meta, w

def rms(x, g, eps): return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

def rope(x, pos, theta, interleaved, factors=None):  # x: [T, H, D]; factors: llama 3's rope_freqs, [D / 2]
  d = x.shape[-1]; half = d // 2
  inv = theta ** (-np.arange(half, dtype=np.float64) * 2 / d) / (1 if factors is None else factors)
  ang = (pos[:, None].astype(np.float64) * inv[None]).astype(np.float32)[:, None, :]
  c, s = np.cos(ang), np.sin(ang)
  if interleaved: a, b = x[..., 0::2], x[..., 1::2]
  else: a, b = x[..., :half], x[..., half:]
  ra, rb = a * c - b * s, a * s + b * c
  if interleaved: return np.stack([ra, rb], -1).reshape(x.shape)
  return np.concatenate([ra, rb], -1)

def gelu(x): return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

def forward(meta, w, ids):
  arch = meta["general.architecture"]; p = lambda k: meta[f"{arch}.{k}"]
  dim, nh, nkv, L = p("embedding_length"), p("attention.head_count"), p("attention.head_count_kv"), p("block_count")
  hd = meta.get(f"{arch}.attention.key_length", dim // nh); eps = p("attention.layer_norm_rms_epsilon")
  theta = meta.get(f"{arch}.rope.freq_base", 10000.0); gemma = arch == "gemma3"
  window = meta.get(f"{arch}.attention.sliding_window", 512)
  T = len(ids); pos = np.arange(T)
  x = w["token_embd.weight"][ids]
  if gemma: x = x * np.float32(np.sqrt(dim))
  for i in range(L):
    b = lambda n: w[f"blk.{i}.{n}.weight"]
    bias = lambda n: w.get(f"blk.{i}.{n}.bias", np.float32(0))  # (qwen2's q, k and v)
    local = gemma and (i + 1) % 6 != 0
    h = rms(x, b("attn_norm"), eps)
    proj = lambda n, heads: (h @ b(n).T + bias(n)).reshape(T, heads, hd)
    q, k, v = proj("attn_q", nh), proj("attn_k", nkv), proj("attn_v", nkv)
    if f"blk.{i}.attn_q_norm.weight" in w: q, k = rms(q, b("attn_q_norm"), eps), rms(k, b("attn_k_norm"), eps)  # gemma3, qwen3
    th = 10000.0 if local else theta
    f = None if local else w.get("rope_freqs.weight")
    q, k = rope(q, pos, th, arch == "llama", f), rope(k, pos, th, arch == "llama", f)
    g = nh // nkv
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    sc = np.einsum("thd,shd->hts", q, k) / np.float32(np.sqrt(hd))
    mask = pos[None, :] <= pos[:, None]
    if local: mask &= pos[None, :] > pos[:, None] - window
    sc = np.where(mask[None], sc, -np.inf)
    sc = np.exp(sc - sc.max(-1, keepdims=True)); sc /= sc.sum(-1, keepdims=True)
    o = np.einsum("hts,shd->thd", sc, v).reshape(T, nh * hd) @ b("attn_output").T
    if gemma: o = rms(o, b("post_attention_norm"), eps)
    x = x + o
    h = rms(x, b("ffn_norm"), eps)
    gt = h @ b("ffn_gate").T
    f = ((gelu(gt) if gemma else gt / (1 + np.exp(-gt))) * (h @ b("ffn_up").T)) @ b("ffn_down").T
    if gemma: f = rms(f, b("post_ffw_norm"), eps)
    x = x + f
  x = rms(x, w["output_norm.weight"], eps)
  return x @ w.get("output.weight", w["token_embd.weight"]).T

PROMPTS = ["The capital of France is", "Once upon a time, in a small village,", "def fibonacci(n):\n"]
# the logits kept per position: every STRIDE-th token's (a sample the cosine is taken over; 388th for vocabularies
# over 100k tokens) and the top 8
STRIDE = 97

if __name__ == "__main__":
  path, out = sys.argv[1], sys.argv[2]
  count = int(sys.argv[sys.argv.index("--count") + 1]) if "--count" in sys.argv else 32
  import llama_cpp  # (only its tokenizer: the prompts' ids, which tests/tokenizer.rs checks ours against)
  vocab = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
  meta, w = load(path)
  res = []
  for text in PROMPTS:
    ids = vocab.tokenize(text.encode(), add_bos=True, special=True)
    seq = list(ids); first = forward(meta, w, seq)
    for _ in range(count):
      seq.append(int(np.argmax(forward(meta, w, seq)[-1])))
    stride = STRIDE if first.shape[-1] < 100000 else 4 * STRIDE
    rows = [{"sample": [round(float(v), 4) for v in row[::stride]], "top": [int(i) for i in np.argsort(-row)[:8]]} for row in first]
    res.append({"prompt": text, "ids": ids, "greedy": seq[len(ids):], "stride": stride, "logits": rows})
  json.dump(res, open(out, "w"), indent=None)
