#include "sim/cudnn_nchw_batch_norm.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "fp/cuda_rsqrt.hpp"

namespace fplab::sim {
namespace {

constexpr size_t kWarps = 16, kLanes = 32, kMeasuredCounts = 128;
constexpr size_t kMeasuredN = 50176;  // 64 x 784: rcp.approx(n) is the correctly rounded 1/n there

// rcp.approx.ftz.f32 of the counts 1 .. 128 minus the correctly rounded 1/k, in ulps, where not 0
// (tools/gpu/gpu_reciprocal_table --integers 128, H200).
constexpr std::array<std::pair<int, int>, 11> kReciprocalDeltas = {
    {{33, -1}, {37, -1}, {61, 1}, {66, -1}, {67, 1}, {74, -1}, {75, -1}, {83, 1}, {97, 1}, {122, 1}, {123, 1}}};

float reciprocal(size_t k) {
  int delta = 0;
  for (const auto& [count, ulps] : kReciprocalDeltas)
    if (static_cast<size_t>(count) == k) delta = ulps;
  return std::bit_cast<float>(std::bit_cast<int32_t>(1.0f / static_cast<float>(k)) + delta);
}

using Lanes = std::array<std::array<float, kLanes>, kWarps>;

// The xor butterflies' lane-0 value: lanes at the offsets given, then warps.
template <size_t N, size_t M>
float butterfly(Lanes v, const std::array<size_t, N>& lane_offsets, const std::array<size_t, M>& warp_offsets) {
  for (size_t o : lane_offsets)
    for (auto& warp : v) {
      const auto before = warp;
      for (size_t l = 0; l < kLanes; ++l) warp[l] = before[l] + before[l ^ o];
    }
  std::array<float, kWarps> w{};
  for (size_t i = 0; i < kWarps; ++i) w[i] = v[i][0];
  for (size_t o : warp_offsets) {
    const auto before = w;
    for (size_t i = 0; i < kWarps; ++i) w[i] = before[i] + before[i ^ o];
  }
  return w[0];
}

constexpr std::array<size_t, 5> kForwardLanes = {16, 8, 4, 2, 1}, kBackwardLanes = {1, 2, 4, 8, 16};
constexpr std::array<size_t, 4> kForwardWarps = {8, 4, 2, 1}, kBackwardWarps = {1, 2, 4, 8};

// Calls f(warp, lane, image, pixel) for every position of a batch x pixels plane, each thread's
// positions in its order.
template <class F>
void for_each_in_thread_order(size_t batch, size_t pixels, F&& f) {
  for (size_t first = 0; first < batch; first += kWarps)
    for (size_t chunk = 0; chunk < pixels; chunk += kLanes)
      for (size_t w = 0; w < kWarps; ++w)
        for (size_t l = 0; l < kLanes && chunk + l < pixels; ++l) f(w, l, first + w, chunk + l);
}

void require(const NchwPlane& x) {
  if (const std::string why = cudnn_nchw_why_not(x.batch, x.pixels); !why.empty()) throw std::invalid_argument(why);
}

}  // namespace

std::string cudnn_nchw_why_not(size_t batch, size_t pixels) {
  if (batch == 0 || batch % kWarps != 0)
    return "cuDNN's NCHW BatchNorm model: the batch must be a multiple of 16 (one image a warp), not " +
           std::to_string(batch);
  const size_t count = batch / kWarps * ((pixels + kLanes - 1) / kLanes);
  if (count > kMeasuredCounts || batch * pixels != kMeasuredN)
    return "cuDNN's NCHW BatchNorm model: the GPU's reciprocals are measured for " + std::to_string(kMeasuredN) +
           " values a channel and at most 128 a thread, not " + std::to_string(batch * pixels);
  return "";
}

NchwStatistics cudnn_nchw_statistics(const NchwPlane& x, float eps) {
  require(x);
  Lanes mean{}, m2{}, count{};
  for_each_in_thread_order(x.batch, x.pixels, [&](size_t w, size_t l, size_t b, size_t p) {
    const float v = x.at(b, p);
    const float k = count[w][l] + 1.0f;
    count[w][l] = k;
    const float d = v - mean[w][l];
    mean[w][l] = std::fma(d, reciprocal(static_cast<size_t>(k)), mean[w][l]);
    m2[w][l] = std::fma(d, v - mean[w][l], m2[w][l]);
  });
  const float rn = reciprocal(x.batch * x.pixels);
  Lanes partial{};
  for (size_t w = 0; w < kWarps; ++w)
    for (size_t l = 0; l < kLanes; ++l) partial[w][l] = count[w][l] * mean[w][l];
  NchwStatistics s;
  s.mean = butterfly(partial, kForwardLanes, kForwardWarps) * rn;
  for (size_t w = 0; w < kWarps; ++w)
    for (size_t l = 0; l < kLanes; ++l) {
      const float dm = mean[w][l] - s.mean;
      partial[w][l] = m2[w][l] + (count[w][l] * dm) * dm;
    }
  const float q = butterfly(partial, kForwardLanes, kForwardWarps);
  s.inv_std = fp::cuda_rsqrt(std::fma(q, rn, eps));
  s.var = q * rn;
  return s;
}

float cudnn_nchw_output(float x, const NchwStatistics& s, float gamma, float beta) {
  const float scaled = gamma * (x - s.mean);
  return std::fma(s.inv_std, scaled, beta);
}

NchwGradients cudnn_nchw_gradients(const NchwPlane& g, const NchwPlane& x, const NchwStatistics& s) {
  require(g);
  if (g.batch != x.batch || g.pixels != x.pixels)
    throw std::invalid_argument("cudnn_nchw_gradients: g and x differ in shape");
  Lanes sb{}, sd{};  // from +0
  for_each_in_thread_order(g.batch, g.pixels, [&](size_t w, size_t l, size_t b, size_t p) {
    const float gv = g.at(b, p), d = x.at(b, p) - s.mean;
    sb[w][l] = sb[w][l] + gv;
    sd[w][l] = std::fma(gv, d, sd[w][l]);
  });
  const float rn = reciprocal(g.batch * g.pixels);
  NchwGradients out;
  out.dbeta = butterfly(sb, kBackwardLanes, kBackwardWarps);
  const float dots = butterfly(sd, kBackwardLanes, kBackwardWarps);
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
