#!/usr/bin/env python3
"""Tiny random `qwen2`, `qwen3` and `llama` GGUF models for tests/llm.rs (no real Qwen file fits the tests'
downloads), their numpy references (bench/llm_reference.py's forward and format), and a check of those references
against llama.cpp.

    $(python3 bench/bench_python.py llama-cpp-python) tests/llm/gen_tiny.py   # (needs gguf too: pip install gguf)

Writes tests/llm/{qwen2,qwen3,llama}_tiny.gguf and their *_reference.json. Each model: a byte-level BPE vocabulary
(the 256 bytes, merges learnt from a few sentences, ChatML's special tokens; pre-tokenizer `qwen2`, llama's
`llama-bpe` with a BOS), 2 layers, Q8_0 matrices (the integer path), float32 norms and biases, grouped-query
attention; qwen3 with a head width (`key_length`) that is not the model width over the heads, and a Qwen-style chat
template (Python string methods, a namespace, a reversed loop); llama with Llama 3's RoPE frequency divisors
(`rope_freqs`). llama.cpp must agree with the numpy forward (cosine of every position's logits at least 0.999, the
same top token unless the reference's leads by a quarter or less), else the script fails: the references then check
our Rust against both.
"""
import json, pathlib, re, sys
from collections import Counter
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "bench"))
import llm_reference  # noqa: E402

CORPUS = ("The capital of France is Paris. Once upon a time, in a small village, there lived a fox. "
          "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n") * 3
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 384
# (a template of its own with the Jinja a Qwen 3 template uses: string methods, a namespace, a reversed loop)
TEMPLATE = """{%- set ns = namespace(last_user=-1) -%}
{%- for m in messages[::-1] -%}{%- if ns.last_user < 0 and m.role == 'user' -%}{%- set ns.last_user = messages|length - 1 - loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- for m in messages -%}
{%- set content = m.content -%}
{%- if m.role == 'assistant' and '</think>' in content -%}{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}{%- endif -%}
{%- if m.role == 'user' and content.startswith('/') -%}{%- set content = content[1:].strip() -%}{%- endif -%}
{{- '<|im_start|>' + m.role + '\\n' + content.rstrip() + '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- if ns.last_user >= 0 -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}{%- endif -%}"""

def byte_unicode():
  """GPT-2's printable stand-in for each byte."""
  bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
  cs, n = bs[:], 0
  for b in range(256):
    if b not in bs: bs.append(b); cs.append(256 + n); n += 1
  return {b: chr(c) for b, c in zip(bs, cs)}

def tokenizer():
  """Tokens (bytes, merged pairs, specials, padding), their types, and the merges, learnt by BPE on CORPUS."""
  b2u = byte_unicode()
  words = Counter("".join(b2u[b] for b in w.encode()) for w in re.findall(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+", CORPUS))
  words = {tuple(w): c for w, c in words.items()}
  tokens, merges = [b2u[b] for b in range(256)], []
  while len(tokens) < VOCAB - len(SPECIAL) - 16:
    pairs = Counter()
    for w, c in words.items():
      for p in zip(w, w[1:]): pairs[p] += c
    if not pairs: break
    (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
    merges.append(f"{a} {b}"); tokens.append(a + b)
    new = {}
    for w, c in words.items():
      out, i = [], 0
      while i < len(w):
        if i + 1 < len(w) and w[i] == a and w[i + 1] == b: out.append(a + b); i += 2
        else: out.append(w[i]); i += 1
      new[tuple(out)] = c
    words = new
  types = [1] * len(tokens) + [3] * len(SPECIAL)
  tokens += SPECIAL
  while len(tokens) < VOCAB: types.append(5); tokens.append(f"[PAD{len(tokens)}]")
  return tokens, types, merges

def write(arch, path, rng):
  dim, nh, nkv, hd, ffn, layers = (64, 4, 2, 32, 96, 2) if arch == "qwen3" else (128, 4, 2, 32, 96, 2)
  w = gguf.GGUFWriter(str(path), arch)
  w.add_context_length(256); w.add_embedding_length(dim); w.add_block_count(layers); w.add_feed_forward_length(ffn)
  w.add_head_count(nh); w.add_head_count_kv(nkv); w.add_key_length(hd); w.add_value_length(hd)
  w.add_layer_norm_rms_eps(1e-6); w.add_rope_freq_base(1e4 if arch == "llama" else 1e6)
  tokens, types, merges = tokenizer()
  w.add_tokenizer_model("gpt2"); w.add_tokenizer_pre("llama-bpe" if arch == "llama" else "qwen2")
  w.add_token_list(tokens); w.add_token_types(types); w.add_token_merges(merges)
  w.add_eos_token_id(tokens.index("<|im_end|>")); w.add_bos_token_id(tokens.index("<|endoftext|>"))
  w.add_add_bos_token(arch == "llama")
  if arch == "qwen3": w.add_chat_template(TEMPLATE)
  mat = lambda o, i, s=0.5: quantize((rng.standard_normal((o, i)) * s / np.sqrt(i)).astype(np.float32), T.Q8_0)
  vec = lambda n, s=0.1, c=1.0: (c + rng.standard_normal(n) * s).astype(np.float32)
  w.add_tensor("token_embd.weight", mat(VOCAB, dim, 1.0 * np.sqrt(dim)), raw_dtype=T.Q8_0)
  w.add_tensor("output_norm.weight", vec(dim))
  # (Llama 3's long-context RoPE, each frequency divided by its factor; here the fast ones most, 8 to 1, so that a
  # short prompt's angles show whether they were divided)
  if arch == "llama": w.add_tensor("rope_freqs.weight", np.geomspace(8, 1, hd // 2).astype(np.float32))
  # (an output projection of its own: tied, a token's embedding would make it its own likeliest successor)
  w.add_tensor("output.weight", mat(VOCAB, dim, 4.0), raw_dtype=T.Q8_0)
  for i in range(layers):
    b = lambda n: f"blk.{i}.{n}"
    w.add_tensor(b("attn_norm.weight"), vec(dim))
    for n, o in (("attn_q", nh * hd), ("attn_k", nkv * hd), ("attn_v", nkv * hd)):
      w.add_tensor(b(f"{n}.weight"), mat(o, dim, 2.0), raw_dtype=T.Q8_0)
      if arch == "qwen2": w.add_tensor(b(f"{n}.bias"), vec(o, 0.5, 0.0))
    if arch == "qwen3":
      # (weights far from 1: a norm after RoPE instead of before it then changes the logits clearly)
      w.add_tensor(b("attn_q_norm.weight"), vec(hd, 0.5)); w.add_tensor(b("attn_k_norm.weight"), vec(hd, 0.5))
    w.add_tensor(b("attn_output.weight"), mat(dim, nh * hd), raw_dtype=T.Q8_0)
    w.add_tensor(b("ffn_norm.weight"), vec(dim))
    w.add_tensor(b("ffn_gate.weight"), mat(ffn, dim, 2.0), raw_dtype=T.Q8_0)
    w.add_tensor(b("ffn_up.weight"), mat(ffn, dim, 2.0), raw_dtype=T.Q8_0)
    w.add_tensor(b("ffn_down.weight"), mat(dim, ffn), raw_dtype=T.Q8_0)
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

def reference(path, out, count=16):
  """bench/llm_reference.py's output for the model at `path`, checked against llama.cpp's logits."""
  import llama_cpp
  if "amx_tile" in open("/proc/cpuinfo").read():
    # (ggml's AMX matmuls die in this workplace's VMs, which list AMX: without the extra buffer types, AVX-512 runs them)
    default = llama_cpp.llama_cpp.llama_model_default_params
    def no_extra():
      p = default(); p.use_extra_bufts = False; return p
    llama_cpp.llama_cpp.llama_model_default_params = no_extra
  meta, weights = llm_reference.load(str(path))
  l = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=2, logits_all=True, verbose=False)
  res, worst = [], 1.0
  for text in llm_reference.PROMPTS:
    ids = l.tokenize(text.encode(), add_bos=True, special=True)
    first = llm_reference.forward(meta, weights, ids)
    l.reset(); l.eval(ids)
    theirs = np.array(l.scores[:len(ids)])
    for p, (a, b) in enumerate(zip(first, theirs)):
      # (llama.cpp rounds activations to 8 bits and keys and values to 16: a top token a quarter or less ahead may change)
      cos, margin = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), np.sort(a)[-1] - np.sort(a)[-2]
      assert cos >= 0.999 and (a.argmax() == b.argmax() or margin <= 0.25), f"{path.name} {text!r} position {p}: cosine {cos}"
      worst = min(worst, cos)
    seq = list(ids)
    for _ in range(count): seq.append(int(np.argmax(llm_reference.forward(meta, weights, seq)[-1])))
    rows = [{"sample": [round(float(v), 4) for v in row], "top": [int(i) for i in np.argsort(-row)[:8]]} for row in first]
    res.append({"prompt": text, "ids": ids, "greedy": seq[len(ids):], "stride": 1, "logits": rows})
  print(f"{path.name}: llama.cpp's logits at every prompt position agree with the reference's (worst cosine {worst:.5f})")
  json.dump(res, open(out, "w"), indent=None)

if __name__ == "__main__":
  for seed, arch in enumerate(["qwen2", "qwen3", "llama"]):
    path = HERE / f"{arch}_tiny.gguf"
    write(arch, path, np.random.default_rng(seed))
    reference(path, HERE / f"{arch}_tiny_reference.json")
