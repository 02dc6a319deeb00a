#!/usr/bin/env bash
# Builds bench/quant_rows_probe.c against the 1- and 4-row gate/up kernels `llm` renders for SmolLM2 on this machine
# (`DEBUG=4`), with clang and gcc and the CPU device's flags, and times each from L2 (1 copy) and from DRAM (100).
#   bash bench/quant_rows_probe.sh [MODEL.gguf]   (default: SmolLM2-135M-Instruct.Q4_1.gguf in the models dir)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-${TINYGRAD_MODELS_DIR:-$HOME/.cache/tinygrad/models}/SmolLM2-135M-Instruct.Q4_1.gguf}"
OUT="$(mktemp -d)"
cargo build -q --release --bin llm
DEBUG=4 CACHELEVEL=0 ./target/release/llm --model "$MODEL" --benchmark 4 2>&1 | sed 's/\x1b\[[0-9;]*m//g' > "$OUT/log"
# each kernel's source: from the line after its `NAME: opts [...]` header to its function's closing brace
for k in r_192_16_18 r_192_16_4_18; do
  awk -v k="$k" '$0 ~ "^"k": opts" {on=1; next} on {print} on && $0 ~ "^void "k"\\(" {body=1} body && /^}$/ {exit}' \
    "$OUT/log" > "$OUT/$k.c"
  [ -s "$OUT/$k.c" ] || { echo "no kernel $k in the DEBUG=4 output (another model or heuristic?)"; exit 1; }
done
FLAGS="-O2 -march=native -fPIC -ffp-contract=off -fno-math-errno -fwrapv -mprefer-vector-width=512"
for cc in clang gcc; do
  command -v $cc >/dev/null || continue
  $cc $FLAGS -c "$OUT/r_192_16_18.c" -o "$OUT/k1.o" && $cc $FLAGS -c "$OUT/r_192_16_4_18.c" -o "$OUT/k4.o"
  $cc -O2 bench/quant_rows_probe.c "$OUT/k1.o" "$OUT/k4.o" -o "$OUT/probe_$cc" -lpthread
  for copies in 1 100; do for rows in 1 4; do echo -n "$cc: "; "$OUT/probe_$cc" $copies $rows 2; done; done
done
rm -rf "$OUT"
