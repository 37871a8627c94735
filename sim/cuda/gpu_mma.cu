// The tensor-core kernels of gpu_mma.hpp: one warp (mma.sync) or one warpgroup (wgmma) per tile,
// the instructions issued one at a time along K with the accumulator passed from one to the next
// in registers, nothing else touching the values: D is exactly what the tensor cores produced.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8kK"): lane = 4 g + t. For every input
// type a register packs P = 32 / bits consecutive-in-K codes (the lowest K in the low bits):
//   A: reg0 = row g, K from t P; reg1 = row g + 8, same K; reg2, reg3 = the same rows, K + k/2
//   B: reg0 = column g, K from t P; reg1 = column g, K + k/2
//   C, D: c0, c1 = row g, columns 2t, 2t + 1; c2, c3 = row g + 8
// wgmma m64n8: warp w of the warpgroup holds rows 16 w .. 16 w + 15 of D in the C layout above.
// Its A (64 x k) and B (8 x k, K-major) sit in shared memory without swizzle as core matrices of
// 8 rows x 16 bytes, core (row group i, K group j) at byte i * 256 + j * 128 (every k is 32 bytes
// of codes, two K groups). The exact self-check of gpu_mma_validate tests all of this.
#include <cstring>
#include <stdexcept>
#include <vector>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gpu_mma.hpp"
#include "sim/cuda/mma_sync.cuh"

namespace fplab::sim::gpu {
namespace {

using detail::mma_sync;
using detail::pack;
using detail::Traits;

template <MmaInput In>
__global__ void __launch_bounds__(128)
    mma_sync_tiles(const uint32_t* __restrict__ a, const uint32_t* __restrict__ b, const float* __restrict__ c,
                   float* __restrict__ d, size_t tiles, int k_total) {
  using T = Traits<In>;
  const size_t tile = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (tile >= tiles) return;  // whole warps: blockDim is a multiple of 32
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint32_t* A = a + tile * 16 * k_total;
  const uint32_t* B = b + tile * k_total * 8;
  const float* C = c + tile * 128;
  float acc[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
  for (int k0 = 0; k0 < k_total; k0 += T::k) {
    uint32_t ra[4], rb[2];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r & 1), col = k0 + t * T::per_reg + (r >> 1) * (T::k / 2);
      ra[r] = pack<In>(A + static_cast<size_t>(row) * k_total + col, 1);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r)
      rb[r] = pack<In>(B + static_cast<size_t>(k0 + t * T::per_reg + r * (T::k / 2)) * 8 + g, 8);
    mma_sync<In>(acc, ra, rb);
  }
  float* D = d + tile * 128;
  D[g * 8 + 2 * t] = acc[0];
  D[g * 8 + 2 * t + 1] = acc[1];
  D[(g + 8) * 8 + 2 * t] = acc[2];
  D[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

// ---- wgmma (sm_90a)

constexpr int kCoreStrideRows = 256, kCoreStrideK = 128;  // bytes between core matrices

__device__ uint64_t descriptor(const void* smem, uint32_t leading, uint32_t stride) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((address >> 4) & 0x3fff) | static_cast<uint64_t>((leading >> 4) & 0x3fff) << 16 |
         static_cast<uint64_t>((stride >> 4) & 0x3fff) << 32;  // base offset 0, no swizzle
}

template <MmaInput In>
__device__ void store_code(uint8_t* smem, int offset, uint32_t code) {
  using T = Traits<In>;
  if constexpr (T::bits == 32)
    *reinterpret_cast<uint32_t*>(smem + offset) = code;
  else if constexpr (T::bits == 16)
    *reinterpret_cast<uint16_t*>(smem + offset) = static_cast<uint16_t>(code);
  else
    smem[offset] = static_cast<uint8_t>(code);
}

// Byte offset of code (row, kk) of a K-major operand in the core-matrix layout.
template <MmaInput In>
__device__ int core_offset(int row, int kk) {
  const int byte = kk * (Traits<In>::bits / 8);
  return (row / 8) * kCoreStrideRows + (byte / 16) * kCoreStrideK + (row % 8) * 16 + byte % 16;
}

template <MmaInput In>
__device__ void wgmma(float (&d)[4], uint64_t desc_a, uint64_t desc_b) {
#define FPLAB_WGMMA(shape_types, tail)                                                          \
  asm volatile(                                                                                 \
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                \
      "wgmma.mma_async.sync.aligned." shape_types " {%0,%1,%2,%3}, %4, %5, p, 1, 1" tail ";\n}" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                          \
      : "l"(desc_a), "l"(desc_b)                                                                \
      : "memory")
  if constexpr (In == MmaInput::tf32)
    FPLAB_WGMMA("m64n8k8.f32.tf32.tf32", "");
  else if constexpr (In == MmaInput::fp16)
    FPLAB_WGMMA("m64n8k16.f32.f16.f16", ", 0, 0");
  else if constexpr (In == MmaInput::bf16)
    FPLAB_WGMMA("m64n8k16.f32.bf16.bf16", ", 0, 0");
  else if constexpr (In == MmaInput::e4m3)
    FPLAB_WGMMA("m64n8k32.f32.e4m3.e4m3", "");
  else
    FPLAB_WGMMA("m64n8k32.f32.e5m2.e5m2", "");
#undef FPLAB_WGMMA
}

template <MmaInput In>
__global__ void __launch_bounds__(128)
    wgmma_tiles(const uint32_t* __restrict__ a, const uint32_t* __restrict__ b, const float* __restrict__ c,
                float* __restrict__ d, int k_total, bool swap_offsets) {
  using T = Traits<In>;
  __shared__ alignas(256) uint8_t sa[8 * kCoreStrideRows];
  __shared__ alignas(256) uint8_t sb[kCoreStrideRows];
  const size_t tile = blockIdx.x;
  const int tid = threadIdx.x, w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const uint32_t* A = a + tile * 64 * k_total;
  const uint32_t* B = b + tile * k_total * 8;
  const float* C = c + tile * 512;
  const int r0 = 16 * w + g, r1 = r0 + 8;
  float acc[4] = {C[r0 * 8 + 2 * t], C[r0 * 8 + 2 * t + 1], C[r1 * 8 + 2 * t], C[r1 * 8 + 2 * t + 1]};
  // Leading offset: between core matrices along K; stride: along M or N (PTX ISA), unless swapped.
  const uint32_t leading = swap_offsets ? kCoreStrideRows : kCoreStrideK;
  const uint32_t stride = swap_offsets ? kCoreStrideK : kCoreStrideRows;
  for (int k0 = 0; k0 < k_total; k0 += T::k) {
    __syncthreads();  // every thread's previous wgmma has completed before the operands change
    for (int i = tid; i < 64 * T::k; i += 128) {
      const int row = i / T::k, kk = i % T::k;
      store_code<In>(sa, core_offset<In>(row, kk), A[static_cast<size_t>(row) * k_total + k0 + kk]);
    }
    for (int i = tid; i < 8 * T::k; i += 128) {
      const int col = i / T::k, kk = i % T::k;
      store_code<In>(sb, core_offset<In>(col, kk), B[static_cast<size_t>(k0 + kk) * 8 + col]);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic stores -> async proxy
    __syncthreads();
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    wgmma<In>(acc, descriptor(sa, leading, stride), descriptor(sb, leading, stride));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  float* D = d + tile * 512;
  D[r0 * 8 + 2 * t] = acc[0];
  D[r0 * 8 + 2 * t + 1] = acc[1];
  D[r1 * 8 + 2 * t] = acc[2];
  D[r1 * 8 + 2 * t + 1] = acc[3];
}

// Device buffers freed on every path.
template <typename T>
struct DeviceBuffer {
  T* p = nullptr;
  explicit DeviceBuffer(size_t n) { FPLAB_CUDA(cudaMalloc(&p, n * sizeof(T) + 1)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

template <MmaInput In>
void launch(MmaPath path, const uint32_t* a, const uint32_t* b, const float* c, float* d, size_t tiles, int k,
            bool swap) {
  if (path == MmaPath::mma_sync) {
    const unsigned blocks = static_cast<unsigned>((tiles + 3) / 4);
    mma_sync_tiles<In><<<blocks, 128>>>(a, b, c, d, tiles, k);
    FPLAB_CUDA_LAUNCHED("mma_sync_tiles");
  } else {
    wgmma_tiles<In><<<static_cast<unsigned>(tiles), 128>>>(a, b, c, d, k, swap);
    FPLAB_CUDA_LAUNCHED("wgmma_tiles");
  }
}

}  // namespace

int mma_k(MmaInput input) {
  switch (input) {
    case MmaInput::tf32:
      return 8;
    case MmaInput::fp16:
    case MmaInput::bf16:
      return 16;
    default:
      return 32;
  }
}
int mma_rows(MmaPath path) { return path == MmaPath::mma_sync ? 16 : 64; }
int mma_code_bits(MmaInput input) { return 256 / mma_k(input); }

const char* to_string(MmaInput input) {
  switch (input) {
    case MmaInput::tf32:
      return "tf32";
    case MmaInput::fp16:
      return "fp16";
    case MmaInput::bf16:
      return "bf16";
    case MmaInput::e4m3:
      return "e4m3";
    default:
      return "e5m2";
  }
}
const char* to_string(MmaPath path) { return path == MmaPath::mma_sync ? "mma.sync" : "wgmma"; }

std::string mma_instruction(MmaInput input, MmaPath path) {
  const std::string type = input == MmaInput::fp16 ? "f16" : to_string(input);
  const std::string k = std::to_string(mma_k(input));
  if (path == MmaPath::mma_sync) return "mma.sync.aligned.m16n8k" + k + ".row.col.f32." + type + "." + type + ".f32";
  return "wgmma.mma_async.sync.aligned.m64n8k" + k + ".f32." + type + "." + type;
}

std::vector<float> run_mma(MmaInput input, MmaPath path, const MmaTiles& t, MmaOptions options) {
  const size_t rows = static_cast<size_t>(mma_rows(path));
  if (t.rows != static_cast<int>(rows) || t.k == 0 || t.k % mma_k(input) != 0 || t.k > (1u << 20) ||
      t.a.size() != t.tiles * rows * t.k || t.b.size() != t.tiles * t.k * 8 || t.c.size() != t.tiles * rows * 8)
    throw std::invalid_argument("run_mma: tile sizes do not match the instruction");
  std::vector<float> out(t.tiles * rows * 8);
  if (t.tiles == 0) return out;
  DeviceBuffer<uint32_t> a(t.a.size()), b(t.b.size());
  DeviceBuffer<float> c(t.c.size()), d(out.size());
  FPLAB_CUDA(cudaMemcpy(a.p, t.a.data(), t.a.size() * 4, cudaMemcpyHostToDevice));
  FPLAB_CUDA(cudaMemcpy(b.p, t.b.data(), t.b.size() * 4, cudaMemcpyHostToDevice));
  FPLAB_CUDA(cudaMemcpy(c.p, t.c.data(), t.c.size() * 4, cudaMemcpyHostToDevice));
  FPLAB_CUDA(cudaMemset(d.p, 0xff, out.size() * 4));  // NaN poison: an unwritten output shows
  const int k = static_cast<int>(t.k);
  const bool swap = options.swap_descriptor_offsets;
  switch (input) {
    case MmaInput::tf32:
      launch<MmaInput::tf32>(path, a.p, b.p, c.p, d.p, t.tiles, k, swap);
      break;
    case MmaInput::fp16:
      launch<MmaInput::fp16>(path, a.p, b.p, c.p, d.p, t.tiles, k, swap);
      break;
    case MmaInput::bf16:
      launch<MmaInput::bf16>(path, a.p, b.p, c.p, d.p, t.tiles, k, swap);
      break;
    case MmaInput::e4m3:
      launch<MmaInput::e4m3>(path, a.p, b.p, c.p, d.p, t.tiles, k, swap);
      break;
    case MmaInput::e5m2:
      launch<MmaInput::e5m2>(path, a.p, b.p, c.p, d.p, t.tiles, k, swap);
      break;
  }
  FPLAB_CUDA(cudaDeviceSynchronize());
  FPLAB_CUDA(cudaMemcpy(out.data(), d.p, out.size() * 4, cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace fplab::sim::gpu
