// A matrix transposed (and widened, float -> double, where the types differ: exact) in 8 x 8
// blocks: dst (cols x rows) from src (rows x cols), both row-major. Eight rows at a time keep
// the reads within the L1 cache's ways when a row is 4 KiB long (1024 floats: a convolution's
// 32 x 32 positions), where 16 or 32 rows at a time would evict one another.
#pragma once

#include <algorithm>
#include <cstddef>

namespace fplab::python {

template <class In, class Out>
void transpose_into(const In* src, Out* dst, size_t rows, size_t cols) {
  constexpr size_t kBlock = 8;
  for (size_t j0 = 0; j0 < cols; j0 += kBlock)
    for (size_t i0 = 0; i0 < rows; i0 += kBlock) {
      const size_t i1 = std::min(rows, i0 + kBlock), j1 = std::min(cols, j0 + kBlock);
      for (size_t j = j0; j < j1; ++j)
        for (size_t i = i0; i < i1; ++i) dst[j * rows + i] = static_cast<Out>(src[i * cols + j]);
    }
}

}  // namespace fplab::python
