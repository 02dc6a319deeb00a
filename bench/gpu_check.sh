#!/usr/bin/env bash
# DEV=CUDA on a machine with an NVIDIA GPU, beside tinygrad 0.14's CUDA on the same GPU, in one run: conformance
# (default and NOOPT=1), the differential fuzzer, the CUDA unit and tensor-core tests, beautiful_mnist, and an LLM
# decode. Made for a lent machine with no compiler for Rust and no network, so everything comes prepared in DIR:
#   bins.tar.xz   release builds (conformance, beautiful_mnist, llm, bench, and the test binaries fuzz_devices,
#                 tensor_cores, libtests = `cargo test --release --lib`), stripped
#   conformance.tar.xz datasets/   copies of ../shared's (`tar cJf conformance.tar.xz conformance`)
#   *.gguf.xz     a GGUF model, xz-compressed (a truncated SmolLM2 fits the upload limit: bench/gguf_trunc.py)
#   tinygrad-*.whl           tinygrad 0.14.0's wheel
#   node.tar.xz  onnx's node suite as tests/onnx/gen_node_suite.py writes it (`tar cJf node.tar.xz node`; optional)
# Usage: bash bench/gpu_check.sh DIR   (logs under $OUT, else /tmp/gpu-check)
set -u
D=$(realpath "${1:-.dev}"); O=${OUT:-/tmp/gpu-check}; mkdir -p "$O"; B=/tmp/gpu-bin; mkdir -p $B; tar xJf "$D/bins.tar.xz" -C $B
tar xJf "$D/conformance.tar.xz" -C /tmp; for g in "$D"/*.gguf.xz; do xz -dc "$g" > /tmp/$(basename "$g" .xz); done
say() { echo "=== $* ($(date +%T))"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; nproc
NV=$(ls /usr/local/cuda/lib64/libnvrtc.so.1[0-9] 2>/dev/null | head -1)
[ -n "$NV" ] || NV=$(find / -name 'libnvrtc.so.1[0-9]' -not -path '/proc/*' 2>/dev/null | head -1)
export NVRTC_PATH=$NV LD_LIBRARY_PATH=$(dirname "$NV"):${LD_LIBRARY_PATH:-} TINYGRAD_DATA_DIR=$D/datasets CACHELEVEL=0
echo "NVRTC: $NV"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$D"/tinygrad-*.whl && export PYTHONPATH=/tmp/site

say "correctness (in parallel)"
DEV=CUDA timeout 150 $B/conformance /tmp/conformance/ops >"$O/conformance.txt" 2>&1 &
DEV=CUDA NOOPT=1 timeout 150 $B/conformance /tmp/conformance/ops >"$O/conformance_noopt.txt" 2>&1 &
timeout 150 $B/fuzz_devices fused_on_cuda --nocapture >"$O/fuzz.txt" 2>&1 &
(timeout 80 $B/libtests runtime::cuda --nocapture; timeout 80 $B/tensor_cores gpu --nocapture) >"$O/unit.txt" 2>&1 &
[ -f "$D/node.tar.xz" ] && tar xJf "$D/node.tar.xz" -C /tmp && [ -x $B/onnx_test ] &&
  DEV=CUDA timeout 240 $B/onnx_test /tmp/node --expected tests/onnx/expected_failures.txt >"$O/onnx.txt" 2>&1 &
wait
for f in conformance conformance_noopt fuzz unit onnx; do say "$f"; grep -v "^test .* ok$" "$O/$f.txt" | tail -25; done

say "beautiful_mnist, ours"
DEV=CUDA timeout 90 $B/beautiful_mnist 2>&1 | grep -v "^\s*$" | tail -4
say "beautiful_mnist, tinygrad 0.14"
DEV=CUDA STEPS=30 timeout 90 python3 bench/beautiful_mnist_tinygrad.py 2>&1 | tail -3
M=$(ls /tmp/*.gguf | head -1)
say "LLM decode, ours ($M)"
DEV=CUDA timeout 60 $B/llm --model "$M" --prompt "The capital of France is" --count 16 --temperature 0 2>&1 | tail -2
DEV=CUDA timeout 90 $B/llm --model "$M" --benchmark 64 2>&1 | tail -9
say "LLM decode, tinygrad 0.14"
DEV=CUDA timeout 90 python3 bench/tinygrad_decode.py "$M" 64 2>&1 | tail -3
say "matmuls, ours"
DEV=CUDA FILTER=mat timeout 45 $B/bench 2>&1 | tail -8
say done
