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
typedef float float2 __attribute__((vector_size(8), aligned(4)));
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
    float4 alu3 = (((float4){acc0[0], acc0[1], acc0[2], acc0[3]})+((float4){acc0[4], acc0[5], acc0[6], acc0[7]}));
    float2 alu4 = (((float2){alu3[0], alu3[1]})+((float2){alu3[2], alu3[3]}));
    data0[ridx0] = (alu4[0]+alu4[1]);
  }
}
