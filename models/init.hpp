// Weight initialisation from the algorithmic seed.
#pragma once

#include <cmath>

#include "fp/counter_rng.hpp"
#include "models/tensor.hpp"

namespace fplab::models {

// Standard normal by Box-Muller from a counter-based stream (two uniforms per draw).
inline double standard_normal(fp::CounterRng& rng) {
  const double u1 = (static_cast<double>(rng.next() >> 11) + 1) * 0x1p-53, u2 = rng.uniform();
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
}

// He (Kaiming) normal for layers followed by ReLU: N(0, 2 / fan_in).
template <class T>
void he_normal(Tensor<T>& w, size_t fan_in, fp::CounterRng rng) {
  const double sd = std::sqrt(2.0 / static_cast<double>(fan_in));
  for (auto& x : w.data) x = static_cast<T>(sd * standard_normal(rng));
}

}  // namespace fplab::models
