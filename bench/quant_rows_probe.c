// Whether a batched decode step's quantized projection waits on DRAM or on its integer dot products: SmolLM2's gate
// and up projection as our renderer writes it for 1 row (`r_192_16_18`) and 4 rows (`r_192_16_4_18`: 3,072 x 576
// Q4_1 in tiles of 16 rows, 884 KB of quant words and 221 KB of float16 scales), linked from the C that `DEBUG=4`
// prints (bench/quant_rows_probe.sh extracts it), timed on 2 threads splitting the tiles as the CPU team does, over
// `copies` copies of the weights on 2 MB pages: 1 copy (from L2) or 100 (110 MB: from DRAM, as a step reads them).
//   bash bench/quant_rows_probe.sh   (prints the best of 20 passes for each compiler, rows and copies)
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
void r_192_16_4_18(void**, const int*, int, int);
void r_192_16_18(void**, const int*, int, int);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int copies, rows, nt;
static char *w, *h;
static int* a;
static float *o, *s;
static const size_t WBYTES = 192 * 1152 * 4, HBYTES = 192 * 576 * 2;
static pthread_barrier_t bar;
static double best[2];
static void* run(void* arg) {
  long t = (long)arg;
  int per = 192 / nt;
  for (int pass = 0; pass < 20; pass++) {
    pthread_barrier_wait(&bar);
    double t0 = now();
    for (int c = 0; c < copies; c++) {
      void* b[5] = {o, w + c * WBYTES, a, h + c * HBYTES, s};
      (rows == 4 ? r_192_16_4_18 : r_192_16_18)(b, 0, per * t, per * t + per);
    }
    double e = now() - t0;
    if (pass == 0 || e < best[t]) best[t] = e;
  }
  return 0;
}
int main(int argc, char** argv) {
  if (argc != 4) return fprintf(stderr, "usage: %s COPIES ROWS(1|4) THREADS(1|2)\n", argv[0]), 1;
  copies = atoi(argv[1]), rows = atoi(argv[2]), nt = atoi(argv[3]);
  size_t huge = 2 << 20, wb = (WBYTES * copies + huge) & ~(huge - 1);
  w = aligned_alloc(huge, wb), h = aligned_alloc(64, HBYTES * copies);
  memset(w, 0x37, WBYTES * copies);
  for (size_t i = 0; i < HBYTES * copies / 2; i++) ((unsigned short*)h)[i] = 0x3c00;  // float16 1.0
  a = aligned_alloc(64, 4 * 144 * 4), s = aligned_alloc(64, 4 * 72 * 4), o = aligned_alloc(64, 4 * 3072 * 4);
  for (int i = 0; i < 4 * 144; i++) a[i] = 0x01010101;
  for (int i = 0; i < 4 * 72; i++) s[i] = 1.0f;
  pthread_barrier_init(&bar, 0, nt);
  pthread_t th[2];
  for (long t = 0; t < nt; t++) pthread_create(&th[t], 0, run, (void*)t);
  for (int t = 0; t < nt; t++) pthread_join(th[t], 0);
  double m = nt > 1 && best[1] > best[0] ? best[1] : best[0];
  printf("%3d copies, %d rows, %d threads: %6.2f us a launch\n", copies, rows, nt, m / copies * 1e6);
  return 0;
}
