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
#ifndef TG_tg_shuffle_float8_0_1_2_3
#define TG_tg_shuffle_float8_0_1_2_3
static inline __attribute__((always_inline)) float4 tg_shuffle_float8_0_1_2_3(float8 x) {
#if defined(__clang__) || __GNUC__ >= 12
  return __builtin_shufflevector(x, x, 0, 1, 2, 3);
#else
  return (float4){x[0], x[1], x[2], x[3]};
#endif
}
#endif
#ifndef TG_tg_shuffle_float8_4_5_6_7
#define TG_tg_shuffle_float8_4_5_6_7
static inline __attribute__((always_inline)) float4 tg_shuffle_float8_4_5_6_7(float8 x) {
#if defined(__clang__) || __GNUC__ >= 12
  return __builtin_shufflevector(x, x, 4, 5, 6, 7);
#else
  return (float4){x[4], x[5], x[6], x[7]};
#endif
}
#endif
typedef float float2 __attribute__((vector_size(8), aligned(4)));
#ifndef TG_tg_shuffle_float4_0_1
#define TG_tg_shuffle_float4_0_1
static inline __attribute__((always_inline)) float2 tg_shuffle_float4_0_1(float4 x) {
#if defined(__clang__) || __GNUC__ >= 12
  return __builtin_shufflevector(x, x, 0, 1);
#else
  return (float2){x[0], x[1]};
#endif
}
#endif
#ifndef TG_tg_shuffle_float4_2_3
#define TG_tg_shuffle_float4_2_3
static inline __attribute__((always_inline)) float2 tg_shuffle_float4_2_3(float4 x) {
#if defined(__clang__) || __GNUC__ >= 12
  return __builtin_shufflevector(x, x, 2, 3);
#else
  return (float2){x[2], x[3]};
#endif
}
#endif
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
    float4 alu14 = (tg_shuffle_float8_0_1_2_3(acc0)+tg_shuffle_float8_4_5_6_7(acc0));
    float4 alu15 = (tg_shuffle_float8_0_1_2_3(acc1)+tg_shuffle_float8_4_5_6_7(acc1));
    float4 alu16 = (tg_shuffle_float8_0_1_2_3(acc2)+tg_shuffle_float8_4_5_6_7(acc2));
    float4 alu17 = (tg_shuffle_float8_0_1_2_3(acc3)+tg_shuffle_float8_4_5_6_7(acc3));
    float2 alu18 = (tg_shuffle_float4_0_1(alu14)+tg_shuffle_float4_2_3(alu14));
    float2 alu19 = (tg_shuffle_float4_0_1(alu15)+tg_shuffle_float4_2_3(alu15));
    float2 alu20 = (tg_shuffle_float4_0_1(alu16)+tg_shuffle_float4_2_3(alu16));
    float2 alu21 = (tg_shuffle_float4_0_1(alu17)+tg_shuffle_float4_2_3(alu17));
    data0[alu0] = (alu18[0]+alu18[1]);
    data0[(alu0+1)] = (alu19[0]+alu19[1]);
    data0[(alu0+2)] = (alu20[0]+alu20[1]);
    data0[(alu0+3)] = (alu21[0]+alu21[1]);
  }
}
