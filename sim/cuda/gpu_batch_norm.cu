// Batch normalisation's elementwise kernels (gpu_batch_norm.hpp). Every operation is written as a
// correctly rounded intrinsic (__fadd_rn, __fmul_rn, ...), so that no compiler setting can fuse
// two of them into one FMA: the CPU rounds after each (sim/cuda/CMakeLists.txt also compiles
// without contraction). One thread an element; the index arithmetic divides by the shape's sizes
// with FastDivide where every index fits in 32 bits (an integer division is a long instruction
// sequence on a GPU), in 64 bits otherwise.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/fast_divide.hpp"
#include "sim/cuda/gpu_batch_norm.hpp"

namespace fplab::sim::gpu {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = uint64_t{1} << 20;  // grid-stride loops beyond

unsigned blocks_for(uint64_t count) {
  return static_cast<unsigned>(std::min<uint64_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
}

// Division by a shape's size, in 64 bits (shapes with 2^32 elements or more).
class WideDivide {
 public:
  WideDivide() = default;
  explicit WideDivide(uint64_t divisor) : divisor_(divisor) {}
  __device__ uint64_t divisor() const { return divisor_; }
  __device__ uint64_t quotient(uint64_t n) const { return n / divisor_; }
  __device__ uint64_t remainder(uint64_t n) const { return n % divisor_; }

 private:
  uint64_t divisor_ = 1;
};

// The shape's sizes as divisors of one index width: Index uint32_t with FastDivide, or uint64_t.
template <class Index, class Divide>
struct Planes {
  Divide positions, channels, per_channel;  // P, C, n = B·P
  Index count;                              // B·C·P
};

// The channel of element e of x (e = (b·C + c)·P + p).
template <class Index, class Divide>
__device__ Index channel_of(const Planes<Index, Divide>& s, Index e) {
  return s.channels.remainder(s.positions.quotient(e));
}

template <class Index, class Divide>
__global__ void segments_kernel(SegmentTerms terms, const float* __restrict__ x, const float* __restrict__ other,
                                Planes<Index, Divide> s, float n, Index ld, float* __restrict__ segments) {
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < s.count;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    // i = c·n + b·P + p in the segments; the term lies at (b·C + c)·P + p in x.
    const Index c = s.per_channel.quotient(i), t = s.per_channel.remainder(i);
    const Index b = s.positions.quotient(t), p = s.positions.remainder(t);
    const Index e = (b * static_cast<Index>(s.channels.divisor()) + c) * static_cast<Index>(s.positions.divisor()) + p;
    float term = x[e];
    if (terms == SegmentTerms::values_and_products) {
      segments[(c + static_cast<Index>(s.channels.divisor())) * ld + t] = __fmul_rn(term, other[e]);
    } else if (terms == SegmentTerms::centred_squares) {
      const float d = __fsub_rn(term, __fdiv_rn(other[c], n));
      term = __fmul_rn(d, d);
    } else if (terms == SegmentTerms::products) {
      term = __fmul_rn(term, other[e]);
    }
    segments[c * ld + t] = term;
  }
}

__global__ void statistics_kernel(BatchNormStatistics st, int64_t channels, float n, float n_less_one,
                                  float* __restrict__ mean, float* __restrict__ inv_std) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  float m, var;
  if (st.training) {
    m = __fdiv_rn(st.sums[c], n);
    var = __fdiv_rn(st.squares[c], n);
    const double keep = 1.0 - st.momentum;
    if (st.running_mean)
      st.running_mean[c] = __double2float_rn(__dadd_rn(__dmul_rn(keep, static_cast<double>(st.running_mean[c])),
                                                       __dmul_rn(st.momentum, static_cast<double>(m))));
    if (st.running_var) {
      const float unbiased = n_less_one > 0.0f ? __fdiv_rn(__fmul_rn(var, n), n_less_one) : var;
      st.running_var[c] = __double2float_rn(__dadd_rn(__dmul_rn(keep, static_cast<double>(st.running_var[c])),
                                                      __dmul_rn(st.momentum, static_cast<double>(unbiased))));
    }
  } else {
    m = st.running_mean[c];
    var = st.running_var[c];
  }
  mean[c] = m;
  inv_std[c] = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, static_cast<float>(st.eps))));
}

template <class Index, class Divide>
__global__ void output_kernel(const float* __restrict__ x, const float* __restrict__ mean,
                              const float* __restrict__ inv_std, const float* __restrict__ weight,
                              const float* __restrict__ bias, Planes<Index, Divide> s, float* __restrict__ xhat,
                              float* __restrict__ y) {
  for (Index e = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; e < s.count;
       e += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index c = channel_of(s, e);
    const float h = __fmul_rn(__fsub_rn(x[e], mean[c]), inv_std[c]);
    xhat[e] = h;
    float out = weight ? __fmul_rn(weight[c], h) : h;
    if (bias) out = __fadd_rn(out, bias[c]);
    y[e] = out;
  }
}

template <class Index, class Divide>
__global__ void input_gradient_kernel(bool training, const float* __restrict__ gy, const float* __restrict__ xhat,
                                      const float* __restrict__ inv_std, const float* __restrict__ weight,
                                      const float* __restrict__ dbeta, const float* __restrict__ dgamma,
                                      Planes<Index, Divide> s, float n, float* __restrict__ dx) {
  for (Index e = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; e < s.count;
       e += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index c = channel_of(s, e);
    const float scale = weight ? __fmul_rn(weight[c], inv_std[c]) : inv_std[c];  // γ·inv_std (1·v = v)
    if (training) {
      const float inner = __fsub_rn(__fsub_rn(__fmul_rn(n, gy[e]), dbeta[c]), __fmul_rn(xhat[e], dgamma[c]));
      dx[e] = __fmul_rn(__fdiv_rn(scale, n), inner);
    } else {
      dx[e] = __fmul_rn(gy[e], scale);
    }
  }
}

template <class Index, class Divide>
__global__ void channel_fma_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                   const float* __restrict__ addend, bool addend_per_element, Planes<Index, Divide> s,
                                   float* __restrict__ out) {
  for (Index e = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; e < s.count;
       e += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index c = channel_of(s, e);
    out[e] = __fmaf_rn(x[e], scale[c], addend_per_element ? addend[e] : addend[c]);
  }
}

// Calls launch(planes) with the shape's divisors in the narrowest index width that holds every
// index up to `extent` (at least the shape's size).
template <class Launch>
void with_planes(size_t extent, const PlanesShape& shape, Launch&& launch) {
  if (std::max(extent, shape.size()) < (uint64_t{1} << 31)) {  // FastDivide: divisors up to 2^31
    const auto fast = [](size_t v) { return FastDivide(static_cast<uint32_t>(v)); };
    launch(Planes<uint32_t, FastDivide>{fast(shape.positions), fast(shape.channels), fast(shape.per_channel()),
                                        static_cast<uint32_t>(shape.size())});
  } else {
    launch(Planes<uint64_t, WideDivide>{WideDivide(shape.positions), WideDivide(shape.channels),
                                        WideDivide(shape.per_channel()), static_cast<uint64_t>(shape.size())});
  }
}

// A count as PyTorch makes it a float32 tensor (torch.full_like(x, n)): rounded to nearest.
float count_of(size_t n) { return static_cast<float>(n); }

}  // namespace

void batch_norm_segments(SegmentTerms terms, const float* x, const float* other, const PlanesShape& shape,
                         float* segments, size_t ld) {
  if (shape.size() == 0) return;
  if (ld < shape.per_channel()) throw std::invalid_argument("batch_norm_segments: a stride below the segments' length");
  const size_t segments_count = terms == SegmentTerms::values_and_products ? 2 * shape.channels : shape.channels;
  with_planes(segments_count * ld, shape, [&](auto planes) {
    using Index = decltype(planes.count);
    segments_kernel<<<blocks_for(shape.size()), kThreads>>>(terms, x, other, planes, count_of(shape.per_channel()),
                                                            static_cast<Index>(ld), segments);
  });
  FPLAB_CUDA_LAUNCHED("batch_norm_segments");
}

void batch_norm_statistics(const BatchNormStatistics& statistics, const PlanesShape& shape, float* mean,
                           float* inv_std) {
  if (shape.channels == 0) return;
  const size_t n = shape.per_channel();
  statistics_kernel<<<blocks_for(shape.channels), kThreads>>>(
      statistics, static_cast<int64_t>(shape.channels), count_of(n), n > 1 ? count_of(n - 1) : 0.0f, mean, inv_std);
  FPLAB_CUDA_LAUNCHED("batch_norm_statistics");
}

void batch_norm_output(const float* x, const float* mean, const float* inv_std, const float* weight, const float* bias,
                       const PlanesShape& shape, float* xhat, float* y) {
  if (shape.size() == 0) return;
  with_planes(shape.size(), shape, [&](auto planes) {
    output_kernel<<<blocks_for(shape.size()), kThreads>>>(x, mean, inv_std, weight, bias, planes, xhat, y);
  });
  FPLAB_CUDA_LAUNCHED("batch_norm_output");
}

void batch_norm_input_gradient(bool training, const float* gy, const float* xhat, const float* inv_std,
                               const float* weight, const float* dbeta, const float* dgamma, const PlanesShape& shape,
                               float* dx) {
  if (shape.size() == 0) return;
  with_planes(shape.size(), shape, [&](auto planes) {
    input_gradient_kernel<<<blocks_for(shape.size()), kThreads>>>(training, gy, xhat, inv_std, weight, dbeta, dgamma,
                                                                  planes, count_of(shape.per_channel()), dx);
  });
  FPLAB_CUDA_LAUNCHED("batch_norm_input_gradient");
}

void channel_fma(const float* x, const float* scale, const float* addend, bool addend_per_element,
                 const PlanesShape& shape, float* out) {
  if (shape.size() == 0) return;
  with_planes(shape.size(), shape, [&](auto planes) {
    channel_fma_kernel<<<blocks_for(shape.size()), kThreads>>>(x, scale, addend, addend_per_element, planes, out);
  });
  FPLAB_CUDA_LAUNCHED("channel_fma");
}

}  // namespace fplab::sim::gpu
