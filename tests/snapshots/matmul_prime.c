#ifndef TG_HALF
#define TG_HALF
#if defined(__clang__)
typedef __fp16 half;
#else
typedef _Float16 half;
#endif
#endif
typedef float float8 __attribute__((vector_size(32), aligned(4)));
#ifndef TG_FMA_float8
#define TG_FMA_float8
static inline __attribute__((always_inline)) float8 tg_fma_float8(float8 a, float8 b, float8 c) { return __builtin_ia32_vfmaddps256(a, b, c); }
#endif
void r_13_8_4_24(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  const float* restrict data2 = (float*)bufs[2];
  for (long ridx0 = core_start; ridx0 < core_end; ridx0++) {
    float8 acc0;
    float8 acc1;
    float8 acc2;
    long alu0 = (ridx0*19);
    float8 alu1 = ((float8){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
    long alu2 = (alu0+16);
    acc0 = alu1;
    acc1 = alu1;
    acc2 = alu1;
    for (long ridx2 = 0; ridx2 < 24; ridx2++) {
      long alu3 = (ridx2*19);
      float val4 = data1[((ridx0*24)+ridx2)];
      float8 val5 = *((float8*)(&data2[alu3]));
      float8 val6 = *((float8*)(&data2[(alu3+8)]));
      float8 val7 = *((float8*)(&data2[(alu3+16)]));
      acc0 = tg_fma_float8(((float8){val4, val4, val4, val4, val4, val4, val4, val4}), val5, acc0);
      acc1 = tg_fma_float8(((float8){val4, val4, val4, val4, val4, val4, val4, val4}), val6, acc1);
      acc2 = tg_fma_float8(((float8){val4, val4, val4, val4, val4, val4, val4, val4}), val7, acc2);
    }
    *((float8*)(&data0[alu0])) = acc0;
    *((float8*)(&data0[(alu0+8)])) = acc1;
    data0[(alu2+0)] = acc2[0];
    data0[(alu2+1)] = acc2[1];
    data0[(alu2+2)] = acc2[2];
  }
}
