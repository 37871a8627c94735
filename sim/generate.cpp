#include "sim/generate.hpp"

#include <charconv>
#include <cmath>

#include "fp/counter_rng.hpp"
#include "fp/format.hpp"

namespace fplab::sim {

std::vector<std::string> distributions() { return {"normal", "uniform", "lognormal", "cancel", "ones"}; }

std::vector<double> generate(std::string_view spec, uint64_t seed) {
  const auto colon = spec.find(':');
  const std::string_view dist = spec.substr(0, colon);
  int64_t n = 0;
  if (colon != std::string_view::npos) {
    const auto digits = spec.substr(colon + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc{} || end != digits.data() + digits.size()) n = 0;
  }
  if (n < 1 || n > 1'000'000'000)
    throw fp::FormatError("data spec '" + std::string(spec) +
                          "': expected DIST:N with N from 1 to 10^9, e.g. normal:1000");

  fp::CounterRng rng(fp::mix_key({seed, 0x67656e}));
  auto gaussian = [&] {  // Box-Muller; one of the pair is enough here
    const double u1 = (static_cast<double>(rng.next() >> 11) + 1) * 0x1p-53, u2 = rng.uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  };
  std::vector<double> v(static_cast<size_t>(n));
  if (dist == "normal") {
    for (auto& x : v) x = gaussian();
  } else if (dist == "uniform") {
    for (auto& x : v) x = rng.uniform();
  } else if (dist == "lognormal") {
    for (auto& x : v) x = ((rng.next() & 1) ? -1 : 1) * std::exp(2 * gaussian());
  } else if (dist == "cancel") {
    for (size_t i = 0; i + 1 < v.size(); i += 2) {
      v[i] = std::exp(2 * gaussian());
      v[i + 1] = -v[i];
    }
    for (size_t i = 0; i < v.size(); i += 16) v[i] *= 1 + 1e-3 * gaussian();  // leave a small remainder
    if (v.size() % 2) v.back() = gaussian();
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
  } else if (dist == "ones") {
    for (auto& x : v) x = 1;
  } else {
    std::string known;
    for (const auto& d : distributions()) known += (known.empty() ? "" : ", ") + d;
    throw fp::FormatError("unknown distribution '" + std::string(dist) + "' (known: " + known + ")");
  }
  return v;
}

}  // namespace fplab::sim
