#include <math.h>
#if defined(__clang__)
typedef __fp16 half;
#else
typedef _Float16 half;
#endif
typedef float float16 __attribute__((vector_size(64), aligned(4)));
void r_2_8_16_6_64(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  const float* restrict data2 = (float*)bufs[2];
  for (int ridx1 = core_start; ridx1 < core_end; ridx1++) {
    for (int ridx0 = 0; ridx0 < 8; ridx0++) {
      float16 acc0;
      float16 acc1;
      float16 acc2;
      float16 acc3;
      float16 acc4;
      float16 acc5;
      int alu0 = (ridx1*16);
      float16 alu1 = ((float16){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
      int alu2 = (alu0+(ridx0*192));
      acc0 = alu1;
      acc1 = alu1;
      acc2 = alu1;
      acc3 = alu1;
      acc4 = alu1;
      acc5 = alu1;
      for (int ridx2 = 0; ridx2 < 64; ridx2++) {
        int alu3 = ((ridx0*384)+ridx2);
        float val4 = data1[alu3];
        float val5 = data1[(alu3+64)];
        float val6 = data1[(alu3+128)];
        float val7 = data1[(alu3+192)];
        float val8 = data1[(alu3+256)];
        float val9 = data1[(alu3+320)];
        float16 val10 = *((float16*)(&data2[(alu0+(ridx2*32))]));
        acc0 = (acc0+(val4*val10));
        acc1 = (acc1+(val5*val10));
        acc2 = (acc2+(val6*val10));
        acc3 = (acc3+(val7*val10));
        acc4 = (acc4+(val8*val10));
        acc5 = (acc5+(val9*val10));
      }
      *((float16*)(&data0[alu2])) = acc0;
      *((float16*)(&data0[(alu2+32)])) = acc1;
      *((float16*)(&data0[(alu2+64)])) = acc2;
      *((float16*)(&data0[(alu2+96)])) = acc3;
      *((float16*)(&data0[(alu2+128)])) = acc4;
      *((float16*)(&data0[(alu2+160)])) = acc5;
    }
  }
}
