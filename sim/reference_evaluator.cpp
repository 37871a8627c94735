#include "sim/reference_evaluator.hpp"

#include <stdexcept>

#include "fp/arithmetic.hpp"
#include "fp/superaccumulator.hpp"
#include "sim/engine.hpp"
#include "sim/schedule_walk.hpp"
#include "sim/whole_group.hpp"

namespace fplab::sim {
namespace {

using Partial = Term;

class NumericOps {
 public:
  using Value = Partial;
  NumericOps(const Arithmetic& arithmetic, const NoiseKey& key)
      : arithmetic_(arithmetic), stream_(key.rounding_stream()) {}

  Value zero() { return {0.0}; }
  Value finish(const Value& v) { return {rounded(v)}; }

  Value add(const Value& x, const Value& y) {
    fp::SuperAccumulator acc;
    // Under FMA semantics two products never meet unrounded: the left one is rounded first.
    const bool both_products = x.product && y.product;
    if (both_products && arithmetic_.products == Products::fused)
      acc.add(rounded(x));
    else
      put(acc, x);
    put(acc, y);
    return {acc.round(arithmetic_.format, options()).value};
  }

  Value reduce_whole(const Reducer& r, std::span<const Value> group, uint64_t) {
    return {reduce_whole_group(r, group, arithmetic_, stream_)};
  }

  double rounded(const Value& v) { return v.product ? fp::mul(v.a, v.b, arithmetic_.format, options()) : v.a; }

 private:
  fp::RoundingOptions options() {
    return {arithmetic_.mode, arithmetic_.flush_subnormals, arithmetic_.saturate, &stream_};
  }
  static void put(fp::SuperAccumulator& acc, const Value& v) {
    if (v.product)
      acc.add_product(v.a, v.b);
    else
      acc.add(v.a);
  }

  const Arithmetic& arithmetic_;
  fp::CounterRng stream_;
};

}  // namespace

double reduce_reference(const Schedule& schedule, std::span<const double> values, const Arithmetic& arithmetic,
                        const NoiseKey& key) {
  NumericOps ops(arithmetic, key);
  std::vector<Partial> list;
  list.reserve(values.size());
  for (double v : values) list.push_back({v});
  return detail::walk(ops, schedule, std::move(list), key).a;
}

double dot_reference(const Schedule& schedule, std::span<const double> a, std::span<const double> b,
                     const Arithmetic& arithmetic, const NoiseKey& key) {
  if (a.size() != b.size()) throw std::invalid_argument("dot_reference: a and b differ in length");
  NumericOps ops(arithmetic, key);
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
