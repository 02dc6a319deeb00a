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
void r_8_2_16_6_64(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  const float* restrict data2 = (float*)bufs[2];
  for (long ridx0 = core_start; ridx0 < core_end; ridx0++) {
    for (long ridx1 = 0; ridx1 < 2; ridx1++) {
      float8 acc0;
      float8 acc1;
      float8 acc2;
      float8 acc3;
      float8 acc4;
      float8 acc5;
      float8 acc6;
      float8 acc7;
      float8 acc8;
      float8 acc9;
      float8 acc10;
      float8 acc11;
      long alu0 = (ridx1*16);
      float8 alu1 = ((float8){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
      long alu2 = (alu0+(ridx0*192));
      acc0 = alu1;
      acc1 = alu1;
      acc2 = alu1;
      acc3 = alu1;
      acc4 = alu1;
      acc5 = alu1;
      acc6 = alu1;
      acc7 = alu1;
      acc8 = alu1;
      acc9 = alu1;
      acc10 = alu1;
      acc11 = alu1;
      for (long ridx2 = 0; ridx2 < 64; ridx2++) {
        long alu3 = ((ridx0*384)+ridx2);
        long alu4 = (alu0+(ridx2*32));
        float val5 = data1[alu3];
        float val6 = data1[(alu3+64)];
        float val7 = data1[(alu3+128)];
        float val8 = data1[(alu3+192)];
        float val9 = data1[(alu3+256)];
        float val10 = data1[(alu3+320)];
        float8 val11 = *((float8*)(&data2[alu4]));
        float8 val12 = *((float8*)(&data2[(alu4+8)]));
        acc0 = tg_fma_float8(((float8){val5, val5, val5, val5, val5, val5, val5, val5}), val11, acc0);
        acc1 = tg_fma_float8(((float8){val6, val6, val6, val6, val6, val6, val6, val6}), val11, acc1);
        acc2 = tg_fma_float8(((float8){val7, val7, val7, val7, val7, val7, val7, val7}), val11, acc2);
        acc3 = tg_fma_float8(((float8){val8, val8, val8, val8, val8, val8, val8, val8}), val11, acc3);
        acc4 = tg_fma_float8(((float8){val9, val9, val9, val9, val9, val9, val9, val9}), val11, acc4);
        acc5 = tg_fma_float8(((float8){val10, val10, val10, val10, val10, val10, val10, val10}), val11, acc5);
        acc6 = tg_fma_float8(((float8){val5, val5, val5, val5, val5, val5, val5, val5}), val12, acc6);
        acc7 = tg_fma_float8(((float8){val6, val6, val6, val6, val6, val6, val6, val6}), val12, acc7);
        acc8 = tg_fma_float8(((float8){val7, val7, val7, val7, val7, val7, val7, val7}), val12, acc8);
        acc9 = tg_fma_float8(((float8){val8, val8, val8, val8, val8, val8, val8, val8}), val12, acc9);
        acc10 = tg_fma_float8(((float8){val9, val9, val9, val9, val9, val9, val9, val9}), val12, acc10);
        acc11 = tg_fma_float8(((float8){val10, val10, val10, val10, val10, val10, val10, val10}), val12, acc11);
      }
      *((float8*)(&data0[alu2])) = acc0;
      *((float8*)(&data0[(alu2+32)])) = acc1;
      *((float8*)(&data0[(alu2+64)])) = acc2;
      *((float8*)(&data0[(alu2+96)])) = acc3;
      *((float8*)(&data0[(alu2+128)])) = acc4;
      *((float8*)(&data0[(alu2+160)])) = acc5;
      *((float8*)(&data0[(alu2+8)])) = acc6;
      *((float8*)(&data0[(alu2+40)])) = acc7;
      *((float8*)(&data0[(alu2+72)])) = acc8;
      *((float8*)(&data0[(alu2+104)])) = acc9;
      *((float8*)(&data0[(alu2+136)])) = acc10;
      *((float8*)(&data0[(alu2+168)])) = acc11;
    }
  }
}
