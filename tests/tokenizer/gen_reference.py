#!/usr/bin/env python3
"""llama.cpp's token ids for a few varied strings, for tests/tokenizer.rs.

Needs llama-cpp-python and the two GGUF files in ~/.cache/tinygrad/models. Writes tests/tokenizer/reference.json:
{model file name: [{"text": str, "ids": [int]}]}, ids from Llama.tokenize(add_bos=False, special=True)."""
import json, os, pathlib
import llama_cpp

MODELS = pathlib.Path.home() / ".cache/tinygrad/models"
COMMON = [
  "The capital of France is",
  "Hello, world!",
  "  leading spaces and trailing   ",
  "line one\nline two\n\n\nthree newlines\r\nwindows",
  "tabs\there\t\tand\t\t\tmore",
  "digits 12345 and 3.14159 and 1,000,000",
  "don't won't I'll we've you're she'd it's DON'T",
  "héllo wörld naïve café",
  "héllo 世界 🙂",
  "日本語のテキストと한국어",
  "punctuation!!! ?? ... --- (parens) [brackets] {braces} <angle>",
  "def f(x):\n    return x**2  # code",
  "emoji 👍🏽 family 👨‍👩‍👧 flag 🇫🇷",
  "mixed CASE and camelCase and snake_case_words",
  "long runs:" + " " * 70 + "|" + "\n" * 40 + "|" + "\t" * 40 + "|" + "9" * 31 + "|" + "!" * 20,
  "a",
  " ",
  "\n",
  "",
]
SPECIAL = {
  "SmolLM2-135M-Instruct.Q4_1.gguf": ["<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
                                      "text<|endoftext|>more text", "<|im_start|><|im_end|>"],
  "gemma-3-270m-q4_k_m.gguf": ["<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
                               "<bos>text<eos>more", "<table><tr><td>cell</td></tr></table>",
                               "spaces    between\n\n\nnewlines"],
}

def main():
  out = {}
  for name, extra in SPECIAL.items():
    llm = llama_cpp.Llama(model_path=str(MODELS / name), vocab_only=True, verbose=False)
    out[name] = [{"text": t, "ids": llm.tokenize(t.encode(), add_bos=False, special=True)} for t in COMMON + extra]
  path = pathlib.Path(__file__).parent / "reference.json"
  # one case a line
  models = [f"{json.dumps(name)}: [\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]" for name, cases in out.items()]
  path.write_text("{\n" + ",\n".join(models) + "\n}\n")
  print(f"wrote {path}: {sum(len(v) for v in out.values())} strings")

if __name__ == "__main__": main()
