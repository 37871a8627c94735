// Batched matrix transposes on the device, for the layout changes around a convolution's GEMMs
// (NCHW against the GEMM's rows (b, y, x) x channels, a weight against its transpose): a copy has
// no order, but with PyTorch's own transpose-and-copy each one was a call from Python, and those
// calls set the pace of an emulated step (docs/results/torch_emulate.md). No CUDA types here.
#pragma once

#include <cstddef>

namespace fplab::sim::gpu {

// y[b][j][i] = x[b][i][j] (+ add[j], a float32 sum, where add is given) for b < batches, i < rows,
// j < cols: x is batches x rows x cols, y batches x cols x rows, both dense device memory that do not
// overlap. Enqueued on the default stream, not waited for.
void transpose_batches_on_device(const float* x, size_t batches, size_t rows, size_t cols, const float* add, float* y);

}  // namespace fplab::sim::gpu
