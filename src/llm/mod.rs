//! Large language models from GGUF files (tinygrad `llm/`): the tokenizer, chat templates, the Transformer and the
//! apps built on them (the `llm` binary's CLI and server).

pub mod tokenizer;
