//! Tokenizers (tinygrad `llm/model.py` `SimpleTokenizer`). In: a GGUF file's `tokenizer.ggml.*` metadata and text.
//! Out: token ids, and text back from them.
