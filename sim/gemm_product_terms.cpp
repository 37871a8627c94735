// The leading stages of a GEMM over product terms (sim/gemm_product_terms.hpp).
//
// Assumptions: the inputs are floats, so every product a*b is exact in a double (48 significant
// bits, exponents within [-298, 256]). What a product does when it meets an addition is the
// reference's (reference_evaluator.cpp, NumericOps::add): a product and a value are added exactly
// and rounded once (an FMA); two products under Products::fused: the left one is rounded first,
// then the same; under Products::exact: their exact sum is rounded once; a lone product leaving a
// group is rounded (finish). Whole-group reducers get the exact products: fused(N,F) through the
// tensor-core model's lane form, the others through reduce_whole_group, lane by lane.
#include "sim/gemm_product_terms.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "fp/arithmetic.hpp"
#include "sim/narrow_chain_tile.hpp"
#include "sim/tile_walker.hpp"

namespace fplab::sim::detail {
namespace {

// A partial of the leading stages: the exact product of term `term` of every lane (row < 0), or
// row `row` of the tile's values. Every partial is consumed once, so a sum may reuse its row.
struct Partial {
  int32_t row = -1;
  uint32_t term = 0;
  bool product() const { return row < 0; }
};

// schedule_walk.hpp's Ops over a tile of mr x nr outputs (lane r * nr + c), products a[r][t] * b[t][c].
template <class T, class Add>
class ProductTermOps {
 public:
  using Value = Partial;
  explicit ProductTermOps(const Arithmetic& arithmetic) : ar_(arithmetic) {}

  // The whole GEMM's factors (fused steps convert them once for every tile: FusedFactors).
  void start_gemm(const float* a, const float* b, GemmShape shape) {
    gemm_a_ = a, gemm_b_ = b, shape_ = shape;
    factors_.reset();
  }

  // The tile at rows [i0, i0 + mr), columns [j0, j0 + nr) of the GEMM given to start_gemm.
  void start_tile(size_t i0, size_t j0, size_t mr, size_t nr, Add add, fp::CounterRng* streams) {
    i0_ = i0, j0_ = j0;
    a_ = gemm_a_ + i0 * shape_.k, lda_ = shape_.k, b_ = gemm_b_ + j0, ldb_ = shape_.n, mr_ = mr, nr_ = nr, w_ = mr * nr;
    add_ = add;
    streams_ = streams;
    rows_ = 0;
    free_.clear();
  }

  // The k product terms.
  std::vector<Value> terms(size_t k) {
    std::vector<Value> list(k);
    for (size_t t = 0; t < k; ++t) list[t].term = static_cast<uint32_t>(t);
    return list;
  }

  Value add(const Value& x, const Value& y) {
    if (!x.product() && !y.product()) {
      add_(row(x), row(y));
      free_.push_back(y.row);
      return x;
    }
    if (x.product() && y.product()) {
      const Value d = allocate();
      if (ar_.products == Products::exact) {
        each_lane2(row(d), x.term, y.term, [&](float a0, float b0, float a1, float b1, T, size_t l) {
          const double p = double(a0) * b0, q = double(a1) * b1;
          if constexpr (!Add::native)
            return fp::add(p, q, ar_.format, options(l));
          else if constexpr (sizeof(T) == sizeof(float))
            return fp::sum_rounded_to_fp32(p, q);
          else
            return p + q;
        });
      } else {
        round_product(row(d), x.term);
        fma_into(row(d), y.term);
      }
      return d;
    }
    const Value& value = x.product() ? y : x;  // addition is commutative: one rounding of the exact sum
    fma_into(row(value), (x.product() ? x : y).term);
    return value;
  }

  Value zero() {
    const Value d = allocate();
    std::fill_n(row(d), w_, T(0));
    return d;
  }

  Value finish(const Value& v) {
    if (!v.product()) return v;
    const Value d = allocate();
    round_product(row(d), v.term);
    return d;
  }

  Value reduce_whole(const Reducer& r, std::span<const Value> group, uint64_t) {
    const Value d = allocate();
    T* out = row(d);
    if (r.kind == Reducer::Kind::fused) {  // the first reduction's members are all products
      const FusedAddSpec spec = fused_reducer_spec(r, ar_);
      terms_.resize(group.size());
      for (size_t i = 0; i < group.size(); ++i) {
        if (!group[i].product()) throw std::logic_error("gemm: a value among the products of a fused group");
        terms_[i] = group[i].term;
      }
      fused_.resize(w_);
      if (!factors_ || !factors_->converted_for(spec))
        factors_.emplace(gemm_a_, gemm_b_, shape_.m, shape_.n, shape_.k, spec);
      factors_->dot_tile(fused_.data(), i0_, mr_, j0_, nr_, terms_, spec);
      for (size_t l = 0; l < w_; ++l) out[l] = static_cast<T>(fused_[l]);
    } else {  // kahan, neumaier, exact, binned: the shared whole-group code, lane by lane
      std::vector<Term> terms(group.size());
      for (size_t rr = 0, l = 0; rr < mr_; ++rr)
        for (size_t c = 0; c < nr_; ++c, ++l) {
          for (size_t i = 0; i < group.size(); ++i)
            terms[i] = group[i].product() ? Term{a_[rr * lda_ + group[i].term], b_[group[i].term * ldb_ + c], true}
                                          : Term{static_cast<double>(row(group[i])[l])};
          out[l] = static_cast<T>(reduce_whole_group(r, terms, ar_, streams_[l]));
        }
    }
    for (const Value& v : group)
      if (!v.product()) free_.push_back(v.row);
    return d;
  }

  T* row(const Value& v) { return &pool_[static_cast<size_t>(v.row) * w_]; }

 private:
  Value allocate() {
    Value v;
    if (!free_.empty()) {
      v.row = free_.back();
      free_.pop_back();
    } else {
      v.row = rows_++;
      pool_.resize(static_cast<size_t>(rows_) * w_);
    }
    return v;
  }

  fp::RoundingOptions options(size_t lane) const { return ar_.rounding(&streams_[lane]); }

  // dest[l] = f(a[r][s], b[s][c], a[r][t], b[t][c], dest[l], l) over the tile (s = t for one term).
  template <class F>
  void each_lane2(T* dest, uint32_t s, uint32_t t, F&& f) {
    for (size_t r = 0; r < mr_; ++r) {
      const float as = a_[r * lda_ + s], at = a_[r * lda_ + t];
      const float* bs = b_ + s * ldb_;
      const float* bt = b_ + t * ldb_;
      T* d = dest + r * nr_;
      for (size_t c = 0; c < nr_; ++c) d[c] = static_cast<T>(f(as, bs[c], at, bt[c], d[c], r * nr_ + c));
    }
  }

  // dest[l] = round(dest[l] + a*b): one rounding of the exact sum.
  void fma_into(T* dest, uint32_t t) {
    if constexpr (Add::native) {
      each_lane2(dest, t, t, [&](float a, float b, float, float, T x, size_t) {
        return std::fma(static_cast<T>(a), static_cast<T>(b), x);
      });
    } else {
      // A row of exact products (floats multiply exactly in double), then one add_each per row.
      products_.resize(nr_);
      for (size_t r = 0; r < mr_; ++r) {
        const float a = a_[r * lda_ + t];
        const float* b = b_ + t * ldb_;
        for (size_t c = 0; c < nr_; ++c) products_[c] = double(a) * b[c];
        fp::add_each(dest + r * nr_, products_.data(), nr_, ar_.format, ar_.rounding(nullptr), streams_ + r * nr_);
      }
    }
  }

  // dest[l] = round(a*b).
  void round_product(T* dest, uint32_t t) {
    each_lane2(dest, t, t, [&](float a, float b, float, float, T, size_t l) {
      if constexpr (Add::native)
        return static_cast<T>(a) * static_cast<T>(b);
      else
        return fp::mul(a, b, ar_.format, options(l));
    });
  }

  const Arithmetic& ar_;
  const float *gemm_a_ = nullptr, *gemm_b_ = nullptr;
  GemmShape shape_{};
  std::optional<FusedFactors> factors_;
  size_t i0_ = 0, j0_ = 0;
  const float *a_ = nullptr, *b_ = nullptr;
  size_t lda_ = 0, ldb_ = 0, mr_ = 0, nr_ = 0, w_ = 0;
  Add add_{};
  fp::CounterRng* streams_ = nullptr;
  std::vector<T> pool_;
  int32_t rows_ = 0;
  std::vector<int32_t> free_;
  std::vector<uint32_t> terms_;
  std::vector<double> fused_;
  std::vector<double> products_;  // fma_into's row of exact products
};

template <class Add>
Add make_add(size_t width, const Arithmetic& arithmetic, fp::CounterRng* streams) {
  if constexpr (Add::native)
    return Add{width};
  else
    return Add{width, &arithmetic, streams};
}

template <class T, class Add>
void run_tiles(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
               const Arithmetic& ar, const NoiseKey& key) {
  const auto [m, n, k] = shape;
  // The leading stages: shuffles and lane permutations, then the first reduction; after it every
  // partial is a value. A body(M)[...] first leaves the n mod M products after it unreduced, and
  // an each(S)[...] or deal(P,B)[...] reduces its runs or hands through stages of its own, so then the walk over
  // product terms takes the whole schedule.
  size_t leading_end = 0;
  const auto& stages = schedule.stages;
  while (leading_end < stages.size() && (stages[leading_end].shuffle || stages[leading_end].reorders()))
    ++leading_end;
  leading_end = leading_end < stages.size() && stages[leading_end].nests() ? stages.size()
                                                                           : std::min(leading_end + 1, stages.size());
  // One rounding stream per output (only the generic arithmetic draws from them).
  std::vector<fp::CounterRng> streams(kGemmTileRows * kGemmTileCols, fp::CounterRng(0));
  ProductTermOps<T, Add> ops(ar);
  ops.start_gemm(a, b, shape);
  TileWalker<T, Add> walker(1, make_add<Add>(1, ar, streams.data()), ar, streams.data(), key);
  std::vector<T> rows, result;
  for (size_t j0 = 0; j0 < n; j0 += kGemmTileCols) {
    for (size_t i0 = 0; i0 < m; i0 += kGemmTileRows) {
      const size_t mr = std::min(kGemmTileRows, m - i0), nr = std::min(kGemmTileCols, n - j0), w = mr * nr;
      const NoiseKey tile_key = gemm_output_key(key, i0, j0, n);
      if constexpr (!Add::native)
        for (size_t r = 0; r < mr; ++r)
          for (size_t cc = 0; cc < nr; ++cc)
            streams[r * nr + cc] = gemm_output_key(key, i0 + r, j0 + cc, n).rounding_stream();
      const Add add = make_add<Add>(w, ar, streams.data());
      ops.start_tile(i0, j0, mr, nr, add, streams.data());
      auto list = ops.terms(k);
      // Products::rounded: the reference rounds every product first (dot_reference), so the
      // walker takes the whole schedule; otherwise the leading stages take the products.
      const size_t walker_from = ar.products == Products::rounded ? 0 : leading_end;
      if (walker_from > 0) list = walk_stages(ops, schedule, 0, leading_end, std::move(list), tile_key);
      rows.resize(list.size() * w);
      for (size_t g = 0; g < list.size(); ++g) std::copy_n(ops.row(ops.finish(list[g])), w, &rows[g * w]);
      result.resize(w);
      walker.reshape(w, add);
      walker.set_tile(tile_key);
      walker.run(schedule, walker_from, rows.data(), w, list.size(), result.data());
      for (size_t r = 0; r < mr; ++r)
        for (size_t cc = 0; cc < nr; ++cc) c[(i0 + r) * n + j0 + cc] = static_cast<float>(result[r * nr + cc]);
    }
  }
}

}  // namespace

void gemm_through_product_terms(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
                                const Arithmetic& arithmetic, const NoiseKey& key) {
  if (arithmetic.native_float())
    run_tiles<float, NativeAdd<float>>(schedule, a, b, c, shape, arithmetic, key);
  else if (gemm_with_narrow_chains(schedule, a, b, c, shape, arithmetic, key))
    return;
  else if (arithmetic.native_double())
    run_tiles<double, NativeAdd<double>>(schedule, a, b, c, shape, arithmetic, key);
  else
    run_tiles<double, GenericAdd>(schedule, a, b, c, shape, arithmetic, key);
}

}  // namespace fplab::sim::detail
