// cuDNN's BatchNorm arithmetic on the device (gpu_batch_norm_cudnn.hpp). Every operation is a
// correctly rounded intrinsic (the build also compiles without contraction), each one the float32
// operation fplab.torch's composed steps make, in the same order. The GPU's rsqrt is fp::cuda_rsqrt
// run here: the correctly rounded value on the significand in [1, 4) (double precision, a midpoint
// settled in 128-bit integers) plus the measured table's difference, read from device memory.
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>

#include "fp/cuda_rsqrt.hpp"
#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gpu_batch_norm_cudnn.hpp"
#include "sim/cudnn_nchw_batch_norm.hpp"

namespace fplab::sim::gpu {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 1u << 20;  // grid-stride loops beyond

unsigned blocks_for(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? (blocks > 0 ? blocks : 1) : kMaxBlocks);
}

// fp::cuda_rsqrt's packed table on the current device, uploaded on first use (4 MiB a device).
const uint8_t* rsqrt_table() {
  static std::mutex lock;
  static std::map<int, uint8_t*> by_device;
  const std::lock_guard<std::mutex> held(lock);
  int device = 0;
  FPLAB_CUDA(cudaGetDevice(&device));
  uint8_t*& table = by_device[device];
  if (!table) {
    const std::span<const uint8_t> packed = fp::cuda_rsqrt_packed_table();
    FPLAB_CUDA(cudaMalloc(&table, packed.size()));
    FPLAB_CUDA(cudaMemcpy(table, packed.data(), packed.size(), cudaMemcpyHostToDevice));
  }
  return table;
}

// 1: 1/sqrt(m) lies above h = h_units 2^-h_shift; -1 below; 0 on it (fp/cuda_rsqrt.cpp's test).
__device__ int compare_midpoint(uint32_t m_bits, uint64_t h_units, int h_shift) {
  const unsigned __int128 m_units = (m_bits & 0x7FFFFF) | 0x800000;
  const int m_exponent = static_cast<int>(m_bits >> 23) - 127;
  const unsigned __int128 lhs = static_cast<unsigned __int128>(h_units) * h_units * m_units;
  const int power = 2 * h_shift + 23 - m_exponent;
  const unsigned __int128 one = static_cast<unsigned __int128>(1) << power;
  return lhs < one ? 1 : lhs > one ? -1 : 0;
}

// The float32 nearest 1/sqrt(m), m in [1, 4), ties to even.
__device__ float rsqrt_of_significand(float m) {
  const double approx = __ddiv_rn(1.0, __dsqrt_rn(static_cast<double>(m)));
  const float y = __double2float_rn(approx);
  const float others[2] = {nextafterf(y, 2.0f), nextafterf(y, 0.0f)};
  for (const float other : others) {
    const double middle = __dmul_rn(__dadd_rn(static_cast<double>(y), static_cast<double>(other)), 0.5);
    if (fabs(__dsub_rn(approx, middle)) > __dmul_rn(approx, 0x1p-40)) continue;
    const auto h_units = static_cast<uint64_t>(ldexp(middle, 26));
    const int side = compare_midpoint(__float_as_uint(m), h_units, 26);
    const float above = fmaxf(y, other), below = fminf(y, other);
    if (side != 0) return side > 0 ? above : below;
    return (__float_as_uint(below) & 1) ? above : below;
  }
  return y;
}

__device__ float gpu_rsqrt(float x, const uint8_t* table) {
  if (isnan(x) || x < 0.0f) return __int_as_float(0x7fc00000);
  if (x == 0.0f) return copysignf(__int_as_float(0x7f800000), x);
  if (isinf(x)) return 0.0f;
  int e = 0;
  const float f = frexpf(x, &e);  // x = f 2^e, f in [0.5, 1)
  const int exponent = e - 1;
  const int k = exponent >= 0 ? exponent / 2 : -((1 - exponent) / 2);
  const float m = ldexpf(f, e - 2 * k);  // in [1, 4)
  const uint32_t index = __float_as_uint(m) - 0x3F800000u;
  const int delta = static_cast<int>((table[index >> 2] >> (2 * (index & 3))) & 3) - 2;
  return ldexpf(__uint_as_float(__float_as_uint(rsqrt_of_significand(m)) + delta), -k);
}

__global__ void mean_kernel(const float* __restrict__ sums, size_t channels, float inv_n, float* __restrict__ mean) {
  const size_t c = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < channels) mean[c] = __fmul_rn(sums[c], inv_n);
}

// Calls f(e, c) for every element e of a (batch, channels, positions) tensor of `count` values, c
// its channel: the grid-stride loop of the elementwise kernels below.
template <class F>
__device__ void for_each_element(size_t channels, size_t positions, size_t count, F&& f) {
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<size_t>(gridDim.x) * blockDim.x)
    f(e, (e / positions) % channels);
}

__global__ void centred_kernel(const float* __restrict__ x, const float* __restrict__ mean, size_t channels,
                               size_t positions, size_t count, float* __restrict__ out) {
  for_each_element(channels, positions, count, [&](size_t e, size_t c) { out[e] = __fsub_rn(x[e], mean[c]); });
}

// Channel c's running statistics (where given) moved by momentum in double precision, the variance
// unbiased as fl(fl(var·n) / (n − 1)) (n ≤ 1: var itself), n and n − 1 each rounded to float:
// fplab.torch's _move_running, with no contraction into fused operations.
__device__ void move_running(float* running_mean, float* running_var, double momentum, size_t c, float mean,
                             float var, size_t n) {
  const double keep = 1.0 - momentum;
  if (running_mean)
    running_mean[c] = __double2float_rn(__dadd_rn(__dmul_rn(keep, static_cast<double>(running_mean[c])),
                                                  __dmul_rn(momentum, static_cast<double>(mean))));
  if (running_var) {
    const float unbiased =
        n > 1 ? __fdiv_rn(__fmul_rn(var, static_cast<float>(n)), static_cast<float>(n - 1)) : var;
    running_var[c] = __double2float_rn(__dadd_rn(__dmul_rn(keep, static_cast<double>(running_var[c])),
                                                 __dmul_rn(momentum, static_cast<double>(unbiased))));
  }
}

__global__ void statistics_kernel(CudnnStatistics st, size_t channels, size_t n, float inv_n,
                                  const uint8_t* table, float* __restrict__ inv_std, float* __restrict__ scale,
                                  float* __restrict__ shift) {
  const size_t c = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const float var = __fmul_rn(st.squares[c], inv_n);
  move_running(st.running_mean, st.running_var, st.momentum, c, st.mean[c], var, n);
  const float root = gpu_rsqrt(__fadd_rn(var, static_cast<float>(st.eps)), table);
  const float s = __fmul_rn(st.weight[c], root);
  inv_std[c] = root;
  scale[c] = s;
  shift[c] = __fsub_rn(st.bias[c], __fmul_rn(st.mean[c], s));
}

__global__ void factors_kernel(const float* __restrict__ dbeta, const float* __restrict__ dots,
                               const float* __restrict__ inv_std, const float* __restrict__ weight, size_t channels,
                               float inv_n, float* __restrict__ dgamma, float* __restrict__ scale,
                               float* __restrict__ a, float* __restrict__ b) {
  const size_t c = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const float g = __fmul_rn(dots[c], inv_std[c]);
  const float s = __fmul_rn(weight[c], inv_std[c]);
  dgamma[c] = g;
  scale[c] = s;
  a[c] = -__fmul_rn(s, __fmul_rn(__fmul_rn(g, inv_std[c]), inv_n));
  b[c] = -__fmul_rn(s, __fmul_rn(dbeta[c], inv_n));
}

__global__ void input_gradient_kernel(const float* __restrict__ gy, const float* __restrict__ centred,
                                      const float* __restrict__ scale, const float* __restrict__ a,
                                      const float* __restrict__ b, size_t channels, size_t positions, size_t count,
                                      float* __restrict__ dx) {
  for_each_element(channels, positions, count,
                   [&](size_t e, size_t c) { dx[e] = __fmaf_rn(centred[e], a[c], __fmaf_rn(gy[e], scale[c], b[c])); });
}

__global__ void rsqrt_kernel(const float* __restrict__ x, size_t n, const uint8_t* table, float* __restrict__ out) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = gpu_rsqrt(x[i], table);
}

// The NCHW kernels' model on the device (sim/cudnn_nchw_batch_norm.cpp, the same operations): a
// block of 512 threads a channel, each its chain, then xor trees through shared memory.
constexpr int kNchwThreads = 512;
constexpr int kNchwCounts = 256;

struct NchwLayout {
  int batch, channels, pixels, lanes;
  float rn;                           // rcp.approx(n) (the correctly rounded 1/n where the model applies)
  float reciprocal[kNchwCounts + 1];  // rcp.approx of the counts
};

// Thread 0's value after xor shuffles of thread ids at the offsets (each thread adds its partner's).
template <int N>
__device__ float nchw_tree(float* shared, float mine, const int (&offsets)[N]) {
  const int t = threadIdx.x;
  shared[t] = mine;
  __syncthreads();
  for (int i = 0; i < N; ++i) {
    const float other = shared[t ^ offsets[i]];
    __syncthreads();
    shared[t] = __fadd_rn(shared[t], other);
    __syncthreads();
  }
  const float root = shared[0];
  __syncthreads();
  return root;
}

__device__ const int kForwardTree[9] = {16, 8, 4, 2, 1, 256, 128, 64, 32};
__device__ const int kBackwardTree[9] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

__global__ void __launch_bounds__(kNchwThreads)
    nchw_statistics_kernel(const float* __restrict__ x, NchwLayout s, float eps, const uint8_t* table,
                           RunningStatistics running, float* __restrict__ mean_out, float* __restrict__ inv_out,
                           float* __restrict__ var_out) {
  __shared__ float shared[kNchwThreads];
  const int c = blockIdx.x, t = threadIdx.x, groups = kNchwThreads / s.lanes, g = t / s.lanes, l = t % s.lanes;
  float k = 0.0f, m = 0.0f, m2 = 0.0f;
  for (int first = 0; first < s.batch; first += groups)
    for (int p = l; p < s.pixels; p += s.lanes) {
      const float v = x[(static_cast<size_t>(first + g) * s.channels + c) * s.pixels + p];
      k = __fadd_rn(k, 1.0f);
      const float d = __fsub_rn(v, m);
      m = __fmaf_rn(d, s.reciprocal[static_cast<int>(k)], m);
      m2 = __fmaf_rn(d, __fsub_rn(v, m), m2);
    }
  const float mean = __fmul_rn(nchw_tree(shared, __fmul_rn(k, m), kForwardTree), s.rn);
  const float dm = __fsub_rn(m, mean);
  const float q = nchw_tree(shared, __fmaf_rn(k, __fmul_rn(dm, dm), m2), kForwardTree);
  if (t == 0) {
    const float var = __fmul_rn(q, s.rn);
    mean_out[c] = mean;
    inv_out[c] = gpu_rsqrt(__fmaf_rn(q, s.rn, eps), table);
    var_out[c] = var;
    move_running(running.mean, running.var, running.momentum, c, mean, var,
                 static_cast<size_t>(s.batch) * static_cast<size_t>(s.pixels));
  }
}

__global__ void nchw_output_kernel(const float* __restrict__ x, const float* __restrict__ mean,
                                   const float* __restrict__ inv_std, const float* __restrict__ weight,
                                   const float* __restrict__ bias, size_t channels, size_t positions, size_t count,
                                   float* __restrict__ y) {
  for_each_element(channels, positions, count, [&](size_t e, size_t c) {
    y[e] = __fmaf_rn(inv_std[c], __fmul_rn(weight[c], __fsub_rn(x[e], mean[c])), bias[c]);
  });
}

__global__ void __launch_bounds__(kNchwThreads)
    nchw_gradients_kernel(const float* __restrict__ gy, const float* __restrict__ x, const float* __restrict__ mean,
                          const float* __restrict__ inv_std, NchwLayout s, float* __restrict__ dgamma,
                          float* __restrict__ dbeta, float* __restrict__ k_out, float* __restrict__ a_out) {
  __shared__ float shared[kNchwThreads];
  const int c = blockIdx.x, t = threadIdx.x, groups = kNchwThreads / s.lanes, g = t / s.lanes, l = t % s.lanes;
  const float mu = mean[c];
  float sb = 0.0f, sd = 0.0f;
  for (int first = 0; first < s.batch; first += groups)
    for (int p = l; p < s.pixels; p += s.lanes) {
      const size_t at = (static_cast<size_t>(first + g) * s.channels + c) * s.pixels + p;
      const float gv = gy[at];
      sb = __fadd_rn(sb, gv);
      sd = __fmaf_rn(gv, __fsub_rn(x[at], mu), sd);
    }
  const float beta_grad = nchw_tree(shared, sb, kBackwardTree);
  const float dots = nchw_tree(shared, sd, kBackwardTree);
  if (t == 0) {
    const float inv = inv_std[c];
    dbeta[c] = beta_grad;
    dgamma[c] = __fmul_rn(dots, inv);
    k_out[c] = __fmul_rn(__fmul_rn(__fmul_rn(dots, s.rn), inv), inv);
    a_out[c] = __fmul_rn(beta_grad, s.rn);
  }
}

__global__ void nchw_input_gradient_kernel(const float* __restrict__ gy, const float* __restrict__ x,
                                           const float* __restrict__ mean, const float* __restrict__ inv_std,
                                           const float* __restrict__ weight, const float* __restrict__ k,
                                           const float* __restrict__ a, size_t channels, size_t positions, size_t count,
                                           float* __restrict__ dx) {
  for_each_element(channels, positions, count, [&](size_t e, size_t c) {
    const float d = __fsub_rn(x[e], mean[c]);
    dx[e] = __fmul_rn(__fmul_rn(__fsub_rn(__fmaf_rn(-d, k[c], gy[e]), a[c]), inv_std[c]), weight[c]);
  });
}

NchwLayout nchw_layout(const PlanesShape& shape, bool backward) {
  if (const std::string why = cudnn_nchw_why_not(shape.batch, shape.positions, backward); !why.empty())
    throw std::invalid_argument(why);
  NchwLayout s{};
  s.batch = static_cast<int>(shape.batch);
  s.channels = static_cast<int>(shape.channels);
  s.pixels = static_cast<int>(shape.positions);
  s.lanes = static_cast<int>(cudnn_nchw_pixel_lanes(shape.positions));
  s.rn = 1.0f / static_cast<float>(shape.per_channel());
  for (int k = 1; k <= kNchwCounts; ++k) s.reciprocal[k] = cudnn_nchw_count_reciprocal(static_cast<size_t>(k));
  return s;
}

// fl(1/n) as float32 (n below 2^24 is exact as a float; above, rounded first, as PyTorch's full()).
float reciprocal(size_t n) { return 1.0f / static_cast<float>(n); }

}  // namespace

void cudnn_mean_and_centred(const float* x, const float* sums, const PlanesShape& shape, float* mean, float* centred) {
  if (shape.channels == 0) return;
  mean_kernel<<<blocks_for(shape.channels), kThreads>>>(sums, shape.channels, reciprocal(shape.per_channel()), mean);
  FPLAB_CUDA_LAUNCHED("cudnn_mean");
  if (shape.size() == 0) return;
  centred_kernel<<<blocks_for(shape.size()), kThreads>>>(x, mean, shape.channels, shape.positions, shape.size(),
                                                         centred);
  FPLAB_CUDA_LAUNCHED("cudnn_centred");
}

void cudnn_statistics(const CudnnStatistics& statistics, const PlanesShape& shape, float* inv_std, float* scale,
                      float* shift) {
  if (shape.channels == 0) return;
  const size_t n = shape.per_channel();
  statistics_kernel<<<blocks_for(shape.channels), kThreads>>>(statistics, shape.channels, n, reciprocal(n),
                                                              rsqrt_table(), inv_std, scale, shift);
  FPLAB_CUDA_LAUNCHED("cudnn_statistics");
}

void cudnn_gradient_factors(const float* dbeta, const float* dots, const float* inv_std, const float* weight,
                            const PlanesShape& shape, float* dgamma, float* scale, float* a, float* b) {
  if (shape.channels == 0) return;
  factors_kernel<<<blocks_for(shape.channels), kThreads>>>(dbeta, dots, inv_std, weight, shape.channels,
                                                           reciprocal(shape.per_channel()), dgamma, scale, a, b);
  FPLAB_CUDA_LAUNCHED("cudnn_gradient_factors");
}

void cudnn_input_gradient(const float* gy, const float* centred, const float* scale, const float* a, const float* b,
                          const PlanesShape& shape, float* dx) {
  if (shape.size() == 0) return;
  input_gradient_kernel<<<blocks_for(shape.size()), kThreads>>>(gy, centred, scale, a, b, shape.channels,
                                                                shape.positions, shape.size(), dx);
  FPLAB_CUDA_LAUNCHED("cudnn_input_gradient");
}

void cudnn_nchw_forward(const float* x, const float* weight, const float* bias, const PlanesShape& shape, float eps,
                        float* mean, float* inv_std, float* var, float* y, const RunningStatistics& running) {
  if (shape.size() == 0) return;
  const NchwLayout s = nchw_layout(shape, false);
  nchw_statistics_kernel<<<static_cast<unsigned>(shape.channels), kNchwThreads>>>(x, s, eps, rsqrt_table(), running,
                                                                                  mean, inv_std, var);
  FPLAB_CUDA_LAUNCHED("cudnn_nchw_statistics");
  nchw_output_kernel<<<blocks_for(shape.size()), kThreads>>>(x, mean, inv_std, weight, bias, shape.channels,
                                                             shape.positions, shape.size(), y);
  FPLAB_CUDA_LAUNCHED("cudnn_nchw_output");
}

void cudnn_nchw_backward(const float* gy, const float* x, const float* mean, const float* inv_std, const float* weight,
                         const PlanesShape& shape, float* dgamma, float* dbeta, float* factors, float* dx) {
  if (shape.size() == 0) return;
  const NchwLayout s = nchw_layout(shape, true);
  float *const k = factors, *const a = factors + shape.channels;
  nchw_gradients_kernel<<<static_cast<unsigned>(shape.channels), kNchwThreads>>>(gy, x, mean, inv_std, s, dgamma, dbeta,
                                                                                 k, a);
  FPLAB_CUDA_LAUNCHED("cudnn_nchw_gradients");
  if (dx) {
    nchw_input_gradient_kernel<<<blocks_for(shape.size()), kThreads>>>(
        gy, x, mean, inv_std, weight, k, a, shape.channels, shape.positions, shape.size(), dx);
    FPLAB_CUDA_LAUNCHED("cudnn_nchw_input_gradient");
  }
}

void cuda_rsqrt_on_device(const float* x, size_t n, float* out) {
  if (n == 0) return;
  float* device = nullptr;
  FPLAB_CUDA(cudaMalloc(&device, 2 * n * sizeof(float)));
  FPLAB_CUDA(cudaMemcpy(device, x, n * sizeof(float), cudaMemcpyHostToDevice));
  rsqrt_kernel<<<blocks_for(n), kThreads>>>(device, n, rsqrt_table(), device + n);
  FPLAB_CUDA_LAUNCHED("cuda_rsqrt_on_device");
  FPLAB_CUDA(cudaMemcpy(out, device + n, n * sizeof(float), cudaMemcpyDeviceToHost));
  FPLAB_CUDA(cudaFree(device));
}

}  // namespace fplab::sim::gpu
