// Whether a decode step's matrix-vector kernels wait on DRAM: the shape of our rendered Q8_0 kernel for SmolLM2's
// output projection (`r_4096_12_18_32`: 49,152 x 576 Q8_0, 30 MB; 12 rows a tile, the reduction's 32 lanes as two
// 16-float vectors, scales read as bytes), written compactly with GNU vectors, timed on one core over the whole
// matrix (from DRAM: every decode step reads weights a whole model's worth of bytes ago) and over 117 KB of it (from
// L2), each without and with a software prefetch of the next tile's rows (one line per row per block, a tile ahead).
//   clang -O2 -march=native -ffp-contract=off bench/prefetch_probe.c -o /tmp/prefetch_probe && /tmp/prefetch_probe
// (clang: gcc builds it too, but converts each half scale by a library call, which hides the effect)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__clang__)
typedef __fp16 half;
#else
typedef _Float16 half;
#endif
typedef float float16 __attribute__((vector_size(64), aligned(4)));
typedef signed char char16 __attribute__((vector_size(16), aligned(1)));
enum { K = 576, NB = K / 32, BLOCK = 34, ROW = NB * BLOCK, TILE = 12 };

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static void matvec(float* out, const float* x, const unsigned char* w, long tiles, int prefetch) {
  for (long t = 0; t < tiles; t++) {
    const unsigned char* tw = w + t * TILE * ROW;
    float16 acc[TILE] = {0};
    for (int b = 0; b < NB; b++) {
      float16 x0 = *(const float16*)(x + b * 32), x1 = *(const float16*)(x + b * 32 + 16);
      for (int r = 0; r < TILE; r++) {
        const unsigned char* blk = tw + r * ROW + b * BLOCK;
        if (prefetch) __builtin_prefetch(blk + TILE * ROW);
        half d; memcpy(&d, blk, 2);
        float16 q0 = __builtin_convertvector(*(const char16*)(blk + 2), float16), q1 = __builtin_convertvector(*(const char16*)(blk + 18), float16);
        acc[r] += x0 * (q0 * (float)d) + x1 * (q1 * (float)d);
      }
    }
    for (int r = 0; r < TILE; r++) {
      float s = 0;
      for (int i = 0; i < 16; i++) s += acc[r][i];
      out[t * TILE + r] = s;
    }
  }
}

int main(void) {
  long rows = 49152, tiles = rows / TILE, hot_tiles = 16;
  unsigned char* w = malloc(rows * ROW);
  for (long i = 0; i < rows * ROW; i++) w[i] = (unsigned char)(i * 2654435761u >> 24);
  for (long i = 0; i < rows * NB; i++) w[i * BLOCK] = 0, w[i * BLOCK + 1] = 0x2c;
  float x[K], *out = malloc(rows * sizeof(float)), ref = 0;
  for (int i = 0; i < K; i++) x[i] = (float)(i % 7) - 3;
  for (int where = 0; where < 2; where++)
    for (int prefetch = 0; prefetch < 2; prefetch++) {
      long n = where ? hot_tiles : tiles;
      double best = 1e9;
      for (int rep = 0; rep < (where ? 400 : 7); rep++) {
        double t0 = now();
        matvec(out, x, w, n, prefetch);
        best = best < now() - t0 ? best : now() - t0;
      }
      if (!where && !prefetch) ref = out[rows - 1];
      printf("%s, %s prefetch: %8.1f us  %5.1f GB/s%s\n", where ? "L2  " : "DRAM", prefetch ? "with   " : "without", best * 1e6,
             n * TILE * ROW / best / 1e9, !where && out[rows - 1] != ref ? "  (result differs!)" : "");
    }
}
