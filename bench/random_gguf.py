"""A GGUF file of a real model's shape with random weights, for speed figures of architectures whose real files this
machine can't download (their tokens are noise; their kernels, bytes and launches are the real model's).

  python3 bench/random_gguf.py qwen3-0.6b OUT.gguf     # then: python3 bench/llm_compare.py OUT.gguf
  (needs numpy and gguf: pip install gguf)

Shapes (the Hugging Face configs'): `qwen3-0.6b` (Qwen3-0.6B: 28 layers, width 1024, 16 query heads and 8 key-value
heads of 128, FFN 3072, vocabulary 151,936, tied embeddings; every matrix Q8_0 as Qwen's own Q8_0 file), `qwen2.5-0.5b`
(Qwen2.5-0.5B: 24 layers, width 896, 14 and 2 heads of 64, FFN 4864, q/k/v biases; Q8_0). The tokenizer is
tests/llm/gen_tiny.py's 384 byte-level tokens, padded to the vocabulary with unused ones.
"""
import pathlib, sys
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "llm"))
import gen_tiny  # noqa: E402

SHAPES = {  # arch, layers, width, heads, kv heads, head width, FFN, vocabulary, RoPE base
  "qwen3-0.6b": ("qwen3", 28, 1024, 16, 8, 128, 3072, 151936, 1e6),
  "qwen2.5-0.5b": ("qwen2", 24, 896, 14, 2, 64, 4864, 151936, 1e6),
}

def write(name, path):
  arch, layers, dim, nh, nkv, hd, ffn, vocab, theta = SHAPES[name]
  rng = np.random.default_rng(0)
  w = gguf.GGUFWriter(str(path), arch)
  w.add_context_length(32768); w.add_embedding_length(dim); w.add_block_count(layers); w.add_feed_forward_length(ffn)
  w.add_head_count(nh); w.add_head_count_kv(nkv); w.add_key_length(hd); w.add_value_length(hd)
  w.add_layer_norm_rms_eps(1e-6); w.add_rope_freq_base(theta)
  tokens, types, merges = gen_tiny.tokenizer()
  tokens += [f"[PAD{i}]" for i in range(len(tokens), vocab)]; types += [5] * (vocab - len(types))
  w.add_tokenizer_model("gpt2"); w.add_tokenizer_pre("qwen2"); w.add_token_list(tokens); w.add_token_types(types)
  w.add_token_merges(merges); w.add_eos_token_id(tokens.index("<|im_end|>")); w.add_add_bos_token(False)
  mat = lambda o, i: quantize((rng.standard_normal((o, i), dtype=np.float32) / np.sqrt(i)).astype(np.float32), T.Q8_0)
  vec = lambda n: (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
  w.add_tensor("token_embd.weight", mat(vocab, dim), raw_dtype=T.Q8_0)
  w.add_tensor("output_norm.weight", vec(dim))
  for i in range(layers):
    b = lambda n: f"blk.{i}.{n}"
    w.add_tensor(b("attn_norm.weight"), vec(dim))
    for n, o in (("attn_q", nh * hd), ("attn_k", nkv * hd), ("attn_v", nkv * hd)):
      w.add_tensor(b(f"{n}.weight"), mat(o, dim), raw_dtype=T.Q8_0)
      if arch == "qwen2": w.add_tensor(b(f"{n}.bias"), 0.1 * vec(o))
    if arch == "qwen3": w.add_tensor(b("attn_q_norm.weight"), vec(hd)); w.add_tensor(b("attn_k_norm.weight"), vec(hd))
    w.add_tensor(b("attn_output.weight"), mat(dim, nh * hd), raw_dtype=T.Q8_0)
    w.add_tensor(b("ffn_norm.weight"), vec(dim))
    for n, (o, i_) in (("ffn_gate", (ffn, dim)), ("ffn_up", (ffn, dim)), ("ffn_down", (dim, ffn))):
      w.add_tensor(b(f"{n}.weight"), mat(o, i_), raw_dtype=T.Q8_0)
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

if __name__ == "__main__":
  write(sys.argv[1], sys.argv[2])
