#include "sim/reference_evaluator.hpp"

#include <stdexcept>

#include "fp/arithmetic.hpp"
#include "fp/round.hpp"
#include "fp/superaccumulator.hpp"
#include "sim/engine.hpp"
#include "sim/mx_factors.hpp"
#include "sim/schedule_walk.hpp"
#include "sim/whole_group.hpp"

namespace fplab::sim {
namespace {

using Partial = Term;

class NumericOps {
 public:
  using Value = Partial;
  // mixed: the schedule has stages of their own format ("@FORMAT"), so a partial passing from
  // one format to another is rounded where it lands (finish), as a register of that format holds it.
  NumericOps(const Arithmetic& arithmetic, const NoiseKey& key, bool mixed)
      : arithmetic_(arithmetic), stage_(arithmetic), mixed_(mixed), stream_(key.rounding_stream()) {}

  Value zero() { return {0.0}; }
  Value finish(const Value& v) {
    const Value e = entered(v);
    if (e.product || !mixed_) return {held(rounded(e))};
    return {held(fp::round_double(e.a, stage_.format, options()).value)};
  }

  // A stage's "@FORMAT" (nullptr: the arithmetic's own). A stage in another format than the
  // arithmetic's cannot fuse a product into its additions: the product is of the factors' type
  // (C's float * float is a float), so under Products::fused it is rounded to the arithmetic's
  // format first and enters as a value — float products into a double accumulator.
  void set_format(const fp::Format* format, const fp::Format* hold) {
    stage_ = arithmetic_;
    if (format) stage_.format = *format;
    own_format_ = format && !(*format == arithmetic_.format);
    hold_ = hold;
  }

  Value add(const Value& x0, const Value& y0) {
    const Value x = entered(x0), y = entered(y0);
    fp::SuperAccumulator acc;
    // Under FMA semantics two products never meet unrounded: the left one is rounded first.
    const bool both_products = x.product && y.product;
    if (both_products && stage_.products == Products::fused)
      acc.add(rounded(x));
    else
      put(acc, x);
    put(acc, y);
    return {held(acc.round(stage_.format, options()).value)};
  }

  Value reduce_whole(const Reducer& r, std::span<const Value> group, uint64_t) {
    if (!own_format_) return {reduce_whole_group(r, group, stage_, stream_)};
    std::vector<Value> entered_group;
    for (const Value& v : group) entered_group.push_back(entered(v));
    return {reduce_whole_group(r, entered_group, stage_, stream_)};
  }

  double rounded(const Value& v) {
    if (!v.product) return v.a;
    return fp::mul(v.a, v.b, stage_.format, options());
  }

 private:
  Value entered(const Value& v) {
    if (!own_format_ || !v.product || arithmetic_.products != Products::fused) return v;
    return {fp::mul(v.a, v.b, arithmetic_.format, options())};
  }
  fp::RoundingOptions options() { return stage_.rounding(&stream_); }
  // A stage's ">HOLD": its results, already in the stage's format, rounded again to where they are held.
  double held(double x) { return hold_ ? fp::round_double(x, *hold_, options()).value : x; }
  static void put(fp::SuperAccumulator& acc, const Value& v) {
    if (v.product)
      acc.add_product(v.a, v.b);
    else
      acc.add(v.a);
  }

  const Arithmetic& arithmetic_;
  Arithmetic stage_;  // the arithmetic of the stage being walked
  const fp::Format* hold_ = nullptr;
  bool own_format_ = false, mixed_;
  fp::CounterRng stream_;
};

}  // namespace

double reduce_reference(const Schedule& schedule, std::span<const double> values, const Arithmetic& arithmetic,
                        const NoiseKey& key) {
  NumericOps ops(arithmetic, key, schedule.has_stage_formats());
  std::vector<Partial> list;
  list.reserve(values.size());
  for (double v : values) list.push_back({v});
  return detail::walk(ops, schedule, std::move(list), key).a;
}

double dot_reference(const Schedule& schedule, std::span<const double> a, std::span<const double> b,
                     const Arithmetic& arithmetic, const NoiseKey& key) {
  if (a.size() != b.size()) throw std::invalid_argument("dot_reference: a and b differ in length");
  if (const auto element = mx_input_of(schedule))  // MX inputs: the factors quantized once, first
    return dot_reference(without_mx_inputs(schedule), mx_dequantized(a, *element), mx_dequantized(b, *element),
                         arithmetic, key);
  NumericOps ops(arithmetic, key, schedule.has_stage_formats());
  std::vector<Partial> list;
  list.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Partial p{a[i], b[i], true};
    list.push_back(arithmetic.products == Products::rounded ? Partial{ops.rounded(p)} : p);
  }
  return detail::walk(ops, schedule, std::move(list), key).a;
}

void gemm_reference(const Schedule& schedule, const double* a, const double* b, double* c, const GemmShape& shape,
                    const Arithmetic& arithmetic, const NoiseKey& key) {
  std::vector<double> column(shape.k);
  for (size_t j = 0; j < shape.n; ++j) {
    for (size_t t = 0; t < shape.k; ++t) column[t] = b[t * shape.n + j];
    for (size_t i = 0; i < shape.m; ++i)
      c[i * shape.n + j] =
          dot_reference(schedule, {a + i * shape.k, shape.k}, column, arithmetic, gemm_output_key(key, i, j, shape.n));
  }
}

}  // namespace fplab::sim
