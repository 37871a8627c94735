// One mma.sync instruction per input format, and the packing of codes into its registers: shared
// by the instruction-at-a-time validation kernels (gpu_mma.cu) and the tensor-core GEMM
// (gpu_tensor_core_gemm.cu), so that both issue the same PTX. Fragment layouts: gpu_mma.cu.
#pragma once

#include <cstdint>

#include "sim/cuda/gpu_mma.hpp"

namespace fplab::sim::gpu::detail {

template <MmaInput In>
struct Traits {
  static constexpr int bits = In == MmaInput::tf32 ? 32 : (In == MmaInput::fp16 || In == MmaInput::bf16) ? 16 : 8;
  static constexpr int per_reg = 32 / bits;
  static constexpr int k = 8 * per_reg;  // 8, 16, 32: always 32 bytes of codes
};

// P codes of `bits` bits, stride apart in memory, packed lowest first.
template <MmaInput In>
__device__ uint32_t pack(const uint32_t* p, int stride) {
  using T = Traits<In>;
  if constexpr (T::per_reg == 1) {
    return p[0];
  } else {
    uint32_t r = 0;
#pragma unroll
    for (int i = 0; i < T::per_reg; ++i) r |= (p[i * stride] & ((1u << T::bits) - 1)) << (i * T::bits);
    return r;
  }
}

template <MmaInput In>
__device__ void mma_sync(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#define FPLAB_MMA(shape_types)                                                                          \
  asm volatile("mma.sync.aligned." shape_types " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
  if constexpr (In == MmaInput::tf32)
    FPLAB_MMA("m16n8k8.row.col.f32.tf32.tf32.f32");
  else if constexpr (In == MmaInput::fp16)
    FPLAB_MMA("m16n8k16.row.col.f32.f16.f16.f32");
  else if constexpr (In == MmaInput::bf16)
    FPLAB_MMA("m16n8k16.row.col.f32.bf16.bf16.f32");
  else if constexpr (In == MmaInput::e4m3)
    FPLAB_MMA("m16n8k32.row.col.f32.e4m3.e4m3.f32");
  else
    FPLAB_MMA("m16n8k32.row.col.f32.e5m2.e5m2.f32");
#undef FPLAB_MMA
}

}  // namespace fplab::sim::gpu::detail
