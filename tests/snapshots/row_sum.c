#ifndef TG_HALF
#define TG_HALF
#if defined(__clang__)
typedef __fp16 half;
#else
typedef _Float16 half;
#endif
#endif
typedef float float8 __attribute__((vector_size(32), aligned(4)));
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
void r_16_16_16(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  for (long ridx0 = core_start; ridx0 < core_end; ridx0++) {
    float8 acc0;
    acc0 = ((float8){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
    for (long ridx3 = 0; ridx3 < 16; ridx3++) {
      long alu0 = ((ridx3*16)+(ridx0*256));
      float8 val1 = *((float8*)(&data1[alu0]));
      float8 val2 = *((float8*)(&data1[(alu0+8)]));
      acc0 = ((acc0+val1)+val2);
    }
    float4 alu3 = (tg_shuffle_float8_0_1_2_3(acc0)+tg_shuffle_float8_4_5_6_7(acc0));
    float2 alu4 = (tg_shuffle_float4_0_1(alu3)+tg_shuffle_float4_2_3(alu3));
    data0[ridx0] = (alu4[0]+alu4[1]);
  }
}
