#include "reveal/probe_sum.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <optional>
#include <vector>

#include "reveal/pair_prober.hpp"

namespace fplab::reveal {

SumFunction dot_with_ones(DotFunction dot) {
  return [dot = std::move(dot)](std::span<const float> x) { return dot(x, std::vector<float>(x.size(), 1.0f)); };
}

float absorbing_value(size_t n) {
  // ulp(2^e) in fp64 is 2^(e - 52); it must exceed 2n so that M + k == M for k <= n.
  const int e = 54 + static_cast<int>(std::bit_width(n));
  return std::ldexp(1.0f, std::min(e, 126));
}

RevealedSum reveal_sum(const SumFunction& sum, size_t n) {
  if (n < 2) throw RevealError("n must be at least 2 (a sum of one term has no order)");
  if (n > (size_t{1} << 24)) throw RevealError("n must be at most 2^24 (the count of 1s must stay exact in fp32)");
  std::optional<RevealedSum> result;
  detail::run_with_deep_stack(n, [&] {
    const auto started = std::chrono::steady_clock::now();
    detail::PairProber prober(sum, n);
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    prober.tree().root = prober.subtree(all);
    result = RevealedSum{std::move(prober.tree()), prober.calls(), 0};
    result->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  });
  return std::move(*result);
}

}  // namespace fplab::reveal
