// Whether a prompt chunk's attention values kernel, joined to a decode step, runs at memory speed: SmolLM2's
// `r_2_3_32_3_2_640` (2 chunk tokens x 9 query heads over 640 float16 cache rows of 3 key-value heads, 64 dims) as
// our renderer writes it, linked from the C that `DEBUG=4` prints (bench/attn_values_probe.sh extracts it), run on 2
// threads (the THREAD axis' 2 halves, joined by a spin counter as the CPU team's launches are) over 30 caches of 2,048
// rows round robin (246 KB read a call: from L3) or one cache 30 times (`HOT=1`: from L2). Prints the best of 50.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
void r_2_3_32_3_2_640(void**, const int*, int, int);
enum { NC = 30, ROWS = 2048 };
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void* bufs[NC][4];
static atomic_int go, done;
static void* helper(void* arg) {
  (void)arg;
  for (int seen = 0;;) {
    int g;
    while ((g = atomic_load(&go)) == seen) {
    }
    seen = g;
    r_2_3_32_3_2_640(bufs[(g - 1) % NC], 0, 1, 2);
    atomic_fetch_add(&done, 1);
  }
}
int main(void) {
  int hot = getenv("HOT") != 0;
  for (int c = 0; c < NC; c++) {
    if (hot && c > 0) { memcpy(bufs[c], bufs[0], sizeof bufs[0]); continue; }
    float* p = malloc(3 * 3840 * 4);  // the softmax's exponentials: [3 heads][6 query rows][640]
    for (int i = 0; i < 3 * 3840; i++) p[i] = 1e-3f;
    short* v = aligned_alloc(64, ROWS * 192 * 2);  // the values cache: [2048 rows][3 heads][64] float16 ones
    for (int i = 0; i < ROWS * 192; i++) v[i] = 0x3c00;
    float* s = malloc(18 * 4);  // the softmax's sums
    for (int i = 0; i < 18; i++) s[i] = 1;
    bufs[c][0] = calloc(3 * 384, 4), bufs[c][1] = p, bufs[c][2] = v, bufs[c][3] = s;
  }
  pthread_t th;
  pthread_create(&th, 0, helper, 0);
  double best = 1e9;
  for (int rep = 0, n = 0; rep < 50; rep++) {
    double t0 = now();
    for (int c = 0; c < NC; c++) {
      int d0 = atomic_load(&done);
      atomic_store(&go, ++n);
      r_2_3_32_3_2_640(bufs[c], 0, 0, 1);
      while (atomic_load(&done) == d0) {
      }
    }
    double t = (now() - t0) / NC;
    if (t < best) best = t;
  }
  float* out = bufs[0][0];  // each output is 640 x 1e-3 (ones weighted by the exponentials, over a sum of 1)
  printf("%.2f us a call (%s; output %.3f, expected 0.640)\n", best * 1e6, hot ? "from L2" : "from L3", out[0]);
  return 0;
}
