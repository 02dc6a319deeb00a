#!/usr/bin/env python3
"""llama.cpp's token ids for a few varied strings, for tests/tokenizer.rs.

Needs llama-cpp-python and the two GGUF files in ~/.cache/tinygrad/models. Writes tests/tokenizer/reference.json:
{model file name: [{"text": str, "ids": [int]}]}, ids from Llama.tokenize(add_bos=False, special=True): hand-picked
strings, then 100 seeded random ones per model."""
import json, pathlib, random
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

# pieces of random strings: ASCII, whitespace of several kinds, accents, other scripts, emoji with modifiers, contractions
ATOMS = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") + \
  list(" \t\n\r  \u00a0\u3000'\".,;:!?-_()[]{}<>/\\|@#$%^&*+=~`") + list("éüñßøçÀÉ世界日本語한국어مرحباşğıšžёжщ") + \
  ["🙂", "👍🏽", "\u200d", "\u0301", "🇫🇷", "…", "—", "’", "s", "t", "ll", "re", "ve", " ", "  ", "\n\n"]

def random_strings(specials:list[str], n:int, seed:int=1) -> list[str]:
  rng = random.Random(seed)
  return ["".join(rng.choice(ATOMS + specials if rng.random() < 0.1 else ATOMS) for _ in range(rng.randint(0, 40))) for _ in range(n)]

SPECIAL_TOKENS = {
  "SmolLM2-135M-Instruct.Q4_1.gguf": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"],
  "gemma-3-270m-q4_k_m.gguf": ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<table>", "</td>", "[multimodal]", "<unused3>"],
}

def main():
  out = {}
  for name, extra in SPECIAL.items():
    llm = llama_cpp.Llama(model_path=str(MODELS / name), vocab_only=True, verbose=False)
    texts = COMMON + extra + random_strings(SPECIAL_TOKENS[name], 100)
    out[name] = [{"text": t, "ids": llm.tokenize(t.encode(), add_bos=False, special=True)} for t in texts]
  path = pathlib.Path(__file__).parent / "reference.json"
  # one case a line
  models = [f"{json.dumps(name)}: [\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]" for name, cases in out.items()]
  path.write_text("{\n" + ",\n".join(models) + "\n}\n")
  print(f"wrote {path}: {sum(len(v) for v in out.values())} strings")

if __name__ == "__main__": main()
