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
      *((half8*)(&data0[alu0])) = __builtin_convertvector((__builtin_convertvector(val2, float8)*3.0f), half8);
      *((half8*)(&data0[alu1])) = __builtin_convertvector((__builtin_convertvector(val3, float8)*3.0f), half8);
    }
  }
}
