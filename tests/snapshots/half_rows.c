#ifndef TG_HALF
#define TG_HALF
#if defined(__clang__)
typedef __fp16 half;
#else
typedef _Float16 half;
#endif
#endif
typedef half half8 __attribute__((vector_size(16), aligned(2)));
typedef float float8 __attribute__((vector_size(32), aligned(4)));
#ifndef TG_HBITS8
#define TG_HBITS8
typedef short tg_hbits8 __attribute__((vector_size(16)));
#endif
#ifndef TG_h2f_float8
#define TG_h2f_float8
static inline __attribute__((always_inline)) float8 tg_h2f_float8(half8 x) {
#if defined(__x86_64__) && !defined(__clang__) && defined(__F16C__)
  return __builtin_ia32_vcvtph2ps256((tg_hbits8)x);
#else
  return __builtin_convertvector(x, float8);
#endif
}
#endif
#ifndef TG_f2h_half8
#define TG_f2h_half8
static inline __attribute__((always_inline)) half8 tg_f2h_half8(float8 x) {
#if defined(__x86_64__) && !defined(__clang__) && defined(__F16C__)
  return (half8)__builtin_ia32_vcvtps2ph256(x, 0);
#else
  return __builtin_convertvector(x, half8);
#endif
}
#endif
void E_64_6_16(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  half* restrict data0 = (half*)bufs[0];
  const half* restrict data1 = (half*)bufs[1];
  for (long ridx0 = core_start; ridx0 < core_end; ridx0++) {
    for (long ridx1 = 0; ridx1 < 6; ridx1++) {
      long alu0 = ((ridx0*96)+(ridx1*16));
      long alu1 = (alu0+8);
      half8 val2 = *((half8*)(&data1[alu0]));
      half8 val3 = *((half8*)(&data1[alu1]));
      *((half8*)(&data0[alu0])) = tg_f2h_half8((tg_h2f_float8(val2)*3.0f));
      *((half8*)(&data0[alu1])) = tg_f2h_half8((tg_h2f_float8(val3)*3.0f));
    }
  }
}
