#include "sim/cudnn_nchw_batch_norm.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "fp/cuda_rsqrt.hpp"

namespace fplab::sim {
namespace {

constexpr size_t kThreads = 512, kMeasuredCounts = 256;

// rcp.approx.ftz.f32 of the counts 1 .. 256 minus the correctly rounded 1/k, in ulps, where not 0,
// measured on the H200 (tools/gpu/gpu_reciprocal_table --integers 256, as scripts/gpu-check calibrate
// runs it; 129 .. 256 agree with its table of all of [1, 2) read at the significand of k).
constexpr std::array<std::pair<int, int>, 31> kReciprocalDeltas = {
    {{33, -1},  {37, -1}, {61, 1},   {66, -1}, {67, 1},   {74, -1},  {75, -1}, {83, 1},  {97, 1},  {122, 1}, {123, 1},
     {132, -1}, {134, 1}, {139, -1}, {141, 1}, {148, -1}, {150, -1}, {165, 1}, {166, 1}, {179, 1}, {189, 1}, {193, 1},
     {194, 1},  {209, 1}, {219, 1},  {237, 1}, {243, 1},  {244, 1},  {246, 1}, {249, 1}, {255, -1}}};

// rcp.approx of a count (the deltas above).
float reciprocal_of(size_t k) {
  int delta = 0;
  for (const auto& [count, ulps] : kReciprocalDeltas)
    if (static_cast<size_t>(count) == k) delta = ulps;
  return std::bit_cast<float>(std::bit_cast<int32_t>(1.0f / static_cast<float>(k)) + delta);
}

// reciprocal_of(k) for k = 0 .. kMeasuredCounts (entry 0 unused), looked up once.
const std::array<float, kMeasuredCounts + 1>& reciprocals() {
  static const auto table = [] {
    std::array<float, kMeasuredCounts + 1> t{};
    for (size_t k = 1; k <= kMeasuredCounts; ++k) t[k] = reciprocal_of(k);
    return t;
  }();
  return table;
}

// Whether rcp.approx(n) is known to be the correctly rounded 1/n: n = 2^k and 49 2^k (25 088,
// 50 176, ...), the channels' sizes measured.
bool reciprocal_of_n_measured(size_t n) {
  while (n > 1 && n % 2 == 0) n /= 2;
  return n == 1 || n == 49;
}

// The kernels' thread layout: `pixel_lanes` consecutive threads take a row of pixels, the
// kThreads / pixel_lanes groups of them every that-many-th image. cuDNN's template parameter: 32
// at 14x14, 16x16 and 28x28 (196, 256 and 784 pixels), 128 at 32x32 (1024), as measured.
size_t pixel_lanes_for(size_t pixels) {
  switch (pixels) {
    case 196:
    case 256:
    case 784:
      return 32;
    case 1024:
      return 128;
  }
  return 0;
}

using Threads = std::array<float, kThreads>;

// Thread 0's value after xor shuffles at the given offsets of thread ids, in order (every thread
// adds its partner's value to its own at each one).
template <size_t N>
float xor_tree(Threads v, const std::array<size_t, N>& offsets) {
  for (size_t o : offsets) {
    const Threads before = v;
    for (size_t t = 0; t < kThreads; ++t) v[t] = before[t] + before[t ^ o];
  }
  return v[0];
}

// The forward's tree: within a warp 16, 8, 4, 2, 1, then across warps 256, ..., 32; the backward's
// the other way round.
constexpr std::array<size_t, 9> kForwardTree = {16, 8, 4, 2, 1, 256, 128, 64, 32};
constexpr std::array<size_t, 9> kBackwardTree = {1, 2, 4, 8, 16, 32, 64, 128, 256};

// Calls f(thread, image, pixel) for every position of a batch x pixels plane, each thread's
// positions in its order (images outer, pixels inner).
template <class F>
void for_each_in_thread_order(size_t batch, size_t pixels, F&& f) {
  const size_t lanes = pixel_lanes_for(pixels), groups = kThreads / lanes;
  for (size_t first = 0; first < batch; first += groups)
    for (size_t chunk = 0; chunk < pixels; chunk += lanes)
      for (size_t g = 0; g < groups; ++g)
        for (size_t l = 0; l < lanes && chunk + l < pixels; ++l) f(g * lanes + l, first + g, chunk + l);
}

void require(const NchwPlane& x, bool backward) {
  if (const std::string why = cudnn_nchw_why_not(x.batch, x.pixels, backward); !why.empty())
    throw std::invalid_argument(why);
}

}  // namespace

size_t cudnn_nchw_pixel_lanes(size_t pixels) { return pixel_lanes_for(pixels); }

float cudnn_nchw_count_reciprocal(size_t k) {
  if (k == 0 || k > kMeasuredCounts) throw std::out_of_range("cudnn_nchw_count_reciprocal: k in 1 .. 256");
  return reciprocals()[k];
}

std::string cudnn_nchw_why_not(size_t batch, size_t pixels, bool backward) {
  const size_t lanes = pixel_lanes_for(pixels);
  if (lanes == 0 || (pixels == 196 && !backward))
    return std::string("cuDNN's NCHW BatchNorm model: its thread layout is measured at ") +
           (backward ? "14x14, " : "") + "16x16, 28x28 and 32x32, not " + std::to_string(pixels) + " values an image";
  const size_t groups = kThreads / lanes;
  if (batch == 0 || batch % groups != 0)
    return "cuDNN's NCHW BatchNorm model: the batch must be a multiple of " + std::to_string(groups) + ", not " +
           std::to_string(batch);
  const size_t count = batch / groups * ((pixels + lanes - 1) / lanes);
  if (count > kMeasuredCounts || !reciprocal_of_n_measured(batch * pixels))
    return "cuDNN's NCHW BatchNorm model: the GPU's reciprocals are measured for at most 256 values a thread and n = "
           "2^k or 49 2^k values a channel, not " +
           std::to_string(count) + " and " + std::to_string(batch * pixels);
  return "";
}

NchwStatistics cudnn_nchw_statistics(const NchwPlane& x, float eps) {
  require(x, false);
  Threads mean{}, m2{}, count{};
  const auto& rcp = reciprocals();
  for_each_in_thread_order(x.batch, x.pixels, [&](size_t t, size_t b, size_t p) {
    const float v = x.at(b, p);
    const float k = count[t] + 1.0f;
    count[t] = k;
    const float d = v - mean[t];
    mean[t] = std::fma(d, rcp[static_cast<size_t>(k)], mean[t]);
    m2[t] = std::fma(d, v - mean[t], m2[t]);
  });
  const float rn = 1.0f / static_cast<float>(x.batch * x.pixels);  // = rcp.approx(n) (reciprocal_of_n_measured)
  Threads partial{};
  for (size_t t = 0; t < kThreads; ++t) partial[t] = count[t] * mean[t];
  NchwStatistics s;
  s.mean = xor_tree(partial, kForwardTree) * rn;
  for (size_t t = 0; t < kThreads; ++t) {
    const float dm = mean[t] - s.mean;
    partial[t] = std::fma(count[t], dm * dm, m2[t]);  // the square rounded, then fused with the count
  }
  const float q = xor_tree(partial, kForwardTree);
  s.inv_std = fp::cuda_rsqrt(std::fma(q, rn, eps));
  s.var = q * rn;
  return s;
}

float cudnn_nchw_output(float x, const NchwStatistics& s, float gamma, float beta) {
  const float scaled = gamma * (x - s.mean);
  return std::fma(s.inv_std, scaled, beta);
}

NchwGradients cudnn_nchw_gradients(const NchwPlane& g, const NchwPlane& x, const NchwStatistics& s) {
  require(g, true);
  if (g.batch != x.batch || g.pixels != x.pixels)
    throw std::invalid_argument("cudnn_nchw_gradients: g and x differ in shape");
  Threads sb{}, sd{};  // from +0
  for_each_in_thread_order(g.batch, g.pixels, [&](size_t t, size_t b, size_t p) {
    const float gv = g.at(b, p), d = x.at(b, p) - s.mean;
    sb[t] = sb[t] + gv;
    sd[t] = std::fma(gv, d, sd[t]);
  });
  const float rn = 1.0f / static_cast<float>(g.batch * g.pixels);
  NchwGradients out;
  out.dbeta = xor_tree(sb, kBackwardTree);
  const float dots = xor_tree(sd, kBackwardTree);
  out.dgamma = dots * s.inv_std;
  out.k = ((dots * rn) * s.inv_std) * s.inv_std;
  out.a = out.dbeta * rn;
  return out;
}

float cudnn_nchw_input_gradient(float g, float x, const NchwStatistics& s, const NchwGradients& grads, float gamma) {
  const float d = x - s.mean;
  return ((std::fma(-d, grads.k, g) - grads.a) * s.inv_std) * gamma;
}

}  // namespace fplab::sim
