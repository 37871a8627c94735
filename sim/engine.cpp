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
#include "sim/compensated_tile.hpp"
#include "sim/exact_gemm.hpp"
#include "sim/fused_first_stage.hpp"
#include "sim/gemm_product_terms.hpp"
#include "sim/mx_factors.hpp"
#include "sim/product_program_tile.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/tile_walker.hpp"

namespace fplab::sim {
namespace {

using detail::GenericAdd;
using detail::groups_of;
using detail::GroupSpan;
using detail::NativeAdd;
using detail::TileWalker;

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
  // A stage of its own format ("@fp64") needs the generic arithmetic, which switches per stage.
  const bool mixed = schedule.has_stage_formats();
  const bool native_float = !mixed && ar.native_float() && all_floats(terms, k * outputs);
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
    } else if (!mixed && ar.native_double()) {
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
  const bool mixed = schedule.has_stage_formats();  // stage formats: the generic arithmetic
  const bool native_float = !mixed && arithmetic.native_float() && all_floats(values.data(), values.size());
  fp::CounterRng stream = key.rounding_stream();
  if (native_float) {
    std::vector<float> rows(values.begin(), values.end());
    float result = 0;
    TileWalker<float, NativeAdd<float>> walker(1, {1}, arithmetic, &stream, key);
    walker.run(schedule, 0, rows.data(), 1, rows.size(), &result);
    return result;
  }
  if (!mixed && arithmetic.native_double()) {
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

// One step of a chain of products c + x·y: one FMA (products fused), or the product rounded to
// fp32 and then the sum (products rounded: no contraction, as x86 SSE code without FMA adds).
template <bool kFused>
inline float chain_step(float x, float y, float c) {
  if constexpr (kFused) return std::fma(x, y, c);
  const float product = x * y;
  return c + product;
}
#if defined(__AVX512F__)
template <bool kFused>
inline __m512 chain_step(__m512 x, __m512 y, __m512 c) {
  if constexpr (kFused) return _mm512_fmadd_ps(x, y, c);
  return _mm512_add_ps(c, _mm512_mul_ps(x, y));
}
#elif defined(__AVX2__) && defined(__FMA__)
template <bool kFused>
inline __m256 chain_step(__m256 x, __m256 y, __m256 c) {
  if constexpr (kFused) return _mm256_fmadd_ps(x, y, c);
  return _mm256_add_ps(c, _mm256_mul_ps(x, y));
}
#endif

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
// product_chain_tile's AVX2 form for 16 columns (lanes of them, Full: all 16) of 4 rows: eight
// independent chains keep two FMA pipes of latency 4 busy. Written out, no arrays or lambdas:
// GCC kept an array of accumulators on the stack.
template <bool kFused, bool Full>
inline void product_chain_pass(const float* const rows[4], const float* b, size_t ldb, size_t first, size_t stride,
                               size_t count, size_t mr, size_t lanes, float* out, size_t ldo) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(lanes)), index);
  const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(lanes) - 8), index);
  const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
  const float* brow = b + first * ldb;
  __m256 b0 = Full ? _mm256_loadu_ps(brow) : _mm256_maskload_ps(brow, m0);
  __m256 b1 = Full ? _mm256_loadu_ps(brow + 8) : _mm256_maskload_ps(brow + 8, m1);
  __m256 x = _mm256_broadcast_ss(r0 + first);
  __m256 c00 = _mm256_mul_ps(x, b0), c01 = _mm256_mul_ps(x, b1);
  x = _mm256_broadcast_ss(r1 + first);
  __m256 c10 = _mm256_mul_ps(x, b0), c11 = _mm256_mul_ps(x, b1);
  x = _mm256_broadcast_ss(r2 + first);
  __m256 c20 = _mm256_mul_ps(x, b0), c21 = _mm256_mul_ps(x, b1);
  x = _mm256_broadcast_ss(r3 + first);
  __m256 c30 = _mm256_mul_ps(x, b0), c31 = _mm256_mul_ps(x, b1);
  size_t kk = first;
  for (size_t t = 1; t < count; ++t) {
    kk += stride;
    brow = b + kk * ldb;
    b0 = Full ? _mm256_loadu_ps(brow) : _mm256_maskload_ps(brow, m0);
    b1 = Full ? _mm256_loadu_ps(brow + 8) : _mm256_maskload_ps(brow + 8, m1);
    x = _mm256_broadcast_ss(r0 + kk);
    c00 = chain_step<kFused>(x, b0, c00), c01 = chain_step<kFused>(x, b1, c01);
    x = _mm256_broadcast_ss(r1 + kk);
    c10 = chain_step<kFused>(x, b0, c10), c11 = chain_step<kFused>(x, b1, c11);
    x = _mm256_broadcast_ss(r2 + kk);
    c20 = chain_step<kFused>(x, b0, c20), c21 = chain_step<kFused>(x, b1, c21);
    x = _mm256_broadcast_ss(r3 + kk);
    c30 = chain_step<kFused>(x, b0, c30), c31 = chain_step<kFused>(x, b1, c31);
  }
  const __m256 results[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
  for (size_t r = 0; r < mr; ++r) {
    float* dest = out + r * ldo;
    if (Full) {
      _mm256_storeu_ps(dest, results[r][0]), _mm256_storeu_ps(dest + 8, results[r][1]);
    } else {
      _mm256_maskstore_ps(dest, m0, results[r][0]), _mm256_maskstore_ps(dest + 8, m1, results[r][1]);
    }
  }
}
#endif

// acc[r][c] = a chain of products over the k-indices first, first + stride, ... (count of them),
// starting from the rounded first product: exactly a sequence of FMAs per output (kFused), or of
// rounded products each added with one rounding (products rounded). The tile is mr <= 4
// rows by nr <= 64 columns; out is mr x nr, row-major with rows ldo apart. count == 0 (a GEMM with K = 0, whose
// only group is empty) is the empty sum, +0: every form below loads the first product before
// its loop, so that case must not reach them (A and B may then be empty, even null).
template <bool kFused>
void product_chain_tile(const float* a, size_t lda, const float* b, size_t ldb, size_t first, size_t stride,
                        size_t count, size_t mr, size_t nr, float* out, size_t ldo) {
  static_assert(kGemmTileRows == 4 && kGemmTileCols == 64, "the microkernel is written for 4 x 64 tiles");
  if (count == 0) {
    for (size_t r = 0; r < mr; ++r) std::fill_n(out + r * ldo, nr, 0.0f);
    return;
  }
#if defined(__AVX512F__)
  // 16 accumulators of 16 floats: 4 rows x 4 vectors; one broadcast of a[r][k] feeds 4 FMAs.
  // Written out as named variables: with an array acc[4][4] (stored through by a loop over mr)
  // GCC 12 kept the accumulators on the stack and stored all 16 every step (a third of the speed).
  // Partial tiles use masked loads and stores (rows past mr compute on row 0's data, unused).
  __mmask16 mask[4];
  for (size_t v = 0; v < 4; ++v) {
    const size_t lanes = nr > 16 * v ? std::min<size_t>(16, nr - 16 * v) : 0;
    mask[v] = static_cast<__mmask16>((1u << lanes) - 1);
  }
  const __mmask16 m0 = mask[0], m1 = mask[1], m2 = mask[2], m3 = mask[3];
  const float* r0 = a;
  const float* r1 = a + (mr > 1 ? lda : 0);
  const float* r2 = a + (mr > 2 ? 2 * lda : 0);
  const float* r3 = a + (mr > 3 ? 3 * lda : 0);
  const float* brow = b + first * ldb;
  __m512 b0 = _mm512_maskz_loadu_ps(m0, brow), b1 = _mm512_maskz_loadu_ps(m1, brow + 16),
         b2 = _mm512_maskz_loadu_ps(m2, brow + 32), b3 = _mm512_maskz_loadu_ps(m3, brow + 48);
  __m512 x = _mm512_set1_ps(r0[first]);
  __m512 c00 = _mm512_mul_ps(x, b0), c01 = _mm512_mul_ps(x, b1), c02 = _mm512_mul_ps(x, b2), c03 = _mm512_mul_ps(x, b3);
  x = _mm512_set1_ps(r1[first]);
  __m512 c10 = _mm512_mul_ps(x, b0), c11 = _mm512_mul_ps(x, b1), c12 = _mm512_mul_ps(x, b2), c13 = _mm512_mul_ps(x, b3);
  x = _mm512_set1_ps(r2[first]);
  __m512 c20 = _mm512_mul_ps(x, b0), c21 = _mm512_mul_ps(x, b1), c22 = _mm512_mul_ps(x, b2), c23 = _mm512_mul_ps(x, b3);
  x = _mm512_set1_ps(r3[first]);
  __m512 c30 = _mm512_mul_ps(x, b0), c31 = _mm512_mul_ps(x, b1), c32 = _mm512_mul_ps(x, b2), c33 = _mm512_mul_ps(x, b3);
  size_t kk = first;
  for (size_t t = 1; t < count; ++t) {
    kk += stride;
    brow = b + kk * ldb;
    b0 = _mm512_maskz_loadu_ps(m0, brow), b1 = _mm512_maskz_loadu_ps(m1, brow + 16);
    b2 = _mm512_maskz_loadu_ps(m2, brow + 32), b3 = _mm512_maskz_loadu_ps(m3, brow + 48);
    x = _mm512_set1_ps(r0[kk]);
    c00 = chain_step<kFused>(x, b0, c00), c01 = chain_step<kFused>(x, b1, c01);
    c02 = chain_step<kFused>(x, b2, c02), c03 = chain_step<kFused>(x, b3, c03);
    x = _mm512_set1_ps(r1[kk]);
    c10 = chain_step<kFused>(x, b0, c10), c11 = chain_step<kFused>(x, b1, c11);
    c12 = chain_step<kFused>(x, b2, c12), c13 = chain_step<kFused>(x, b3, c13);
    x = _mm512_set1_ps(r2[kk]);
    c20 = chain_step<kFused>(x, b0, c20), c21 = chain_step<kFused>(x, b1, c21);
    c22 = chain_step<kFused>(x, b2, c22), c23 = chain_step<kFused>(x, b3, c23);
    x = _mm512_set1_ps(r3[kk]);
    c30 = chain_step<kFused>(x, b0, c30), c31 = chain_step<kFused>(x, b1, c31);
    c32 = chain_step<kFused>(x, b2, c32), c33 = chain_step<kFused>(x, b3, c33);
  }
  const auto store_row = [&](float* dest, __m512 v0, __m512 v1, __m512 v2, __m512 v3) {
    _mm512_mask_storeu_ps(dest, m0, v0), _mm512_mask_storeu_ps(dest + 16, m1, v1);
    _mm512_mask_storeu_ps(dest + 32, m2, v2), _mm512_mask_storeu_ps(dest + 48, m3, v3);
  };
  store_row(out, c00, c01, c02, c03);
  if (mr > 1) store_row(out + ldo, c10, c11, c12, c13);
  if (mr > 2) store_row(out + 2 * ldo, c20, c21, c22, c23);
  if (mr > 3) store_row(out + 3 * ldo, c30, c31, c32, c33);
#elif defined(__AVX2__) && defined(__FMA__)
  // 16 ymm registers: 8 accumulators (4 rows x 2 vectors of 8 columns), 2 of B, 1 broadcast of A;
  // the tile in passes of 16 columns (product_chain_pass). Partial vectors use masked loads (columns
  // past nr read as 0, never touched in memory) and masked stores.
  size_t row_of[4];
  for (size_t r = 0; r < 4; ++r) row_of[r] = r < mr ? r : 0;
  const float* rows[4] = {a + row_of[0] * lda, a + row_of[1] * lda, a + row_of[2] * lda, a + row_of[3] * lda};
  for (size_t c0 = 0; c0 < nr; c0 += 16) {
    const size_t lanes = std::min<size_t>(16, nr - c0);
    if (lanes == 16)
      product_chain_pass<kFused, true>(rows, b + c0, ldb, first, stride, count, mr, lanes, out + c0, ldo);
    else
      product_chain_pass<kFused, false>(rows, b + c0, ldb, first, stride, count, mr, lanes, out + c0, ldo);
  }
#else
  for (size_t r = 0; r < mr; ++r)
    for (size_t c = 0; c < nr; ++c) {
      float acc = a[r * lda + first] * b[first * ldb + c];
      for (size_t t = 1; t < count; ++t) {
        const size_t kk = first + t * stride;
        acc = chain_step<kFused>(a[r * lda + kk], b[kk * ldb + c], acc);
      }
      out[r * ldo + c] = acc;
    }
#endif
}

// Every output of C = A B through dot_reference from doubles, stored as float as every output of
// gemm(): for what no tile form does.
void gemm_through_reference(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
                            const Arithmetic& ar, const NoiseKey& key) {
  const std::vector<double> a64(a, a + shape.m * shape.k), b64(b, b + shape.k * shape.n);
  std::vector<double> c64(shape.m * shape.n);
  gemm_reference(schedule, a64.data(), b64.data(), c64.data(), shape, ar, key);
  std::copy(c64.begin(), c64.end(), c);
}

// The inner stage of a first stage each(S)[GROUPING:seq] (one stage, in the arithmetic's format),
// whose chains the tile kernel runs like a first GROUPING:seq stage's; null for any other schedule.
const Stage* first_run_chains(const Schedule& schedule) {
  if (schedule.stages.empty() || schedule.stages[0].each == 0 || schedule.stages[0].inner.size() != 1) return nullptr;
  const Stage& inner = schedule.stages[0].inner[0];
  return inner.reduces() && inner.reducer.kind == Reducer::Kind::seq && !inner.format ? &inner : nullptr;
}

// The groups of `grouping` in every run of `run` terms of k, in run order, at their places in K:
// what each(run)[grouping:...] reduces.
std::vector<GroupSpan> run_groups(int64_t run, const Grouping& grouping, size_t k) {
  std::vector<GroupSpan> groups;
  const auto length = static_cast<size_t>(run);
  for (size_t from = 0; from < k; from += length)
    for (GroupSpan g : groups_of(grouping, std::min(length, k - from))) {
      g.first += from;
      groups.push_back(g);
    }
  return groups;
}

}  // namespace

void gemm(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape, const Arithmetic& ar,
          const NoiseKey& key) {
  // Plain variables, not a structured binding: the lambdas below capture n, which C++20 allows
  // for bindings only from clang 16 on.
  const size_t m = shape.m, n = shape.n, k = shape.k;
  if (k == 0) {
    // The empty sum, whatever the schedule: every output is +0 (dot_reference's value too). A
    // and B hold nothing and may be null, so no path below may even offset them (b + j0).
    std::fill_n(c, m * n, 0.0f);
    return;
  }
  if (const auto element = mx_input_of(schedule)) {
    // MX inputs: A's rows and B's columns quantized in blocks along K once for the whole GEMM, then
    // the same schedule without them on the dequantized factors (sim/mx_factors.hpp). A block that
    // held an infinity dequantizes to +-max * 2^127, beyond a float: those GEMMs from doubles.
    std::vector<float> a_mx, b_mx;
    if (mx_gemm_factors(a, b, m, n, k, *element, a_mx, b_mx))
      return gemm(without_mx_inputs(schedule), a_mx.data(), b_mx.data(), c, shape, ar, key);
    return gemm_through_reference(schedule, a, b, c, shape, ar, key);
  }
  if (schedule.has_stage_formats()) {
    // A stage in a format of its own (float products into a double accumulator, ...): each
    // output through the reference's walk, the one GEMM that does (no tile form switches format).
    return gemm_through_reference(schedule, a, b, c, shape, ar, key);
  }
  const std::optional<std::vector<size_t>> reordered =
      schedule.stages.size() > 1 && ar.native_float() && !schedule.nondeterministic()
          ? detail::fixed_order(schedule.stages[0], k)
          : std::nullopt;
  // strided(P):seq first, P dividing K (cuDNN's input gradient of one chain per kernel position): the
  // same chains as contig(K/P):seq parts of K gathered part by part, which the fast paths run. Any
  // stages after it, atomic ones too: the stage numbers stay, and an atomic step draws its order
  // from the count of its partials and the output tile, not from the terms in them.
  const bool strided_chains = schedule.stages.size() > 1 && ar.native_float() && schedule.stages[0].reduces() &&
                              schedule.stages[0].grouping.kind == Grouping::Kind::strided &&
                              schedule.stages[0].reducer.kind == Reducer::Kind::seq && !schedule.stages[0].format &&
                              k > static_cast<size_t>(schedule.stages[0].grouping.size) &&
                              k % static_cast<size_t>(schedule.stages[0].grouping.size) == 0;
  if (reordered || strided_chains) {
    // A fixed reordering of K first (cols(R): an NHWC convolution's terms by kernel position; a
    // perm(...); each(S)[...] of such): the same GEMM on A's columns and B's rows in that order
    // under the rest of the schedule, whose fast paths then take it (at the cost of a copy of A and
    // B). Deterministic fp32 only: the rest's stages are numbered one lower, and a stream that the
    // stage numbers key would differ. (The strided chains keep their stage: any rest.)
    const auto parts = static_cast<size_t>(schedule.stages[0].grouping.size);
    const std::vector<size_t> order = reordered ? *reordered : detail::cols_order(static_cast<int64_t>(parts), k);
    std::vector<float> a_k(m * k), b_k(k * n);
    for (size_t i = 0; i < m; ++i)
      for (size_t t = 0; t < k; ++t) a_k[i * k + t] = a[i * k + order[t]];
    for (size_t t = 0; t < k; ++t) std::copy_n(b + order[t] * n, n, &b_k[t * n]);
    Schedule rest{std::vector<Stage>(schedule.stages.begin() + (reordered ? 1 : 0), schedule.stages.end())};
    if (!reordered) rest.stages[0].grouping = {Grouping::Kind::contig, static_cast<int64_t>(k / parts)};
    try {
      return gemm(rest, a_k.data(), b_k.data(), c, shape, ar, key);
    } catch (const ScheduleError&) {
      // a schedule that does not end in one value: the walk below says so, naming all of it
    }
  }
  const bool first_is_reduction = !schedule.stages.empty() && schedule.stages[0].reduces();
  const Reducer::Kind first_kind = first_is_reduction ? schedule.stages[0].reducer.kind : Reducer::Kind::exact;
  // each(S)[GROUPING:seq] first (tiles that restart every S terms: cuDNN's weight gradient per
  // image): the same in-order chains as a GROUPING:seq first stage, over every run's groups in turn.
  const Stage* const run_chains = first_run_chains(schedule);
  const bool first_is_seq = (first_is_reduction && first_kind == Reducer::Kind::seq) || run_chains != nullptr;
  // A first stage of in-order chains in native fp32: FMA chains (products fused), or chains of
  // rounded products each added with one rounding (products rounded: cpu-seq, tpu-v3's systolic
  // passes); both run in the register-blocked tile below.
  const bool fma_chains = ar.native_float() && ar.products == Products::fused && first_is_seq;
  const bool chains = fma_chains || (ar.native_float() && ar.products == Products::rounded && first_is_seq);
  // A first stage whose additions K alone orders (tree, rev, shfl_*, numpy_pairwise), products
  // fused or rounded: its steps once for the GEMM, the products computed where they enter.
  const bool programmed = !chains && first_is_reduction && ar.native_float() && ar.products != Products::exact &&
                          detail::has_product_program(schedule.stages[0].reducer);
  // Kahan and Neumaier round every product first, whatever arithmetic.products says.
  const bool compensated = first_is_reduction && ar.native_float() &&
                           (first_kind == Reducer::Kind::kahan || first_kind == Reducer::Kind::neumaier);
  const bool tile_kernel = chains || programmed || compensated;
  // Kahan, Neumaier and binned round every product to the format before they add it
  // (whole_group.hpp), so when the first reduction (after any shuffles) is one of them, the
  // rounded products are the terms whatever arithmetic.products says.
  const auto lead = std::find_if(schedule.stages.begin(), schedule.stages.end(),
                                 [](const Stage& s) { return !s.shuffle && !s.reorders(); });
  const bool lead_rounds_products =
      lead != schedule.stages.end() && lead->reduces() &&
      (lead->reducer.kind == Reducer::Kind::kahan || lead->reducer.kind == Reducer::Kind::neumaier ||
       lead->reducer.kind == Reducer::Kind::binned);
  const bool rounded_products = ar.native_float() && (ar.products == Products::rounded || lead_rounds_products);
  // A single exact reduction (after any shuffles, which cannot matter): one exact dot product
  // per output, rounded once, on a transposed copy of B.
  const bool exact_only = schedule.order_independent() && ar.products != Products::rounded &&
                          schedule.stages.back().reducer.kind == Reducer::Kind::exact;
  if (exact_only) {
    exact_gemm(a, b, c, m, n, k, ar.format, ar.rounding(nullptr),
               [&](size_t i, size_t j) { return gemm_output_key(key, i, j, n).rounding_stream(); });
    return;
  }
  if (detail::fused_first_stage(schedule, ar))
    return detail::gemm_with_fused_first_stage(schedule, a, b, c, shape, ar, key);
  if (!tile_kernel && !rounded_products) {
    // Everything else: the first reduction's products as the reference has them, then the
    // TileWalker (fused(N,F) tensor-core steps vectorised across the tile). No schedule or
    // arithmetic falls back to the per-output reference any more; still scalar per output
    // inside the tile are: non-native arithmetics (every operation emulated), exact/kahan/
    // neumaier/binned first stages outside fp32 rne, fused(N,F) lanes with F + 2 + log2(N+1) > 53,
    // non-fp32 results, or inf/NaN data (the scalar tensor-core step).
    detail::gemm_through_product_terms(schedule, a, b, c, shape, ar, key);
    return;
  }
  const auto groups = run_chains ? run_groups(schedule.stages[0].each, run_chains->grouping, k)
                     : first_is_reduction ? groups_of(schedule.stages[0].grouping, k)
                                          : std::vector<GroupSpan>{};
  const detail::ProductProgram program =
      programmed ? detail::product_program(schedule.stages[0], k) : detail::ProductProgram{};
  std::vector<float> program_stack(detail::product_program_stack_floats(program));
  // The program's tile kernel reads A term-major, each term's 4 rows of a tile together (rows
  // past m zero), and B packed (below), both in the program's order of terms.
  std::vector<float> a_packed(programmed ? (m + kGemmTileRows - 1) / kGemmTileRows * kGemmTileRows * k : 0);
  for (size_t i = 0; i < (programmed ? m : 0); ++i)
    for (size_t t = 0; t < k; ++t)
      a_packed[(i / kGemmTileRows * k + t) * kGemmTileRows + i % kGemmTileRows] = a[i * k + program.order[t]];
  // The first stage on a tile of mr x nr outputs: group g's result for output (r, c) to
  // out[g * group_stride + r * ldo + c].
  const auto first_stage_tile = [&](const float* a_tile, const float* b_block, size_t ldb, size_t mr, size_t nr,
                                    float* out, size_t ldo, size_t group_stride) {
    if (programmed) {
      const float* a_rows = &a_packed[(a_tile - a) / k * k];  // the tile's rows, term-major
      return detail::product_program_tile(program, ar.products == Products::fused, a_rows, b_block, mr, nr, out, ldo,
                                          group_stride, program_stack.data());
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      float* dest = out + g * group_stride;
      if (compensated)
        detail::compensated_tile(first_kind, a_tile, k, b_block, ldb, groups[g], mr, nr, dest, ldo);
      else if (fma_chains)
        product_chain_tile<true>(a_tile, k, b_block, ldb, groups[g].first, groups[g].stride, groups[g].count, mr, nr,
                                 dest, ldo);
      else
        product_chain_tile<false>(a_tile, k, b_block, ldb, groups[g].first, groups[g].stride, groups[g].count, mr, nr,
                                  dest, ldo);
    }
  };
  std::vector<float> rows, result;
  // Native arithmetic draws no rounding randomness; the walker of full tiles is reused.
  std::vector<fp::CounterRng> streams(kGemmTileRows * kGemmTileCols, fp::CounterRng(0));
  TileWalker<float, NativeAdd<float>> full_walker(kGemmTileRows * kGemmTileCols, {kGemmTileRows * kGemmTileCols}, ar,
                                                  streams.data(), key);
  // Column blocks outside, row blocks inside: B's k x 64 block stays in cache across the rows.
  // With more than one row block, the tile kernels read it packed (rows of 64 contiguous floats):
  // B's own rows are n floats apart, which for n a multiple of 512 maps every row's columns to the
  // same two L1 sets (measured on a 512-square GEMM: docs in bench/RESULTS.md).
  const bool pack = programmed || (tile_kernel && m > kGemmTileRows && n > kGemmTileCols);
  // One group over all of K and nothing after it (all:seq, all:tree, ...): the first stage's
  // results are the outputs, written straight into C, without the walker's per-tile work (which
  // cost as much as the chains themselves for K = 64: a ResNet's first-stage input gradients ran
  // at 15 GFLOP/s, not 38).
  const bool first_stage_is_outputs = tile_kernel && groups.size() == 1 && schedule.stages.size() == 1;
  std::vector<float> b_packed(pack ? k * kGemmTileCols : 0);
  for (size_t j0 = 0; j0 < n; j0 += kGemmTileCols) {
    const float* b_block = b + j0;
    size_t ldb = n;
    if (pack) {
      const size_t nr = std::min(kGemmTileCols, n - j0);
      for (size_t t = 0; t < k; ++t)
        std::copy_n(b + (programmed ? program.order[t] : t) * n + j0, nr, &b_packed[t * kGemmTileCols]);
      b_block = b_packed.data(), ldb = kGemmTileCols;
    }
    for (size_t i0 = 0; i0 < m; i0 += kGemmTileRows) {
      const size_t mr = std::min(kGemmTileRows, m - i0), nr = std::min(kGemmTileCols, n - j0), w = mr * nr;
      const float* a_tile = a + i0 * k;
      if (first_stage_is_outputs) {
        first_stage_tile(a_tile, b_block, ldb, mr, nr, c + i0 * n + j0, n, 0);
        continue;
      }
      const NoiseKey tile_key = gemm_output_key(key, i0, j0, n);
      auto& walker = full_walker;
      walker.reshape(w, {w});
      walker.set_tile(tile_key);
      result.resize(w);
      if (tile_kernel) {
        rows.resize(groups.size() * w);
        first_stage_tile(a_tile, b_block, ldb, mr, nr, rows.data(), nr, w);
        walker.run(schedule, 1, rows.data(), w, groups.size(), result.data());
      } else {
        const float* b_tile = b + j0;
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
