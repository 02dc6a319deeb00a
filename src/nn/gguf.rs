//! GGUF files (tinygrad `nn/state.py` `gguf_load`, `llm/gguf.py`). In: a `.gguf` file. Out: its metadata and its
//! tensors, dequantized on the device.
