// Internal to sim/: the engine's walk of schedule stages across a tile of outputs (one partial
// is a row of `width` values, every step a loop across the row), shared by reduce_batch and the
// GEMM paths. The orders are those of schedule_walk.hpp; tests/test_engine_vs_reference.cpp
// holds every use to the reference evaluator bit for bit.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "fp/arithmetic.hpp"
#include "fp/exact_sum.hpp"
#include "fp/fp32_cut.hpp"
#include "fp/round.hpp"
#include "sim/arithmetic.hpp"
#include "sim/binned_sum.hpp"
#include "sim/noise.hpp"
#include "sim/addition_steps.hpp"
#include "sim/schedule_walk.hpp"
#include "sim/tensor_core.hpp"
#include "sim/whole_group.hpp"

namespace fplab::sim::detail {

// The fused(N,F) reducer on a group of `count` terms, for `width` lanes at once: acc[l] becomes
// lane l's fused_dot(0.0, ...) with `spec`, the chain reduce_whole_group runs; step(first, len,
// acc) applies one fused step of terms [first, first + len) to every lane.
template <class Step>
void fused_chain(const FusedAddSpec& spec, size_t count, size_t width, double* acc, Step&& step) {
  check_fused_add_spec(spec);
  std::fill_n(acc, width, 0.0);
  const size_t n = static_cast<size_t>(spec.products);
  for (size_t first = 0; first < count; first += n) step(first, std::min(n, count - first), acc);
}

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
// from each output's own stream; under a stage's ">HOLD" each sum rounded again to it.
struct GenericAdd {
  static constexpr bool native = false;
  size_t width;
  const Arithmetic* arithmetic;
  fp::CounterRng* streams;
  const fp::Format* hold = nullptr;
  void operator()(double* acc, const double* x) const {
    fp::add_each(acc, x, width, arithmetic->format, arithmetic->rounding(nullptr), streams);
    if (hold)
      for (size_t i = 0; i < width; ++i)
        acc[i] = fp::round_double(acc[i], *hold, arithmetic->rounding(&streams[i])).value;
  }
};

// A narrow format that fp32 arithmetic stands in for (fp/fp32_cut.hpp), on rows of floats: each
// sum Fp32Cut::sum of the two, the lanes it leaves undecided through fp::add. For schedules
// without stage formats (a ">HOLD" is refused).
struct Fp32CutAdd {
  static constexpr bool native = false;
  size_t width;
  const Arithmetic* arithmetic;
  fp::Fp32Cut cut;
  // Every operand is a value of the format (the rows of narrow chains and their sums): where the
  // format has at most 11 significant bits, the sums take Fp32Cut::sum_of_values.
  bool values_of_format = false;
  // And no sum can reach the format's largest value (nothing flushed): the sums need no check.
  bool values_in_range = false;
  const fp::Format* hold = nullptr;
  void operator()(float* __restrict acc, const float* __restrict x) const {
    if (hold) throw std::logic_error("Fp32CutAdd: a held stage needs the generic arithmetic");
    constexpr size_t kBlock = 256;
    uint32_t undecided[kBlock];
    float old[kBlock];
    for (size_t first = 0; first < width; first += kBlock) {
      const size_t n = std::min(kBlock, width - first);
      float* a = acc + first;
      const float* b = x + first;
      const fp::Fp32Cut c = cut;
      uint32_t any = 0;
      if (values_of_format && values_in_range && c.sums_of_values_land_on_ties()) {
        for (size_t i = 0; i < n; ++i) a[i] = c.sum_of_values_in_range(a[i], b[i]);
        continue;
      }
      if (values_of_format && c.sums_of_values_land_on_ties()) {
        for (size_t i = 0; i < n; ++i) {
          old[i] = a[i];
          a[i] = c.sum_of_values(a[i], b[i], undecided[i]);
          any |= undecided[i];
        }
      } else {
        for (size_t i = 0; i < n; ++i) {
          old[i] = a[i];
          a[i] = c.sum(a[i], b[i], undecided[i]);
          any |= undecided[i];
        }
      }
      if (!any) continue;
      for (size_t i = 0; i < n; ++i)
        if (undecided[i])
          a[i] = static_cast<float>(fp::add(old[i], b[i], arithmetic->format, arithmetic->rounding(nullptr)));
    }
  }
};

// Runs schedule stages on a tile of `width` outputs; a partial is a row of `width` values.
template <class T, class Add>
class TileWalker {
 public:
  TileWalker(size_t width, Add add, const Arithmetic& arithmetic, fp::CounterRng* streams, const NoiseKey& tile_key)
      : w_(width), add_(add), base_(&arithmetic), arithmetic_(&arithmetic), streams_(streams), key_(tile_key) {}

  // Stages [first_stage, end) on `count` rows starting at `in`, row r at in + r * stride.
  // Writes the final row to `out`.
  // Reuse the walker (and its buffers) for another tile.
  void set_tile(const NoiseKey& tile_key) { key_ = tile_key; }
  void reshape(size_t width, Add add) {
    w_ = width;
    add_ = add;
    if constexpr (!Add::native) add_.arithmetic = arithmetic_;
  }

  void run(const Schedule& schedule, size_t first_stage, const T* in, size_t stride, size_t count, T* out) {
    mixed_ = schedule.has_stage_formats();
    if constexpr (Add::native)
      if (mixed_) throw std::logic_error("TileWalker: a schedule with stage formats needs the generic arithmetic");
    count = walk(schedule.stages, first_stage, std::nullopt, in, stride, count, current_, next_);
    if (count > 1)
      throw ScheduleError("schedule '" + to_string(schedule) + "' leaves " + std::to_string(count) +
                              " partial results; end it with an all: stage",
                          0);
    if (count == 0) {
      std::fill_n(out, w_, T(0));
      return;
    }
    if (mixed_) round_rows(current_.data(), 1, base_->format);  // the result in the arithmetic's format
    std::copy_n(current_.data(), w_, out);
  }

 private:
  // Stages [first, end) of `stages` on `count` rows from `in` (row r at in + r * stride); the
  // rows they leave end in `current` (contiguous), their count is returned. Stages draw noise as
  // schedule_walk.hpp's walk_list numbers them (stage_id, inside the body `parent` if any).
  size_t walk(const std::vector<Stage>& stages, size_t first, std::optional<uint64_t> parent, const T* in,
              size_t stride, size_t count, std::vector<T>& current, std::vector<T>& next) {
    for (size_t s = first; s < stages.size() && count > 0; ++s) {
      const Stage& st = stages[s];
      const uint64_t id = stage_id(parent, s);
      if (st.shuffle || st.reorders()) {
        std::vector<size_t> order;
        if (st.shuffle) {
          order.resize(count);
          std::iota(order.begin(), order.end(), 0);
          permute(order, key_.stream(id, 0));
        } else {
          order = reorder_order(st, count);
        }
        next.resize(count * w_);
        for (size_t r = 0; r < count; ++r) std::copy_n(in + order[r] * stride, w_, &next[r * w_]);
      } else if (st.body > 0) {
        // The rows past the body first, then what the body's stages leave of the others.
        const size_t body = count - count % static_cast<size_t>(st.body);
        std::vector<T> inner, inner_next;
        const size_t left = walk(st.inner, 0, id, in, stride, body, inner, inner_next);
        next.resize((count - body + left) * w_);
        for (size_t r = body; r < count; ++r) std::copy_n(in + r * stride, w_, &next[(r - body) * w_]);
        std::copy_n(inner.data(), left * w_, &next[(count - body) * w_]);
        count = count - body + left;
      } else if (st.deal > 0) {
        // Every hand's rows gathered, its stages run on them; what each leaves, hand after hand.
        std::vector<T> hand_rows, inner, inner_next, joined;
        size_t rows = 0;
        for (const std::vector<size_t>& hand : deal_hands(st.deal, st.deal_block, count)) {
          hand_rows.resize(hand.size() * w_);
          for (size_t r = 0; r < hand.size(); ++r) std::copy_n(in + hand[r] * stride, w_, &hand_rows[r * w_]);
          const size_t left = walk(st.inner, 0, id, hand_rows.data(), w_, hand.size(), inner, inner_next);
          joined.insert(joined.end(), inner.begin(), inner.begin() + static_cast<ptrdiff_t>(left * w_));
          rows += left;
        }
        next = std::move(joined);
        count = rows;
      } else if (st.each > 0) {
        // Every run of S rows on its own; what each run's stages leave, run after run.
        const size_t run = static_cast<size_t>(st.each);
        std::vector<T> inner, inner_next, joined;
        size_t rows = 0;
        for (size_t from = 0; from < count; from += run) {
          const size_t left = walk(st.inner, 0, id, in + from * stride, stride, std::min(run, count - from), inner,
                                   inner_next);
          joined.insert(joined.end(), inner.begin(), inner.begin() + static_cast<ptrdiff_t>(left * w_));
          rows += left;
        }
        next = std::move(joined);
        count = rows;
      } else {
        use_stage_format(st);
        const auto groups = groups_of(st.grouping, count);
        next.resize(groups.size() * w_);
        for (size_t g = 0; g < groups.size(); ++g)
          reduce_group(st.reducer, in, stride, groups[g], &next[g * w_], id, g, st.sequential_from_zero());
        count = groups.size();
        // Each group's result held in the stage's format (schedule_walk's finish).
        if (mixed_) round_rows(next.data(), count, arithmetic_->format);
        if (st.hold) round_rows(next.data(), count, *st.hold);
        use_stage_format(Stage{});
      }
      current.swap(next);
      in = current.data();
      stride = w_;
    }
    if (in != current.data()) {  // no stage ran: the input rows are what is left
      next.resize(count * w_);
      for (size_t r = 0; r < count; ++r) std::copy_n(in + r * stride, w_, &next[r * w_]);
      current.swap(next);
    }
    return count;
  }

  // A stage's "@FORMAT" for the additions and whole-group reducers that follow (generic
  // arithmetic only: run() refuses such schedules for the host's own).
  void use_stage_format(const Stage& st) {
    stage_arithmetic_ = *base_;
    if (st.format) stage_arithmetic_.format = *st.format;
    arithmetic_ = st.format ? &stage_arithmetic_ : base_;
    if constexpr (!Add::native) {
      add_.arithmetic = arithmetic_;
      add_.hold = st.hold ? &*st.hold : nullptr;
    }
  }

  void round_rows(T* rows, size_t count, const fp::Format& format) {
    for (size_t r = 0; r < count; ++r)
      for (size_t c = 0; c < w_; ++c)
        rows[r * w_ + c] = static_cast<T>(
            fp::round_double(static_cast<double>(rows[r * w_ + c]), format, arithmetic_->rounding(&streams_[c])).value);
  }

  const T* row(const T* in, size_t stride, const GroupSpan& g, size_t k) const {
    return in + (g.first + k * g.stride) * stride;
  }
  T* scratch_row(size_t r) { return &scratch_[r * w_]; }

  // A sequential reducer's running sum: member k as it is, or zero plus member k (from_zero).
  void start(const T* in, size_t stride, const GroupSpan& g, size_t k, T* dest, bool from_zero) {
    if (from_zero) {
      std::fill_n(dest, w_, T(0));
      add_(dest, row(in, stride, g, k));
    } else {
      std::copy_n(row(in, stride, g, k), w_, dest);
    }
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

  // from_zero: Stage::sequential_from_zero (a held running sum starts at zero).
  void reduce_group(const Reducer& r, const T* in, size_t stride, const GroupSpan& g, T* dest, size_t stage,
                    size_t group, bool from_zero) {
    using K = Reducer::Kind;
    const size_t n = g.count;
    const bool whole =
        r.kind == K::exact || r.kind == K::binned || r.kind == K::fused || r.kind == K::kahan || r.kind == K::neumaier;
    // A group of one is its member, as in the reference (schedule_walk's reduce_group), except for
    // the reducers that round even one term (exact, binned, fused).
    const bool rounds_one = r.kind == K::exact || r.kind == K::binned || r.kind == K::fused;
    if (n == 1 && !rounds_one && !from_zero) {
      std::copy_n(row(in, stride, g, 0), w_, dest);
      return;
    }
    switch (r.kind) {
      case K::seq:
        start(in, stride, g, 0, dest, from_zero);
        for (size_t k = 1; k < n; ++k) add_(dest, row(in, stride, g, k));
        return;
      case K::rev:  // addition is commutative, so folding from the end is the right fold
        start(in, stride, g, n - 1, dest, from_zero);
        for (size_t k = n - 1; k-- > 0;) add_(dest, row(in, stride, g, k));
        return;
      case K::atomic:
      case K::ring: {
        const std::vector<size_t> order = sequential_order(r, n, key_, stage, group);
        start(in, stride, g, order[0], dest, from_zero);
        for (size_t k = 1; k < n; ++k) add_(dest, row(in, stride, g, order[k]));
        return;
      }
      default:
        break;
    }
    if constexpr (Add::native) {
      if (r.kind == K::kahan || r.kind == K::neumaier) return compensated_native(r.kind, in, stride, g, dest);
    }
    if (r.kind == K::exact) {  // values: one exact sum per output, read in place
      const size_t step = g.stride * stride;
      for (size_t c = 0; c < w_; ++c)
        dest[c] = static_cast<T>(fp::exact_sum_of(row(in, stride, g, 0) + c, n, step, arithmetic_->format,
                                                  arithmetic_->rounding(&streams_[c]))
                                     .value);
      return;
    }
    if (r.kind == K::binned) {  // values: straight to the binned sum per output
      std::vector<double> column(n);
      for (size_t c = 0; c < w_; ++c) {
        for (size_t k = 0; k < n; ++k) column[k] = static_cast<double>(row(in, stride, g, k)[c]);
        dest[c] = static_cast<T>(binned_sum(column, arithmetic_->format, arithmetic_->rounding(&streams_[c])));
      }
      return;
    }
    if (r.kind == K::fused) {  // values enter the tensor-core step as value * 1
      const FusedAddSpec spec = fused_reducer_spec(r, *arithmetic_);
      fused_.resize(w_);
      fused_chain(spec, n, w_, fused_.data(), [&](size_t first, size_t len, double* acc) {
        factors_.resize(2 * len * w_);
        for (size_t k = 0; k < len; ++k) {
          const T* x = row(in, stride, g, first + k);
          for (size_t c = 0; c < w_; ++c)
            factors_[k * w_ + c] = static_cast<double>(x[c]), factors_[(len + k) * w_ + c] = 1.0;
        }
        fused_multiply_add_lanes(acc, factors_.data(), factors_.data() + len * w_, len, w_, spec);
      });
      for (size_t c = 0; c < w_; ++c) dest[c] = static_cast<T>(fused_[c]);
      return;
    }
    if (whole) {
      std::vector<Term> terms(n);
      for (size_t c = 0; c < w_; ++c) {
        for (size_t k = 0; k < n; ++k) terms[k] = {static_cast<double>(row(in, stride, g, k)[c])};
        dest[c] = static_cast<T>(reduce_whole_group(r, terms, *arithmetic_, streams_[c]));
      }
      return;
    }
    scratch_.resize(n * w_);
    for (size_t k = 0; k < n; ++k) std::copy_n(row(in, stride, g, k), w_, scratch_row(k));
    size_t result = 0;
    switch (r.kind) {
      case K::tree:
        result = tree_in_place(0, n);
        break;
      case K::shfl_down:
      case K::shfl_xor:  // lane 0 of the butterfly pairs exactly as shfl_down
        for (size_t o = std::bit_ceil(n) / 2; o >= 1; o /= 2)
          for (size_t i = 0; i < o && i + o < n; ++i) add_(scratch_row(i), scratch_row(i + o));
        break;
      case K::shfl_up:
        for (size_t o = 1; o < n; o *= 2)
          for (size_t i = 0; i + o < n; i += 2 * o) add_(scratch_row(i), scratch_row(i + o));
        break;
      case K::numpy_pairwise:
        result = numpy_in_place(0, n);
        break;
      case K::torch_cascade:
      case K::cub_reduce: {
        const AdditionSteps& steps = addition_steps(r, n);
        for (const auto& [into, from] : steps.adds) add_(scratch_row(into), scratch_row(from));
        result = static_cast<size_t>(steps.result);
        break;
      }
      default:
        break;
    }
    std::copy_n(scratch_row(result), w_, dest);
  }

  size_t w_;
  Add add_;
  const Arithmetic* base_;        // the arithmetic's own
  const Arithmetic* arithmetic_;  // the stage's: base_, or stage_arithmetic_ under "@FORMAT"
  Arithmetic stage_arithmetic_;
  bool mixed_ = false;
  fp::CounterRng* streams_;
  NoiseKey key_;
  std::vector<T> scratch_, current_, next_;
  std::vector<double> factors_, fused_;
  // torch_cascade's and cub_reduce's additions for the last group size: every tile of a sum has
  // the same groups, so they are built once, not once a tile.
  const AdditionSteps& addition_steps(const Reducer& r, size_t n) {
    if (n != steps_n_ || !(r == steps_reducer_)) {
      steps_ = reducer_addition_steps(r, n);
      steps_n_ = n;
      steps_reducer_ = r;
    }
    return steps_;
  }
  AdditionSteps steps_;
  size_t steps_n_ = 0;
  Reducer steps_reducer_;
};

}  // namespace fplab::sim::detail
