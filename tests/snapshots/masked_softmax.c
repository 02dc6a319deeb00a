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
typedef float float4 __attribute__((vector_size(16), aligned(4)));
typedef int int4 __attribute__((vector_size(16), aligned(4)));
typedef float float2 __attribute__((vector_size(8), aligned(4)));
typedef int int2 __attribute__((vector_size(8), aligned(4)));
void r_16_4_16(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  for (long ridx0 = core_start; ridx0 < core_end; ridx0++) {
    float8 acc0;
    float8 alu0 = ((float8){((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf())});
    acc0 = alu0;
    int alu1 = ((int)(((float)(((int)(ridx0))))));
    int8 alu2 = ((int8){alu1, alu1, alu1, alu1, alu1, alu1, alu1, alu1});
    for (long ridx3 = 0; ridx3 < 4; ridx3++) {
      long alu3 = (ridx3*16);
      long alu4 = (alu3+0);
      long alu5 = (alu3+1);
      long alu6 = (alu3+2);
      long alu7 = (alu3+3);
      long alu8 = (alu3+4);
      long alu9 = (alu3+5);
      long alu10 = (alu3+6);
      long alu11 = (alu3+7);
      long alu12 = ((ridx0*64)+alu3);
      float8 val13 = *((float8*)(&data1[alu12]));
      float8 val14 = *((float8*)(&data1[(alu12+8)]));
      float8 alu15 = ((float8)(((int8)(alu2<__builtin_convertvector(__builtin_convertvector(((int8){((int)(alu4)), ((int)(alu5)), ((int)(alu6)), ((int)(alu7)), ((int)(alu8)), ((int)(alu9)), ((int)(alu10)), ((int)(alu11))}), float8), int8))&(int8)alu0)|(~(int8)(alu2<__builtin_convertvector(__builtin_convertvector(((int8){((int)(alu4)), ((int)(alu5)), ((int)(alu6)), ((int)(alu7)), ((int)(alu8)), ((int)(alu9)), ((int)(alu10)), ((int)(alu11))}), float8), int8))&(int8)val13)));
      float8 alu16 = ((float8)(((int8)(acc0<alu15)&(int8)alu15)|(~(int8)(acc0<alu15)&(int8)acc0)));
      float8 alu17 = ((float8)(((int8)(alu2<__builtin_convertvector(__builtin_convertvector(((int8){((int)((alu4+8))), ((int)((alu5+8))), ((int)((alu6+8))), ((int)((alu7+8))), ((int)((alu8+8))), ((int)((alu9+8))), ((int)((alu10+8))), ((int)((alu11+8)))}), float8), int8))&(int8)alu0)|(~(int8)(alu2<__builtin_convertvector(__builtin_convertvector(((int8){((int)((alu4+8))), ((int)((alu5+8))), ((int)((alu6+8))), ((int)((alu7+8))), ((int)((alu8+8))), ((int)((alu9+8))), ((int)((alu10+8))), ((int)((alu11+8)))}), float8), int8))&(int8)val14)));
      acc0 = ((float8)(((int8)(alu16<alu17)&(int8)alu17)|(~(int8)(alu16<alu17)&(int8)alu16)));
    }
    float4 alu18 = ((float4){acc0[0], acc0[1], acc0[2], acc0[3]});
    float4 alu19 = ((float4){acc0[4], acc0[5], acc0[6], acc0[7]});
    float4 alu20 = ((float4)(((int4)(alu18<alu19)&(int4)alu19)|(~(int4)(alu18<alu19)&(int4)alu18)));
    float2 alu21 = ((float2){alu20[0], alu20[1]});
    float2 alu22 = ((float2){alu20[2], alu20[3]});
    float2 alu23 = ((float2)(((int2)(alu21<alu22)&(int2)alu22)|(~(int2)(alu21<alu22)&(int2)alu21)));
    float alu24 = alu23[0];
    float alu25 = alu23[1];
    data0[ridx0] = ((alu24<alu25)?alu25:alu24);
  }
}

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
#ifndef TG_FMA_float8
#define TG_FMA_float8
static inline __attribute__((always_inline)) float8 tg_fma_float8(float8 a, float8 b, float8 c) { return __builtin_ia32_vfmaddps256(a, b, c); }
#endif
typedef float float4 __attribute__((vector_size(16), aligned(4)));
typedef float float2 __attribute__((vector_size(8), aligned(4)));
void r_16_4_16(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  const float* restrict data2 = (float*)bufs[2];
  for (long ridx0 = core_start; ridx0 < core_end; ridx0++) {
    float8 acc0;
    float8 alu0 = ((float8){((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf())});
    float8 alu1 = ((float8){-150.0f, -150.0f, -150.0f, -150.0f, -150.0f, -150.0f, -150.0f, -150.0f});
    float8 alu2 = ((float8){-128.0f, -128.0f, -128.0f, -128.0f, -128.0f, -128.0f, -128.0f, -128.0f});
    float8 alu3 = ((float8){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
    int8 alu4 = ((int8){1, 1, 1, 1, 1, 1, 1, 1});
    int8 alu5 = ((int8){23, 23, 23, 23, 23, 23, 23, 23});
    float val6 = data2[ridx0];
    acc0 = alu3;
    int alu7 = ((int)(((float)(((int)(ridx0))))));
    int8 alu8 = ((int8){alu7, alu7, alu7, alu7, alu7, alu7, alu7, alu7});
    for (long ridx3 = 0; ridx3 < 4; ridx3++) {
      long alu9 = (ridx3*16);
      long alu10 = (alu9+0);
      long alu11 = (alu9+1);
      long alu12 = (alu9+2);
      long alu13 = (alu9+3);
      long alu14 = (alu9+4);
      long alu15 = (alu9+5);
      long alu16 = (alu9+6);
      long alu17 = (alu9+7);
      long alu18 = ((ridx0*64)+alu9);
      float8 val19 = *((float8*)(&data1[alu18]));
      float8 val20 = *((float8*)(&data1[(alu18+8)]));
      float8 alu21 = ((float8)(((int8)(alu8<__builtin_convertvector(__builtin_convertvector(((int8){((int)(alu10)), ((int)(alu11)), ((int)(alu12)), ((int)(alu13)), ((int)(alu14)), ((int)(alu15)), ((int)(alu16)), ((int)(alu17))}), float8), int8))&(int8)alu0)|(~(int8)(alu8<__builtin_convertvector(__builtin_convertvector(((int8){((int)(alu10)), ((int)(alu11)), ((int)(alu12)), ((int)(alu13)), ((int)(alu14)), ((int)(alu15)), ((int)(alu16)), ((int)(alu17))}), float8), int8))&(int8)val19)));
      float8 alu22 = ((float8)(((int8)(alu8<__builtin_convertvector(__builtin_convertvector(((int8){((int)((alu10+8))), ((int)((alu11+8))), ((int)((alu12+8))), ((int)((alu13+8))), ((int)((alu14+8))), ((int)((alu15+8))), ((int)((alu16+8))), ((int)((alu17+8)))}), float8), int8))&(int8)alu0)|(~(int8)(alu8<__builtin_convertvector(__builtin_convertvector(((int8){((int)((alu10+8))), ((int)((alu11+8))), ((int)((alu12+8))), ((int)((alu13+8))), ((int)((alu14+8))), ((int)((alu15+8))), ((int)((alu16+8))), ((int)((alu17+8)))}), float8), int8))&(int8)val20)));
      float8 alu23 = (tg_fma_float8(((float8){val6, val6, val6, val6, val6, val6, val6, val6}), ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), alu21)*1.4426950216293335f);
      float8 alu24 = (tg_fma_float8(((float8){val6, val6, val6, val6, val6, val6, val6, val6}), ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), alu22)*1.4426950216293335f);
      float8 alu25 = (((float8)(((int8)(alu23<alu1)&(int8)alu1)|(~(int8)(alu23<alu1)&(int8)alu23)))*-1.0f);
      float8 alu26 = (((float8)(((int8)(alu24<alu1)&(int8)alu1)|(~(int8)(alu24<alu1)&(int8)alu24)))*-1.0f);
      float8 alu27 = ((float8)(((int8)(alu25<alu2)&(int8)alu2)|(~(int8)(alu25<alu2)&(int8)alu25)));
      float8 alu28 = ((float8)(((int8)(alu26<alu2)&(int8)alu2)|(~(int8)(alu26<alu2)&(int8)alu26)));
      int8 alu29 = __builtin_convertvector(tg_fma_float8(alu27, ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), ((float8){151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f})), int8);
      int8 alu30 = __builtin_convertvector(tg_fma_float8(alu28, ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), ((float8){151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f})), int8);
      int8 alu31 = (alu29+(-151));
      int8 alu32 = (alu30+(-151));
      int8 alu33 = (alu31>>alu4);
      int8 alu34 = (alu32>>alu4);
      float8 alu35 = tg_fma_float8(alu27, ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), (__builtin_convertvector(alu31, float8)*-1.0f));
      float8 alu36 = tg_fma_float8(alu28, ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), (__builtin_convertvector(alu32, float8)*-1.0f));
      float8 alu37 = ((float8)(((int8)((alu27*-1.0f)==alu1)&(int8)alu3)|(~(int8)((alu27*-1.0f)==alu1)&(int8)tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(((float8){0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f}), alu35, ((float8){0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f})), alu35, ((float8){0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f})), alu35, ((float8){0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f})), alu35, ((float8){0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f})), alu35, ((float8){0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f})), alu35, ((float8){1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f})))));
      float8 alu38 = ((float8)(((int8)((alu28*-1.0f)==alu1)&(int8)alu3)|(~(int8)((alu28*-1.0f)==alu1)&(int8)tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(((float8){0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f}), alu36, ((float8){0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f})), alu36, ((float8){0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f})), alu36, ((float8){0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f})), alu36, ((float8){0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f})), alu36, ((float8){0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f})), alu36, ((float8){1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f})))));
      acc0 = tg_fma_float8((alu38*((float8)(((alu34+127)<<alu5)))), ((float8)((((alu30+(alu34*(-1)))+(-24))<<alu5))), tg_fma_float8((alu37*((float8)(((alu33+127)<<alu5)))), ((float8)((((alu29+(alu33*(-1)))+(-24))<<alu5))), acc0));
    }
    float4 alu39 = (((float4){acc0[0], acc0[1], acc0[2], acc0[3]})+((float4){acc0[4], acc0[5], acc0[6], acc0[7]}));
    float2 alu40 = (((float2){alu39[0], alu39[1]})+((float2){alu39[2], alu39[3]}));
    data0[ridx0] = (alu40[0]+alu40[1]);
  }
}

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
#ifndef TG_FMA_float8
#define TG_FMA_float8
static inline __attribute__((always_inline)) float8 tg_fma_float8(float8 a, float8 b, float8 c) { return __builtin_ia32_vfmaddps256(a, b, c); }
#endif
void E_16_4_16(void** bufs, const int* vals, int core_start, int core_end) {
  (void)vals; (void)core_start; (void)core_end;
  float* restrict data0 = (float*)bufs[0];
  const float* restrict data1 = (float*)bufs[1];
  const float* restrict data2 = (float*)bufs[2];
  const float* restrict data3 = (float*)bufs[3];
  for (long ridx0 = core_start; ridx0 < core_end; ridx0++) {
    for (long ridx1 = 0; ridx1 < 4; ridx1++) {
      long alu0 = (ridx1*16);
      float8 alu1 = ((float8){((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf()), ((float)-__builtin_inf())});
      float8 alu2 = ((float8){-150.0f, -150.0f, -150.0f, -150.0f, -150.0f, -150.0f, -150.0f, -150.0f});
      float8 alu3 = ((float8){-128.0f, -128.0f, -128.0f, -128.0f, -128.0f, -128.0f, -128.0f, -128.0f});
      float8 alu4 = ((float8){0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
      int8 alu5 = ((int8){1, 1, 1, 1, 1, 1, 1, 1});
      int8 alu6 = ((int8){23, 23, 23, 23, 23, 23, 23, 23});
      long alu7 = (alu0+0);
      long alu8 = (alu0+1);
      long alu9 = (alu0+2);
      long alu10 = (alu0+3);
      long alu11 = (alu0+4);
      long alu12 = (alu0+5);
      long alu13 = (alu0+6);
      long alu14 = (alu0+7);
      long alu15 = ((ridx0*64)+alu0);
      float val16 = data2[ridx0];
      float val17 = data3[ridx0];
      int alu18 = ((int)(((float)(((int)(ridx0))))));
      long alu19 = (alu15+8);
      float alu20 = (1.0f/val17);
      int8 alu21 = ((int8){alu18, alu18, alu18, alu18, alu18, alu18, alu18, alu18});
      float8 val22 = *((float8*)(&data1[alu15]));
      float8 val23 = *((float8*)(&data1[alu19]));
      float8 alu24 = ((float8)(((int8)(alu21<__builtin_convertvector(__builtin_convertvector(((int8){((int)(alu7)), ((int)(alu8)), ((int)(alu9)), ((int)(alu10)), ((int)(alu11)), ((int)(alu12)), ((int)(alu13)), ((int)(alu14))}), float8), int8))&(int8)alu1)|(~(int8)(alu21<__builtin_convertvector(__builtin_convertvector(((int8){((int)(alu7)), ((int)(alu8)), ((int)(alu9)), ((int)(alu10)), ((int)(alu11)), ((int)(alu12)), ((int)(alu13)), ((int)(alu14))}), float8), int8))&(int8)val22)));
      float8 alu25 = ((float8)(((int8)(alu21<__builtin_convertvector(__builtin_convertvector(((int8){((int)((alu7+8))), ((int)((alu8+8))), ((int)((alu9+8))), ((int)((alu10+8))), ((int)((alu11+8))), ((int)((alu12+8))), ((int)((alu13+8))), ((int)((alu14+8)))}), float8), int8))&(int8)alu1)|(~(int8)(alu21<__builtin_convertvector(__builtin_convertvector(((int8){((int)((alu7+8))), ((int)((alu8+8))), ((int)((alu9+8))), ((int)((alu10+8))), ((int)((alu11+8))), ((int)((alu12+8))), ((int)((alu13+8))), ((int)((alu14+8)))}), float8), int8))&(int8)val23)));
      float8 alu26 = (tg_fma_float8(((float8){val16, val16, val16, val16, val16, val16, val16, val16}), ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), alu24)*1.4426950216293335f);
      float8 alu27 = (tg_fma_float8(((float8){val16, val16, val16, val16, val16, val16, val16, val16}), ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), alu25)*1.4426950216293335f);
      float8 alu28 = (((float8)(((int8)(alu26<alu2)&(int8)alu2)|(~(int8)(alu26<alu2)&(int8)alu26)))*-1.0f);
      float8 alu29 = ((float8)(((int8)(alu28<alu3)&(int8)alu3)|(~(int8)(alu28<alu3)&(int8)alu28)));
      float8 alu30 = (((float8)(((int8)(alu27<alu2)&(int8)alu2)|(~(int8)(alu27<alu2)&(int8)alu27)))*-1.0f);
      float8 alu31 = ((float8)(((int8)(alu30<alu3)&(int8)alu3)|(~(int8)(alu30<alu3)&(int8)alu30)));
      int8 alu32 = __builtin_convertvector(tg_fma_float8(alu29, ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), ((float8){151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f})), int8);
      int8 alu33 = (alu32+(-151));
      int8 alu34 = __builtin_convertvector(tg_fma_float8(alu31, ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), ((float8){151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f, 151.5f})), int8);
      int8 alu35 = (alu33>>alu5);
      int8 alu36 = (alu34+(-151));
      int8 alu37 = (alu36>>alu5);
      float8 alu38 = tg_fma_float8(alu29, ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), (__builtin_convertvector(alu33, float8)*-1.0f));
      float8 alu39 = tg_fma_float8(alu31, ((float8){-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f}), (__builtin_convertvector(alu36, float8)*-1.0f));
      float8 alu40 = ((float8)(((int8)((alu29*-1.0f)==alu2)&(int8)alu4)|(~(int8)((alu29*-1.0f)==alu2)&(int8)tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(((float8){0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f}), alu38, ((float8){0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f})), alu38, ((float8){0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f})), alu38, ((float8){0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f})), alu38, ((float8){0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f})), alu38, ((float8){0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f})), alu38, ((float8){1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f})))));
      float8 alu41 = ((float8)(((int8)((alu31*-1.0f)==alu2)&(int8)alu4)|(~(int8)((alu31*-1.0f)==alu2)&(int8)tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(tg_fma_float8(((float8){0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f, 0.00015359208919107914f}), alu39, ((float8){0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f, 0.0013392627006396651f})), alu39, ((float8){0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f, 0.009618384763598442f})), alu39, ((float8){0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f, 0.055503472685813904f})), alu39, ((float8){0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f, 0.24022644758224487f})), alu39, ((float8){0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f, 0.6931471824645996f})), alu39, ((float8){1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f})))));
      *((float8*)(&data0[alu15])) = (((alu40*((float8)(((alu35+127)<<alu6))))*((float8)((((alu32+(alu35*(-1)))+(-24))<<alu6))))*alu20);
      *((float8*)(&data0[alu19])) = (((alu41*((float8)(((alu37+127)<<alu6))))*((float8)((((alu34+(alu37*(-1)))+(-24))<<alu6))))*alu20);
    }
  }
}
