#!/usr/bin/env bash
# Builds bench/attn_values_probe.c against the values kernel of a 2-token prompt chunk joined to a decode step at
# 640 cache rows, as `llm --serve` renders it for SmolLM2 on this machine (`DEBUG=4`, from a long prompt arriving
# while 2 streams decode), with clang and gcc and the CPU device's flags, and times it from L3 and from L2.
#   bash bench/attn_values_probe.sh [MODEL.gguf]   (default: SmolLM2-135M-Instruct.Q4_1.gguf in the models dir)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-${TINYGRAD_MODELS_DIR:-$HOME/.cache/tinygrad/models}/SmolLM2-135M-Instruct.Q4_1.gguf}"
OUT="$(mktemp -d)"
PORT=8097
cargo build -q --release --bin llm
DEBUG=4 CACHELEVEL=0 ./target/release/llm --model "$MODEL" --serve $PORT --max_context 2048 > "$OUT/raw" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$OUT"' EXIT
until curl -sf http://127.0.0.1:$PORT/health > /dev/null; do sleep 1; done
python3 bench/serve_bench.py --url http://127.0.0.1:$PORT --long 1000 --streams 2 --tokens 400 > /dev/null
sed 's/\x1b\[[0-9;]*m//g' "$OUT/raw" > "$OUT/log"
k=r_2_3_32_3_2_640
awk -v k="$k" '$0 ~ "^"k": opts" {on=1; next} on {print} on && $0 ~ "^void "k"\\(" {body=1} body && /^}$/ {exit}' \
  "$OUT/log" > "$OUT/$k.c"
[ -s "$OUT/$k.c" ] || { echo "no kernel $k in the DEBUG=4 output (another model or heuristic?)"; exit 1; }
FLAGS="-O2 -march=native -fPIC -ffp-contract=off -fno-math-errno -fwrapv -mprefer-vector-width=512"
for cc in clang gcc; do
  command -v $cc >/dev/null || continue
  $cc $FLAGS -c "$OUT/$k.c" -o "$OUT/k.o"
  $cc -O2 bench/attn_values_probe.c "$OUT/k.o" -o "$OUT/probe_$cc" -lpthread
  echo -n "$cc: "; "$OUT/probe_$cc"; echo -n "$cc: "; HOT=1 "$OUT/probe_$cc"
done
