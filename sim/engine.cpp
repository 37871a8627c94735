#include "sim/engine.hpp"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "fp/arithmetic.hpp"
#include "fp/exact_dot.hpp"
#include "fp/superaccumulator.hpp"
#include "sim/binned_sum.hpp"
#include "sim/exact_gemm.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/schedule_walk.hpp"
#include "sim/whole_group.hpp"

namespace fplab::sim {
namespace {

using detail::GroupSpan;
using detail::groups_of;

// acc[i] = acc[i] + x[i] for the host's own float/double: exactly the emulated arithmetic when
// Arithmetic::native_float()/native_double() holds.
template <class T>
struct NativeAdd {
  static constexpr bool native = true;
  size_t width;
  void operator()(T* __restrict acc, const T* __restrict x) const {
    for (size_t i = 0; i < width; ++i) acc[i] += x[i];
  }
};

// Any format and mode: one correctly rounded addition per element, stochastic rounding drawing
// from each output's own stream.
struct GenericAdd {
  static constexpr bool native = false;
  size_t width;
  const Arithmetic* arithmetic;
  fp::CounterRng* streams;
  void operator()(double* acc, const double* x) const {
    for (size_t i = 0; i < width; ++i)
      acc[i] = fp::add(acc[i], x[i], arithmetic->format,
                       {arithmetic->mode, arithmetic->flush_subnormals, arithmetic->saturate, &streams[i]});
  }
};

// Runs schedule stages on a tile of `width` outputs; a partial is a row of `width` values.
template <class T, class Add>
class TileWalker {
 public:
  TileWalker(size_t width, Add add, const Arithmetic& arithmetic, fp::CounterRng* streams, const NoiseKey& tile_key)
      : w_(width), add_(add), arithmetic_(arithmetic), streams_(streams), key_(tile_key) {}

  // Stages [first_stage, end) on `count` rows starting at `in`, row r at in + r * stride.
  // Writes the final row to `out`.
  // Reuse the walker (and its buffers) for another tile.
  void set_tile(const NoiseKey& tile_key) { key_ = tile_key; }
  void reshape(size_t width, Add add) {
    w_ = width;
    add_ = add;
  }

  void run(const Schedule& schedule, size_t first_stage, const T* in, size_t stride, size_t count, T* out) {
    std::vector<T>& current = current_;
    std::vector<T>& next = next_;
    for (size_t s = first_stage; s < schedule.stages.size() && count > 0; ++s) {
      const Stage& st = schedule.stages[s];
      if (st.shuffle) {
        std::vector<size_t> order(count);
        std::iota(order.begin(), order.end(), 0);
        detail::permute(order, key_.stream(s, 0));
        next.resize(count * w_);
        for (size_t r = 0; r < count; ++r) std::copy_n(in + order[r] * stride, w_, &next[r * w_]);
      } else {
        const auto groups = groups_of(st.grouping, count);
        next.resize(groups.size() * w_);
        for (size_t g = 0; g < groups.size(); ++g) reduce_group(st.reducer, in, stride, groups[g], &next[g * w_], s, g);
        count = groups.size();
      }
      current.swap(next);
      in = current.data();
      stride = w_;
    }
    if (count > 1)
      throw ScheduleError("schedule '" + to_string(schedule) + "' leaves " + std::to_string(count) +
                              " partial results; end it with an all: stage",
                          0);
    if (count == 0) std::fill_n(out, w_, T(0));
    else std::copy_n(in, w_, out);
  }

 private:
  const T* row(const T* in, size_t stride, const GroupSpan& g, size_t k) const {
    return in + (g.first + k * g.stride) * stride;
  }
  T* scratch_row(size_t r) { return &scratch_[r * w_]; }

  void fold(const T* in, size_t stride, const GroupSpan& g, const std::vector<size_t>& order, T* dest) {
    std::copy_n(row(in, stride, g, order[0]), w_, dest);
    for (size_t k = 1; k < order.size(); ++k) add_(dest, row(in, stride, g, order[k]));
  }

  size_t tree_in_place(size_t lo, size_t n) {
    if (n == 1) return lo;
    const size_t half = n / 2;
    const size_t left = tree_in_place(lo, half);
    const size_t right = tree_in_place(lo + half, n - half);
    add_(scratch_row(left), scratch_row(right));
    return left;
  }

  size_t numpy_in_place(size_t lo, size_t n) {
    if (n < 8) {
      for (size_t i = 1; i < n; ++i) add_(scratch_row(lo), scratch_row(lo + i));
      return lo;
    }
    if (n <= 128) {
      size_t i = 8;
      for (; i < n - n % 8; i += 8)
        for (size_t j = 0; j < 8; ++j) add_(scratch_row(lo + j), scratch_row(lo + i + j));
      for (auto [x, y] : {std::pair{0, 1}, {2, 3}, {0, 2}, {4, 5}, {6, 7}, {4, 6}, {0, 4}})
        add_(scratch_row(lo + x), scratch_row(lo + y));
      for (; i < n; ++i) add_(scratch_row(lo), scratch_row(lo + i));
      return lo;
    }
    size_t n2 = n / 2;
    n2 -= n2 % 8;
    const size_t left = numpy_in_place(lo, n2);
    const size_t right = numpy_in_place(lo + n2, n - n2);
    add_(scratch_row(left), scratch_row(right));
    return left;
  }

  // Kahan / Neumaier in the host's own arithmetic (the same operations reduce_whole_group
  // performs through the emulation), across the tile.
  void compensated_native(Reducer::Kind kind, const T* in, size_t stride, const GroupSpan& g, T* dest) {
    std::vector<T>& c = scratch_;
    c.assign(w_, T(0));
    std::copy_n(row(in, stride, g, 0), w_, dest);
    for (size_t k = 1; k < g.count; ++k) {
      const T* x = row(in, stride, g, k);
      for (size_t i = 0; i < w_; ++i) {
        if (kind == Reducer::Kind::kahan) {
          const T y = x[i] - c[i];
          const T t = dest[i] + y;
          c[i] = (t - dest[i]) - y;
          dest[i] = t;
        } else {
          const T t = dest[i] + x[i];
          c[i] += std::fabs(dest[i]) >= std::fabs(x[i]) ? (dest[i] - t) + x[i] : (x[i] - t) + dest[i];
          dest[i] = t;
        }
      }
    }
    if (kind == Reducer::Kind::neumaier)
      for (size_t i = 0; i < w_; ++i) dest[i] += c[i];
  }

  void reduce_group(const Reducer& r, const T* in, size_t stride, const GroupSpan& g, T* dest, size_t stage,
                    size_t group) {
    using K = Reducer::Kind;
    const size_t n = g.count;
    const bool whole = r.kind == K::exact || r.kind == K::binned || r.kind == K::fused || r.kind == K::kahan ||
                       r.kind == K::neumaier;
    if (n == 1 && !whole) {
      std::copy_n(row(in, stride, g, 0), w_, dest);
      return;
    }
    switch (r.kind) {
      case K::seq:
        std::copy_n(row(in, stride, g, 0), w_, dest);
        for (size_t k = 1; k < n; ++k) add_(dest, row(in, stride, g, k));
        return;
      case K::rev:  // addition is commutative, so folding from the end is the right fold
        std::copy_n(row(in, stride, g, n - 1), w_, dest);
        for (size_t k = n - 1; k-- > 0;) add_(dest, row(in, stride, g, k));
        return;
      case K::atomic:
      case K::ring: {
        std::vector<size_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        if (r.kind == K::atomic) detail::permute(order, key_.stream(stage, group));
        else std::rotate(order.begin(), order.begin() + (key_.tile + 1) % n, order.end());
        return fold(in, stride, g, order, dest);
      }
      default: break;
    }
    if constexpr (Add::native) {
      if (r.kind == K::kahan || r.kind == K::neumaier) return compensated_native(r.kind, in, stride, g, dest);
    }
    if (r.kind == K::exact) {  // values: straight into a superaccumulator per output
      for (size_t c = 0; c < w_; ++c) {
        fp::SuperAccumulator acc;
        for (size_t k = 0; k < n; ++k) acc.add(static_cast<double>(row(in, stride, g, k)[c]));
        dest[c] = static_cast<T>(acc.round(arithmetic_.format, {arithmetic_.mode, arithmetic_.flush_subnormals,
                                                                 arithmetic_.saturate, &streams_[c]}).value);
      }
      return;
    }
    if (r.kind == K::binned) {  // values: straight to the binned sum per output
      std::vector<double> column(n);
      for (size_t c = 0; c < w_; ++c) {
        for (size_t k = 0; k < n; ++k) column[k] = static_cast<double>(row(in, stride, g, k)[c]);
        dest[c] = static_cast<T>(binned_sum(column, arithmetic_.format,
                                            {arithmetic_.mode, arithmetic_.flush_subnormals, arithmetic_.saturate,
                                             &streams_[c]}));
      }
      return;
    }
    if (whole) {
      std::vector<Term> terms(n);
      for (size_t c = 0; c < w_; ++c) {
        for (size_t k = 0; k < n; ++k) terms[k] = {static_cast<double>(row(in, stride, g, k)[c])};
        dest[c] = static_cast<T>(reduce_whole_group(r, terms, arithmetic_, streams_[c]));
      }
      return;
    }
    scratch_.resize(n * w_);
    for (size_t k = 0; k < n; ++k) std::copy_n(row(in, stride, g, k), w_, scratch_row(k));
    size_t result = 0;
    switch (r.kind) {
      case K::tree: result = tree_in_place(0, n); break;
      case K::shfl_down:
      case K::shfl_xor:  // lane 0 of the butterfly pairs exactly as shfl_down
        for (size_t o = std::bit_ceil(n) / 2; o >= 1; o /= 2)
          for (size_t i = 0; i < o && i + o < n; ++i) add_(scratch_row(i), scratch_row(i + o));
        break;
      case K::shfl_up:
        for (size_t o = 1; o < n; o *= 2)
          for (size_t i = 0; i + o < n; i += 2 * o) add_(scratch_row(i), scratch_row(i + o));
        break;
      case K::numpy_pairwise: result = numpy_in_place(0, n); break;
      default: break;
    }
    std::copy_n(scratch_row(result), w_, dest);
  }

  size_t w_;
  Add add_;
  const Arithmetic& arithmetic_;
  fp::CounterRng* streams_;
  NoiseKey key_;
  std::vector<T> scratch_, current_, next_;
};

std::vector<fp::CounterRng> rounding_streams(const NoiseKey& tile_key, size_t first_lane, size_t width) {
  std::vector<fp::CounterRng> streams;
  streams.reserve(width);
  for (size_t c = 0; c < width; ++c) {
    NoiseKey k = tile_key;
    k.lane = first_lane + c;
    streams.push_back(k.rounding_stream());
  }
  return streams;
}

bool all_floats(const double* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (static_cast<double>(static_cast<float>(x[i])) != x[i] && !std::isnan(x[i])) return false;
  return true;
}

}  // namespace

NoiseKey batch_output_key(const NoiseKey& key, size_t output, size_t tile_outputs) {
  NoiseKey k = key;
  k.tile = output / tile_outputs;
  k.lane = output;
  return k;
}

void reduce_batch(const Schedule& schedule, const double* terms, size_t k, size_t outputs, const Arithmetic& ar,
                  const NoiseKey& key, double* out, size_t tile_outputs) {
  tile_outputs = std::max<size_t>(tile_outputs, 1);
  const bool native_float = ar.native_float() && all_floats(terms, k * outputs);
  for (size_t m0 = 0; m0 < outputs; m0 += tile_outputs) {
    const size_t w = std::min(tile_outputs, outputs - m0);
    const NoiseKey tile_key = batch_output_key(key, m0, tile_outputs);
    auto streams = rounding_streams(tile_key, m0, w);
    if (native_float) {
      std::vector<float> rows(k * w), result(w);
      for (size_t t = 0; t < k; ++t)
        for (size_t c = 0; c < w; ++c) rows[t * w + c] = static_cast<float>(terms[t * outputs + m0 + c]);
      TileWalker<float, NativeAdd<float>> walker(w, {w}, ar, streams.data(), tile_key);
      walker.run(schedule, 0, rows.data(), w, k, result.data());
      std::copy(result.begin(), result.end(), out + m0);
    } else if (ar.native_double()) {
      TileWalker<double, NativeAdd<double>> walker(w, {w}, ar, streams.data(), tile_key);
      walker.run(schedule, 0, terms + m0, outputs, k, out + m0);
    } else {
      TileWalker<double, GenericAdd> walker(w, {w, &ar, streams.data()}, ar, streams.data(), tile_key);
      walker.run(schedule, 0, terms + m0, outputs, k, out + m0);
    }
  }
}

double reduce(const Schedule& schedule, std::span<const double> values, const Arithmetic& arithmetic,
              const NoiseKey& key) {
  double out = 0;
  // A single reduction is a batch of one output whose tile and lane are the key's own.
  const bool native_float = arithmetic.native_float() && all_floats(values.data(), values.size());
  fp::CounterRng stream = key.rounding_stream();
  if (native_float) {
    std::vector<float> rows(values.begin(), values.end());
    float result = 0;
    TileWalker<float, NativeAdd<float>> walker(1, {1}, arithmetic, &stream, key);
    walker.run(schedule, 0, rows.data(), 1, rows.size(), &result);
    return result;
  }
  if (arithmetic.native_double()) {
    TileWalker<double, NativeAdd<double>> walker(1, {1}, arithmetic, &stream, key);
    walker.run(schedule, 0, values.data(), 1, values.size(), &out);
  } else {
    TileWalker<double, GenericAdd> walker(1, {1, &arithmetic, &stream}, arithmetic, &stream, key);
    walker.run(schedule, 0, values.data(), 1, values.size(), &out);
  }
  return out;
}

NoiseKey gemm_output_key(const NoiseKey& key, size_t i, size_t j, size_t n) {
  NoiseKey k = key;
  const size_t tiles_per_row = (n + kGemmTileCols - 1) / kGemmTileCols;
  k.tile = (i / kGemmTileRows) * tiles_per_row + j / kGemmTileCols;
  k.lane = i * n + j;
  return k;
}

namespace {

// acc[r][c] = fma chain over the k-indices first, first + stride, ... (count of them), starting
// from the rounded first product: exactly a sequence of FMAs per output. The tile is mr <= 4
// rows by nr <= 64 columns; out is mr x nr, row-major.
void fma_chain_tile(const float* a, size_t lda, const float* b, size_t ldb, size_t first, size_t stride, size_t count,
                    size_t mr, size_t nr, float* out) {
  static_assert(kGemmTileRows == 4 && kGemmTileCols == 64, "the microkernel is written for 4 x 64 tiles");
#if defined(__AVX512F__)
  // 16 accumulators of 16 floats: 4 rows x 4 vectors; one broadcast of a[r][k] feeds 4 FMAs.
  // Partial tiles use masked loads and stores (rows past mr compute on row 0's data, unused).
  __mmask16 mask[4];
  for (size_t v = 0; v < 4; ++v) {
    const size_t lanes = nr > 16 * v ? std::min<size_t>(16, nr - 16 * v) : 0;
    mask[v] = static_cast<__mmask16>((1u << lanes) - 1);
  }
  size_t row_of[4];
  for (size_t r = 0; r < 4; ++r) row_of[r] = r < mr ? r : 0;
  __m512 acc[4][4];
  {
    const float* brow = b + first * ldb;
    __m512 bv[4];
    for (int v = 0; v < 4; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], brow + 16 * v);
    for (int r = 0; r < 4; ++r) {
      const __m512 ar = _mm512_set1_ps(a[row_of[r] * lda + first]);
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_mul_ps(ar, bv[v]);
    }
  }
  for (size_t t = 1; t < count; ++t) {
    const size_t kk = first + t * stride;
    const float* brow = b + kk * ldb;
    const __m512 b0 = _mm512_maskz_loadu_ps(mask[0], brow), b1 = _mm512_maskz_loadu_ps(mask[1], brow + 16),
                 b2 = _mm512_maskz_loadu_ps(mask[2], brow + 32), b3 = _mm512_maskz_loadu_ps(mask[3], brow + 48);
    for (int r = 0; r < 4; ++r) {
      const __m512 ar = _mm512_set1_ps(a[row_of[r] * lda + kk]);
      acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(ar, b2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(ar, b3, acc[r][3]);
    }
  }
  for (size_t r = 0; r < mr; ++r)
    for (int v = 0; v < 4; ++v) _mm512_mask_storeu_ps(out + r * nr + 16 * v, mask[v], acc[r][v]);
#else
  for (size_t r = 0; r < mr; ++r)
    for (size_t c = 0; c < nr; ++c) {
      float acc = a[r * lda + first] * b[first * ldb + c];
      for (size_t t = 1; t < count; ++t) {
        const size_t kk = first + t * stride;
        acc = std::fma(a[r * lda + kk], b[kk * ldb + c], acc);
      }
      out[r * nr + c] = acc;
    }
#endif
}

}  // namespace

void gemm(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape, const Arithmetic& ar,
          const NoiseKey& key) {
  const auto [m, n, k] = shape;
  const bool first_is_reduction = !schedule.stages.empty() && !schedule.stages[0].shuffle;
  const bool fma_chains = ar.native_float() && ar.products == Products::fused && first_is_reduction &&
                          schedule.stages[0].reducer.kind == Reducer::Kind::seq;
  const bool rounded_products = ar.native_float() && ar.products == Products::rounded;
  // A single exact reduction (after any shuffles, which cannot matter): one exact dot product
  // per output, rounded once, on a transposed copy of B.
  const bool exact_only = schedule.order_independent() && ar.products != Products::rounded &&
                          schedule.stages.back().reducer.kind == Reducer::Kind::exact;
  if (exact_only) {
    exact_gemm(a, b, c, m, n, k, ar.format, {ar.mode, ar.flush_subnormals, ar.saturate, nullptr},
               [&](size_t i, size_t j) { return gemm_output_key(key, i, j, n).rounding_stream(); });
    return;
  }
  std::vector<float> rows, result;
  const auto groups = first_is_reduction ? groups_of(schedule.stages[0].grouping, k) : std::vector<GroupSpan>{};
  // Native arithmetic draws no rounding randomness; the walker of full tiles is reused.
  std::vector<fp::CounterRng> streams(kGemmTileRows * kGemmTileCols, fp::CounterRng(0));
  TileWalker<float, NativeAdd<float>> full_walker(kGemmTileRows * kGemmTileCols, {kGemmTileRows * kGemmTileCols}, ar,
                                                  streams.data(), key);
  // Column blocks outside, row blocks inside: B's k x 64 block stays in cache across the rows.
  for (size_t j0 = 0; j0 < n; j0 += kGemmTileCols) {
    for (size_t i0 = 0; i0 < m; i0 += kGemmTileRows) {
      const size_t mr = std::min(kGemmTileRows, m - i0), nr = std::min(kGemmTileCols, n - j0), w = mr * nr;
      const NoiseKey tile_key = gemm_output_key(key, i0, j0, n);
      if (!fma_chains && !rounded_products) {
        // Everything else: the reference, one output at a time (correct, slow).
        std::vector<double> arow(k), bcol(k);
        for (size_t i = i0; i < i0 + mr; ++i)
          for (size_t j = j0; j < j0 + nr; ++j) {
            for (size_t t = 0; t < k; ++t) {
              arow[t] = a[i * k + t];
              bcol[t] = b[t * n + j];
            }
            c[i * n + j] = static_cast<float>(dot_reference(schedule, arow, bcol, ar, gemm_output_key(key, i, j, n)));
          }
        continue;
      }
      auto& walker = full_walker;
      walker.reshape(w, {w});
      walker.set_tile(tile_key);
      result.resize(w);
      const float* a_tile = a + i0 * k;
      const float* b_tile = b + j0;
      if (fma_chains) {
        rows.resize(groups.size() * w);
        for (size_t g = 0; g < groups.size(); ++g) {
          float* dest = &rows[g * w];
          fma_chain_tile(a_tile, k, b_tile, n, groups[g].first, groups[g].stride, groups[g].count, mr, nr, dest);
        }
        if (k == 0) std::fill(result.begin(), result.end(), 0.0f);
        else walker.run(schedule, 1, rows.data(), w, groups.size(), result.data());
      } else {
        rows.resize(k * w);  // the rounded products are the terms
        for (size_t t = 0; t < k; ++t)
          for (size_t r = 0; r < mr; ++r)
            for (size_t cc = 0; cc < nr; ++cc) rows[t * w + r * nr + cc] = a_tile[r * k + t] * b_tile[t * n + cc];
        walker.run(schedule, 0, rows.data(), w, k, result.data());
      }
      for (size_t r = 0; r < mr; ++r) std::copy_n(&result[r * nr], nr, c + (i0 + r) * n + j0);
    }
  }
}

}  // namespace fplab::sim
