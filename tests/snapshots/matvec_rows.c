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
typedef float float4 __attribute__((vector_size(16), aligned(4)));
void r_64_4_32_16(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  const float* restrict data2 = (float*)bufs[2];
  for (long ridx0 = core_start; ridx0 < core_end; ridx0++) {
    float8 acc0;
    float8 acc1;
    float8 acc2;
    float8 acc3;
    long alu0 = (ridx0*4);
    float8 alu1 = ((float8){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
    acc0 = alu1;
    acc1 = alu1;
    acc2 = alu1;
    acc3 = alu1;
    for (long ridx4 = 0; ridx4 < 32; ridx4++) {
      long alu2 = (ridx4*16);
      long alu3 = (alu2+(ridx0*2048));
      float8 val4 = *((float8*)(&data1[alu2]));
      float8 val5 = *((float8*)(&data1[(alu2+8)]));
      float8 val6 = *((float8*)(&data2[alu3]));
      float8 val7 = *((float8*)(&data2[(alu3+8)]));
      float8 val8 = *((float8*)(&data2[(alu3+520)]));
      float8 val9 = *((float8*)(&data2[(alu3+512)]));
      float8 val10 = *((float8*)(&data2[(alu3+1032)]));
      float8 val11 = *((float8*)(&data2[(alu3+1024)]));
      float8 val12 = *((float8*)(&data2[(alu3+1544)]));
      float8 val13 = *((float8*)(&data2[(alu3+1536)]));
      __builtin_prefetch(&data2[(alu3+2056)]);
      __builtin_prefetch(&data2[(alu3+2568)]);
      __builtin_prefetch(&data2[(alu3+3080)]);
      __builtin_prefetch(&data2[(alu3+3592)]);
      acc0 = tg_fma_float8(val5, val7, tg_fma_float8(val4, val6, acc0));
      acc1 = tg_fma_float8(val5, val8, tg_fma_float8(val4, val9, acc1));
      acc2 = tg_fma_float8(val5, val10, tg_fma_float8(val4, val11, acc2));
      acc3 = tg_fma_float8(val5, val12, tg_fma_float8(val4, val13, acc3));
    }
    float8 alu14 = (((float8){acc0[0], acc0[1], acc0[2], acc0[3], acc1[0], acc1[1], acc1[2], acc1[3]})+((float8){acc0[4], acc0[5], acc0[6], acc0[7], acc1[4], acc1[5], acc1[6], acc1[7]}));
    float8 alu15 = (((float8){acc2[0], acc2[1], acc2[2], acc2[3], acc3[0], acc3[1], acc3[2], acc3[3]})+((float8){acc2[4], acc2[5], acc2[6], acc2[7], acc3[4], acc3[5], acc3[6], acc3[7]}));
    float8 alu16 = (((float8){alu14[0], alu14[1], alu14[4], alu14[5], alu15[0], alu15[1], alu15[4], alu15[5]})+((float8){alu14[2], alu14[3], alu14[6], alu14[7], alu15[2], alu15[3], alu15[6], alu15[7]}));
    float4 alu17 = (((float4){alu16[0], alu16[2], alu16[4], alu16[6]})+((float4){alu16[1], alu16[3], alu16[5], alu16[7]}));
    data0[alu0] = alu17[0];
    data0[(alu0+1)] = alu17[1];
    data0[(alu0+2)] = alu17[2];
    data0[(alu0+3)] = alu17[3];
  }
}
