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
void r_4_3_8_4_24(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  const float* restrict data2 = (float*)bufs[2];
  for (long ridx0 = core_start; ridx0 < core_end; ridx0++) {
    for (long ridx1 = 0; ridx1 < 3; ridx1++) {
      float8 acc0;
      float8 acc1;
      float8 acc2;
      float8 acc3;
      _Bool alu0 = (ridx0<3);
      long alu1 = (ridx1*8);
      float8 alu2 = ((float8){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
      _Bool alu3 = (ridx1<2);
      long alu4 = (alu1+(ridx0*76));
      acc0 = alu2;
      acc1 = alu2;
      acc2 = alu2;
      acc3 = alu2;
      _Bool alu5 = (alu3&alu0);
      long alu6 = (alu4+19);
      long alu7 = (alu4+38);
      long alu8 = (alu4+57);
      for (long ridx2 = 0; ridx2 < 24; ridx2++) {
        long alu9 = ((ridx0*96)+ridx2);
        float val10 = data1[alu9];
        float val11 = (alu0?data1[(alu9+24)]:0.0f);
        float val12 = (alu0?data1[(alu9+48)]:0.0f);
        float val13 = (alu0?data1[(alu9+72)]:0.0f);
        float8 val14 = *((float8*)(&data2[(alu1+(ridx2*19))]));
        acc0 = tg_fma_float8(((float8){val10, val10, val10, val10, val10, val10, val10, val10}), val14, acc0);
        acc1 = tg_fma_float8(((float8){val11, val11, val11, val11, val11, val11, val11, val11}), val14, acc1);
        acc2 = tg_fma_float8(((float8){val12, val12, val12, val12, val12, val12, val12, val12}), val14, acc2);
        acc3 = tg_fma_float8(((float8){val13, val13, val13, val13, val13, val13, val13, val13}), val14, acc3);
      }
      data0[(alu4+0)] = acc0[0];
      data0[(alu4+1)] = acc0[1];
      data0[(alu4+2)] = acc0[2];
      if (alu3) data0[(alu4+3)] = acc0[3];
      if (alu3) data0[(alu4+4)] = acc0[4];
      if (alu3) data0[(alu4+5)] = acc0[5];
      if (alu3) data0[(alu4+6)] = acc0[6];
      if (alu3) data0[(alu4+7)] = acc0[7];
      if (alu0) data0[(alu6+0)] = acc1[0];
      if (alu0) data0[(alu6+1)] = acc1[1];
      if (alu0) data0[(alu6+2)] = acc1[2];
      if (alu5) data0[(alu6+3)] = acc1[3];
      if (alu5) data0[(alu6+4)] = acc1[4];
      if (alu5) data0[(alu6+5)] = acc1[5];
      if (alu5) data0[(alu6+6)] = acc1[6];
      if (alu5) data0[(alu6+7)] = acc1[7];
      if (alu0) data0[(alu7+0)] = acc2[0];
      if (alu0) data0[(alu7+1)] = acc2[1];
      if (alu0) data0[(alu7+2)] = acc2[2];
      if (alu5) data0[(alu7+3)] = acc2[3];
      if (alu5) data0[(alu7+4)] = acc2[4];
      if (alu5) data0[(alu7+5)] = acc2[5];
      if (alu5) data0[(alu7+6)] = acc2[6];
      if (alu5) data0[(alu7+7)] = acc2[7];
      if (alu0) data0[(alu8+0)] = acc3[0];
      if (alu0) data0[(alu8+1)] = acc3[1];
      if (alu0) data0[(alu8+2)] = acc3[2];
      if (alu5) data0[(alu8+3)] = acc3[3];
      if (alu5) data0[(alu8+4)] = acc3[4];
      if (alu5) data0[(alu8+5)] = acc3[5];
      if (alu5) data0[(alu8+6)] = acc3[6];
      if (alu5) data0[(alu8+7)] = acc3[7];
    }
  }
}
