// The machine's float32 multiply-add peak on AVX2 (8-lane FMA, 12 independent accumulators), one thread and two:
// the limit the convolution and matmul kernels are measured against (docs/PERFORMANCE.md, session 35).
//   clang -O2 -march=native -pthread bench/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak
#include <stdio.h>
#include <time.h>
#include <pthread.h>
typedef float float8 __attribute__((vector_size(32)));
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
void* run(void* p){
  float8 a[12]; float8 b = {1.0001f,1,1,1,1,1,1,1}, c={0.999f,1,1,1,1,1,1,1};
  for(int i=0;i<12;i++) a[i]=(float8){i,i,i,i,i,i,i,i};
  long n = 200000000;
  for(long k=0;k<n;k++){
    #pragma GCC unroll 12
    for(int i=0;i<12;i++) a[i]=__builtin_ia32_vfmaddps256(a[i],b,c);
    __asm__ volatile("" : "+x"(a[0]),"+x"(a[1]),"+x"(a[2]),"+x"(a[3]),"+x"(a[4]),"+x"(a[5]),"+x"(a[6]),"+x"(a[7]),"+x"(a[8]),"+x"(a[9]),"+x"(a[10]),"+x"(a[11]));
  }
  float s=0; for(int i=0;i<12;i++) s+=a[i][0]; *(float*)p=s; return 0;
}
int main(){
  float r[2]; pthread_t t[2];
  double t0=now(); run(r); double t1=now();
  printf("1 thread: %.1f GFLOP/s\n", 200000000.0*12*16/(t1-t0)/1e9);
  t0=now(); for(int i=0;i<2;i++) pthread_create(&t[i],0,run,&r[i]); for(int i=0;i<2;i++) pthread_join(t[i],0); t1=now();
  printf("2 threads: %.1f GFLOP/s\n", 2*200000000.0*12*16/(t1-t0)/1e9);
}
