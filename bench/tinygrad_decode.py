"""tinygrad 0.14's LLM decode timed on one GGUF file, token ids in and out (its tokenizer rejects some presets, so
none is used; the 0.14.0 wheel's `python -m tinygrad.llm` does not import: see below): prints the greedy tokens after token 1 and the median decode step, as `llm --benchmark` does.

  DEV=CUDA python3 bench/tinygrad_decode.py MODEL.gguf [TOKENS]
"""
import statistics, sys, time, types
from tinygrad import nn

# the 0.14.0 wheel lacks tinygrad/llm/kernels (AMD's hand-written kernels), which model.py imports: plain Linear
# layers and no custom kernels, what it uses on every other device
amd = types.ModuleType("tinygrad.llm.kernels.amd")
amd.Linear, amd.amd_custom_kernels_supported = nn.Linear, lambda device: False
amd.flash_attention = amd.gated_delta_prefill = None
sys.modules["tinygrad.llm.kernels"], sys.modules["tinygrad.llm.kernels.amd"] = types.ModuleType("tinygrad.llm.kernels"), amd
from tinygrad.llm.model import Transformer  # noqa: E402

path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 64
t0 = time.perf_counter()
model, _ = Transformer.from_gguf(path, max_context=1024)
gen, times, toks = model.generate([1]), [], []
for _ in range(n):
  t = time.perf_counter(); toks.append(next(gen)); times.append(time.perf_counter() - t)
step = statistics.median(times[4:])
print(f"tinygrad: load and first step {time.perf_counter() - t0 - sum(times[1:]):.1f} s, decode {step*1e3:.2f} ms/token, {1/step:.1f} tok/s")
print("tokens:", toks[:16])
