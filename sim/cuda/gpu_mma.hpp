// Tensor-core MMAs issued one PTX instruction at a time, so that the chip's fused multi-term
// addition can be held against sim::fused_multiply_add / sim::fused_dot (sim/tensor_core.hpp)
// bit for bit. fp32 accumulation throughout. No CUDA types in this header.
//
// A "tile" is one output block D (rows x 8) = C + A (rows x K) * B (K x 8), computed as a chain
// of K / k instructions along K, each taking the previous instruction's D as its C (the first
// takes C). With K == k it is one instruction: every output is C[i][j] plus the k products of
// row i of A and column j of B in one fused step.
//
//   path       instruction                                             rows  k (tf32/f16/bf16/fp8)
//   mma_sync   mma.sync.aligned.m16n8kK.row.col.f32.T.T.f32             16    8 / 16 / 16 / 32
//   wgmma      wgmma.mma_async.sync.aligned.m64n8kK.f32.T.T (sm_90a)    64    8 / 16 / 16 / 32
//
// wgmma reads A and B from shared memory (K-major, no swizzle) through matrix descriptors and
// runs as one warpgroup (4 warps) per tile. On sm_90, mma.sync with fp8 inputs is compiled to two
// fp16 HMMAs and an FADD, not to the fp8 tensor core (docs/results/tensor-cores-h100.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fplab::sim::gpu {

enum class MmaInput { tf32, fp16, bf16, e4m3, e5m2 };
enum class MmaPath { mma_sync, wgmma };

int mma_k(MmaInput input);                                  // k of one instruction: 8, 16, 16, 32, 32
int mma_rows(MmaPath path);                                 // rows of a tile: 16 (mma.sync) or 64 (wgmma)
int mma_code_bits(MmaInput input);                          // bits of one input code: 32 (tf32 as fp32), 16, 16, 8, 8
const char* to_string(MmaInput input);                      // "tf32", "fp16", "bf16", "e4m3", "e5m2"
const char* to_string(MmaPath path);                        // "mma.sync", "wgmma"
std::string mma_instruction(MmaInput input, MmaPath path);  // the PTX mnemonic issued

// Inputs of `tiles` independent tiles, K a multiple of mma_k(input). Codes are bit patterns in
// the low mma_code_bits bits: for tf32 the whole fp32 pattern (the tensor core decides what to do
// with its 13 low bits; that is one of the things measured).
struct MmaTiles {
  size_t tiles = 0, k = 0;
  int rows = 16;
  std::vector<uint32_t> a;  // tiles x rows x k, row-major per tile
  std::vector<uint32_t> b;  // tiles x k x 8 (b[tile][kk][j])
  std::vector<float> c;     // tiles x rows x 8
};

struct MmaOptions {
  // wgmma only: the descriptor's leading/stride byte offsets exchanged (the data layout is
  // fixed; see gpu_mma.cu). gpu_mma_validate picks the one that passes an exact self-check
  // (on the H100: not swapped, as the PTX ISA describes the fields).
  bool swap_descriptor_offsets = false;
};

// Runs every tile on the device and returns D (tiles x rows x 8). tiles.rows must be
// mma_rows(path). Throws CudaError on a CUDA failure, std::invalid_argument on bad sizes.
std::vector<float> run_mma(MmaInput input, MmaPath path, const MmaTiles& tiles, MmaOptions options = {});

}  // namespace fplab::sim::gpu
