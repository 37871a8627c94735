#include "sim/whole_group.hpp"

#include <tuple>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "fp/arithmetic.hpp"
#include "fp/superaccumulator.hpp"
#include "sim/binned_sum.hpp"
#include "sim/tensor_core.hpp"
#include "sim/tensor_core_models.hpp"

namespace fplab::sim {

FusedAddSpec fused_reducer_spec(const Reducer& r, const Arithmetic& ar) {
  FusedAddSpec spec;
  spec.products = r.fused_products;
  spec.fraction_bits = r.fused_fraction_bits;
  std::tie(spec.input, spec.input_mode) = fused_input_conversion(r.fused_input);
  spec.output = ar.format;
  spec.output_mode = ar.format == fp::fp32() ? fp::Mode::rz : ar.mode;
  return spec;
}

double reduce_whole_group(const Reducer& r, std::span<const Term> group, const Arithmetic& ar, fp::CounterRng& stream) {
  using K = Reducer::Kind;
  const fp::RoundingOptions o = ar.rounding(&stream);
  auto value = [&](const Term& t) { return t.product ? fp::mul(t.a, t.b, ar.format, o) : t.a; };
  auto plus = [&](double x, double y) { return fp::add(x, y, ar.format, o); };
  auto minus = [&](double x, double y) { return fp::add(x, -y, ar.format, o); };
  switch (r.kind) {
    case K::exact: {
      fp::SuperAccumulator acc;
      for (const Term& t : group) t.product ? acc.add_product(t.a, t.b) : acc.add(t.a);
      return acc.round(ar.format, o).value;
    }
    case K::kahan: {
      double sum = value(group[0]), c = 0;
      for (size_t i = 1; i < group.size(); ++i) {
        const double y = minus(value(group[i]), c);
        const double t = plus(sum, y);
        c = minus(minus(t, sum), y);
        sum = t;
      }
      return sum;
    }
    case K::neumaier: {
      double sum = value(group[0]), c = 0;
      for (size_t i = 1; i < group.size(); ++i) {
        const double x = value(group[i]);
        const double t = plus(sum, x);
        c = plus(c, std::fabs(sum) >= std::fabs(x) ? plus(minus(sum, t), x) : plus(minus(x, t), sum));
        sum = t;
      }
      return plus(sum, c);
    }
    case K::binned: {
      std::vector<double> values;
      values.reserve(group.size());
      for (const Term& t : group) values.push_back(value(t));
      return binned_sum(values, ar.format, o);
    }
    case K::fused: {
      const FusedAddSpec spec = fused_reducer_spec(r, ar);
      std::vector<double> a, b;
      for (const Term& t : group) {
        a.push_back(t.a);
        b.push_back(t.product ? t.b : 1.0);
      }
      return fused_dot(0.0, a, b, spec);
    }
    default:
      throw std::logic_error("reduce_whole_group: " + to_string(r) + " is not a whole-group reducer");
  }
}

}  // namespace fplab::sim
