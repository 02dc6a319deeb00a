#include <math.h>
#if defined(__clang__)
typedef __fp16 half;
#else
typedef _Float16 half;
#endif
typedef float float16 __attribute__((vector_size(64), aligned(4)));
typedef int int16 __attribute__((vector_size(64), aligned(4)));
void E_64_6_16(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  const float* restrict data2 = (float*)bufs[2];
  for (int ridx0 = core_start; ridx0 < core_end; ridx0++) {
    for (int ridx1 = 0; ridx1 < 6; ridx1++) {
      float16 alu0 = ((float16){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
      int alu1 = ((ridx0*96)+(ridx1*16));
      float16 val2 = *((float16*)(&data1[alu1]));
      float16 val3 = *((float16*)(&data2[alu1]));
      float16 alu4 = (val2+val3);
      *((float16*)(&data0[alu1])) = (((float16)(((int16)(alu0<alu4)&(int16)alu4)|(~(int16)(alu0<alu4)&(int16)alu0))));
    }
  }
}
