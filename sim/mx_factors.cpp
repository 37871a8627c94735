#include "sim/mx_factors.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "fp/mx_block.hpp"

namespace fplab::sim {
namespace {

// Calls f on every fused reducer of the stages, body(M)[...] stages' inner ones included.
template <class Stages, class F>
void for_each_fused(Stages& stages, F&& f) {
  for (auto& s : stages) {
    for_each_fused(s.inner, f);
    if (s.reduces() && s.reducer.kind == Reducer::Kind::fused) f(s.reducer);
  }
}

// Dequantizes `count` values `stride` apart into `out` (the same positions); false when one is
// not a float.
bool dequantize_into(const float* x, size_t count, size_t stride, const fp::Format& element,
                     std::vector<double>& buffer, float* out) {
  buffer.resize(count);
  for (size_t t = 0; t < count; ++t) buffer[t] = x[t * stride];
  const std::vector<double> values = mx_dequantized(buffer, element);
  bool floats = true;
  for (size_t t = 0; t < count; ++t) {
    const auto f = static_cast<float>(values[t]);
    floats = floats && (f == values[t] || std::isnan(values[t]));
    out[t * stride] = f;
  }
  return floats;
}

}  // namespace

std::optional<fp::Format> mx_element_format(Reducer::Input input) {
  switch (input) {
    case Reducer::Input::mxe4m3:
      return fp::e4m3();
    case Reducer::Input::mxe5m2:
      return fp::e5m2();
    case Reducer::Input::mxe3m2:
      return fp::e3m2fn();
    case Reducer::Input::mxe2m3:
      return fp::e2m3fn();
    case Reducer::Input::mxe2m1:
      return fp::e2m1fn();
    default:
      return std::nullopt;
  }
}

std::optional<fp::Format> mx_input_of(const Schedule& schedule) {
  std::optional<Reducer::Input> found;
  for_each_fused(schedule.stages, [&](const Reducer& r) {
    if (!mx_element_format(r.fused_input)) return;
    if (found && *found != r.fused_input)
      throw std::invalid_argument(std::string("schedule '") + to_string(schedule) + "' names two MX inputs (" +
                                  to_string(*found) + ", " + to_string(r.fused_input) +
                                  "): a dot product's factors are quantized once");
    found = r.fused_input;
  });
  return found ? mx_element_format(*found) : std::nullopt;
}

Schedule without_mx_inputs(Schedule schedule) {
  for_each_fused(schedule.stages, [](Reducer& r) {
    if (mx_element_format(r.fused_input)) r.fused_input = Reducer::Input::none;
  });
  return schedule;
}

std::vector<double> mx_dequantized(std::span<const double> factor, const fp::Format& element) {
  return fp::mx_quantize(factor, element).dequantized;
}

bool mx_gemm_factors(const float* a, const float* b, size_t m, size_t n, size_t k, const fp::Format& element,
                     std::vector<float>& a_out, std::vector<float>& b_out) {
  a_out.resize(m * k);
  b_out.resize(k * n);
  std::vector<double> buffer;
  bool floats = true;
  for (size_t i = 0; i < m; ++i) floats &= dequantize_into(a + i * k, k, 1, element, buffer, &a_out[i * k]);
  for (size_t j = 0; j < n; ++j) floats &= dequantize_into(b + j, k, n, element, buffer, &b_out[j]);
  return floats;
}

}  // namespace fplab::sim
