// Division of 32-bit unsigned numbers by a divisor fixed before a kernel runs, as a multiply-high,
// an add and a shift (Granlund and Montgomery, PLDI 1994, figure 4.1): a GPU has no integer divide
// instruction, and an index computation that divides six times an element (im2col) is then bound
// by its divisions rather than by memory. Exact for every numerator below 2^32 and divisor from 1
// to 2^31. No CUDA types: usable (and tested) on the host too.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FPLAB_FAST_DIVIDE_HD __host__ __device__
#else
#define FPLAB_FAST_DIVIDE_HD
#endif

namespace fplab::sim::gpu {

class FastDivide {
 public:
  FastDivide() = default;
  explicit FastDivide(uint32_t divisor) : divisor_(divisor) {
    while ((uint64_t{1} << shift_) < divisor) ++shift_;  // ceil(log2(divisor))
    // m = floor(2^32 (2^l - d) / d) + 1, below 2^32 since 2^l - d < d.
    magic_ = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift_) - divisor)) / divisor + 1);
  }

  FPLAB_FAST_DIVIDE_HD uint32_t divisor() const { return divisor_; }
  FPLAB_FAST_DIVIDE_HD uint32_t quotient(uint32_t n) const {
    return static_cast<uint32_t>((uint64_t{high(magic_, n)} + n) >> shift_);
  }
  FPLAB_FAST_DIVIDE_HD uint32_t remainder(uint32_t n) const { return n - quotient(n) * divisor_; }

 private:
  FPLAB_FAST_DIVIDE_HD static uint32_t high(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return static_cast<uint32_t>((uint64_t{a} * b) >> 32);
#endif
  }

  uint32_t divisor_ = 1, magic_ = 1, shift_ = 0;
};

}  // namespace fplab::sim::gpu
