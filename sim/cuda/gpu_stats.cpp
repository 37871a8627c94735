#include "sim/cuda/gpu_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>

namespace fplab::sim::gpu::stats {
namespace {

// Inversions by merge sort: O(B log B), so thousands of blocks over hundreds of runs stay cheap.
int64_t count_inversions(std::vector<int32_t>& v, std::vector<int32_t>& tmp, size_t lo, size_t hi) {
  if (hi - lo < 2) return 0;
  const size_t mid = (lo + hi) / 2;
  int64_t count = count_inversions(v, tmp, lo, mid) + count_inversions(v, tmp, mid, hi);
  size_t i = lo, j = mid, k = lo;
  while (i < mid && j < hi) {
    if (v[j] < v[i]) {
      count += static_cast<int64_t>(mid - i);
      tmp[k++] = v[j++];
    } else {
      tmp[k++] = v[i++];
    }
  }
  while (i < mid) tmp[k++] = v[i++];
  while (j < hi) tmp[k++] = v[j++];
  std::memcpy(&v[lo], &tmp[lo], (hi - lo) * sizeof(int32_t));
  return count;
}

}  // namespace

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

bool same_bits(float a, float b) { return bits(a) == bits(b) || (std::isnan(a) && std::isnan(b)); }

int64_t ulps(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : -1;
  auto key = [](float x) {
    const uint32_t u = bits(x);
    return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7fffffffu) : static_cast<int64_t>(u);
  };
  return std::llabs(key(a) - key(b));
}

OrderStats order_stats(const std::vector<int32_t>& order, int64_t wave) {
  OrderStats s;
  const size_t n = order.size();
  if (n == 0) return s;
  s.identity = true;
  double total = 0;
  for (size_t p = 0; p < n; ++p) {
    const int64_t d = std::llabs(static_cast<int64_t>(p) - order[p]);
    total += static_cast<double>(d);
    s.max_displacement = std::max(s.max_displacement, d);
    if (d != 0) s.identity = false;
  }
  s.mean_displacement = total / static_cast<double>(n);
  std::vector<int32_t> v(order), tmp(n);
  const double pairs = static_cast<double>(n) * static_cast<double>(n - 1) / 2;
  s.inversions = pairs > 0 ? static_cast<double>(count_inversions(v, tmp, 0, n)) / pairs : 0;
  if (wave <= 0) return s;
  // Each wave's blocks in the order they arrived, then the inversions among them.
  const size_t waves = (n + static_cast<size_t>(wave) - 1) / static_cast<size_t>(wave);
  std::vector<std::vector<int32_t>> by_wave(waves);
  size_t same = 0;
  for (size_t p = 0; p < n; ++p) {
    const auto w = static_cast<size_t>(order[p] / wave);
    by_wave[w].push_back(order[p]);
    same += p / static_cast<size_t>(wave) == w ? 1 : 0;
  }
  double inverted = 0, wave_pairs = 0;
  for (auto& members : by_wave) {
    const size_t m = members.size();
    std::vector<int32_t> scratch(m);
    inverted += static_cast<double>(count_inversions(members, scratch, 0, m));
    wave_pairs += static_cast<double>(m) * static_cast<double>(m > 0 ? m - 1 : 0) / 2;
  }
  s.wave_inversions = wave_pairs > 0 ? inverted / wave_pairs : 0;
  s.same_wave = static_cast<double>(same) / static_cast<double>(n);
  return s;
}

std::string fixed(double x, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, x);
  return text;
}

}  // namespace fplab::sim::gpu::stats
