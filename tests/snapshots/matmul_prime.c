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
      long alu0 = (ridx0*4);
      _Bool alu1 = (ridx0<3);
      long alu2 = (ridx1*8);
      float8 alu3 = ((float8){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
      _Bool alu4 = (ridx1<2);
      long alu5 = (alu2+(ridx0*76));
      acc0 = alu3;
      acc1 = alu3;
      acc2 = alu3;
      acc3 = alu3;
      long alu6 = (alu1?(alu0+1):12);
      long alu7 = (alu1?(alu0+2):12);
      long alu8 = (alu1?(alu0+3):12);
      long alu9 = (alu5+19);
      long alu10 = (alu5+38);
      long alu11 = (alu5+57);
      _Bool alu12 = (7<((int)(((ridx1*(-8))+19))));
      _Bool alu13 = (alu12!=1);
      _Bool alu14 = (alu12&alu1);
      _Bool alu15 = (alu4&alu13);
      _Bool alu16 = (alu14!=1);
      _Bool alu17 = (alu1&alu16);
      _Bool alu18 = ((alu4&alu1)&alu16);
      for (long ridx2 = 0; ridx2 < 24; ridx2++) {
        float val19 = data1[((ridx0*96)+ridx2)];
        float val20 = data1[((alu6*24)+ridx2)];
        float val21 = data1[((alu7*24)+ridx2)];
        float val22 = data1[((alu8*24)+ridx2)];
        float8 val23 = *((float8*)(&data2[(alu2+(ridx2*19))]));
        acc0 = tg_fma_float8(((float8){val19, val19, val19, val19, val19, val19, val19, val19}), val23, acc0);
        acc1 = tg_fma_float8(((float8){val20, val20, val20, val20, val20, val20, val20, val20}), val23, acc1);
        acc2 = tg_fma_float8(((float8){val21, val21, val21, val21, val21, val21, val21, val21}), val23, acc2);
        acc3 = tg_fma_float8(((float8){val22, val22, val22, val22, val22, val22, val22, val22}), val23, acc3);
      }
      if (alu12) *((float8*)(&data0[alu5])) = acc0;
      if (alu14) *((float8*)(&data0[alu9])) = acc1;
      if (alu14) *((float8*)(&data0[alu10])) = acc2;
      if (alu14) *((float8*)(&data0[alu11])) = acc3;
      if (alu13) data0[(alu5+0)] = acc0[0];
      if (alu13) data0[(alu5+1)] = acc0[1];
      if (alu13) data0[(alu5+2)] = acc0[2];
      if (alu15) data0[(alu5+3)] = acc0[3];
      if (alu15) data0[(alu5+4)] = acc0[4];
      if (alu15) data0[(alu5+5)] = acc0[5];
      if (alu15) data0[(alu5+6)] = acc0[6];
      if (alu15) data0[(alu5+7)] = acc0[7];
      if (alu17) data0[(alu9+0)] = acc1[0];
      if (alu17) data0[(alu9+1)] = acc1[1];
      if (alu17) data0[(alu9+2)] = acc1[2];
      if (alu18) data0[(alu9+3)] = acc1[3];
      if (alu18) data0[(alu9+4)] = acc1[4];
      if (alu18) data0[(alu9+5)] = acc1[5];
      if (alu18) data0[(alu9+6)] = acc1[6];
      if (alu18) data0[(alu9+7)] = acc1[7];
      if (alu17) data0[(alu10+0)] = acc2[0];
      if (alu17) data0[(alu10+1)] = acc2[1];
      if (alu17) data0[(alu10+2)] = acc2[2];
      if (alu18) data0[(alu10+3)] = acc2[3];
      if (alu18) data0[(alu10+4)] = acc2[4];
      if (alu18) data0[(alu10+5)] = acc2[5];
      if (alu18) data0[(alu10+6)] = acc2[6];
      if (alu18) data0[(alu10+7)] = acc2[7];
      if (alu17) data0[(alu11+0)] = acc3[0];
      if (alu17) data0[(alu11+1)] = acc3[1];
      if (alu17) data0[(alu11+2)] = acc3[2];
      if (alu18) data0[(alu11+3)] = acc3[3];
      if (alu18) data0[(alu11+4)] = acc3[4];
      if (alu18) data0[(alu11+5)] = acc3[5];
      if (alu18) data0[(alu11+6)] = acc3[6];
      if (alu18) data0[(alu11+7)] = acc3[7];
    }
  }
}
