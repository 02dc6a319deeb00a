#ifndef TG_HALF
#define TG_HALF
#if defined(__clang__)
typedef __fp16 half;
#else
typedef _Float16 half;
#endif
#endif
typedef float float8 __attribute__((vector_size(32), aligned(4)));
typedef int int8 __attribute__((vector_size(32), aligned(4)));
void E_64_6_16(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  const float* restrict data2 = (float*)bufs[2];
  for (long ridx0 = core_start; ridx0 < core_end; ridx0++) {
    for (long ridx1 = 0; ridx1 < 6; ridx1++) {
      float8 alu0 = ((float8){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
      long alu1 = ((ridx0*96)+(ridx1*16));
      long alu2 = (alu1+8);
      float8 val3 = *((float8*)(&data1[alu1]));
      float8 val4 = *((float8*)(&data2[alu1]));
      float8 alu5 = (val3+val4);
      float8 val6 = *((float8*)(&data1[alu2]));
      float8 val7 = *((float8*)(&data2[alu2]));
      float8 alu8 = (val6+val7);
      *((float8*)(&data0[alu1])) = ((float8)(((int8)(alu0<alu5)&(int8)alu5)|(~(int8)(alu0<alu5)&(int8)alu0)));
      *((float8*)(&data0[alu2])) = ((float8)(((int8)(alu0<alu8)&(int8)alu8)|(~(int8)(alu0<alu8)&(int8)alu0)));
    }
  }
}
