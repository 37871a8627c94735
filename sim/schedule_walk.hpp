// Internal to sim/: the one definition of what a schedule does to a list of partials, written
// over an abstract "Ops" so the numeric reference evaluator and the tree drawer share it.
//
// Ops must provide:
//   using Value = ...;
//   Value add(const Value& left, const Value& right);          // one rounded addition
//   Value reduce_whole(const Reducer& r, std::span<const Value> group, uint64_t tile);
//                                                              // kahan, neumaier, exact, binned, fused
//   Value zero();                                               // the sum of no terms
//   Value finish(const Value& v);                               // the result as the format's value
// and may provide:
//   void set_format(const fp::Format* f, const fp::Format* hold);
//                      // the stage that follows: its "@FORMAT" (nullptr: the arithmetic's own)
//                      // and ">HOLD" (nullptr: none), which add() and finish() round to last
#pragma once

#include <algorithm>
#include <bit>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "sim/noise.hpp"
#include "sim/schedule.hpp"
#include "sim/addition_steps.hpp"

namespace fplab::sim::detail {

template <class V>
void permute(std::vector<V>& v, fp::CounterRng rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);  // Fisher-Yates
}

// The order in which a sequential reducer (seq, rev, atomic, ring) of `n` members adds them:
// member order[0] first, the order of reduce_group below (which, the reference, keeps its own
// code). For the engine's walks of whole rows (TileWalker) and the kernels that fold in that
// order themselves.
inline std::vector<size_t> sequential_order(const Reducer& r, size_t n, const NoiseKey& key, uint64_t stage,
                                            uint64_t group) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (r.kind == Reducer::Kind::rev) std::reverse(order.begin(), order.end());
  if (r.kind == Reducer::Kind::atomic) permute(order, key.stream(stage, group));
  if (r.kind == Reducer::Kind::ring && n > 0)
    std::rotate(order.begin(), order.begin() + static_cast<ptrdiff_t>((key.tile + 1) % n), order.end());
  return order;
}

template <class Ops>
typename Ops::Value tree_reduce(Ops& ops, std::span<const typename Ops::Value> v) {
  if (v.size() == 1) return v[0];
  const size_t half = v.size() / 2;
  // Left subtree first: named steps fix the order in which rounding draws happen.
  const auto left = tree_reduce(ops, v.first(half));
  const auto right = tree_reduce(ops, v.subspan(half));
  return ops.add(left, right);
}

// NumPy's pairwise_sum (numpy/core/src/umath/loops_utils.h.src), as an order of additions.
template <class Ops>
typename Ops::Value numpy_pairwise(Ops& ops, std::span<const typename Ops::Value> v) {
  using V = typename Ops::Value;
  const size_t n = v.size();
  if (n < 8) {
    V res = v[0];
    for (size_t i = 1; i < n; ++i) res = ops.add(res, v[i]);
    return res;
  }
  if (n <= 128) {
    std::vector<V> r(v.begin(), v.begin() + 8);
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (size_t j = 0; j < 8; ++j) r[j] = ops.add(r[j], v[i + j]);
    // ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), evaluated left to right.
    r[0] = ops.add(r[0], r[1]);
    r[2] = ops.add(r[2], r[3]);
    r[0] = ops.add(r[0], r[2]);
    r[4] = ops.add(r[4], r[5]);
    r[6] = ops.add(r[6], r[7]);
    r[4] = ops.add(r[4], r[6]);
    V res = ops.add(r[0], r[4]);
    for (; i < n; ++i) res = ops.add(res, v[i]);
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  const auto left = numpy_pairwise(ops, v.first(n2));
  const auto right = numpy_pairwise(ops, v.subspan(n2));
  return ops.add(left, right);
}

// Warp-shuffle trees on a group of any size n (lanes past n contribute nothing).
template <class Ops>
typename Ops::Value shuffle_down(Ops& ops, std::vector<typename Ops::Value> v) {
  const size_t n = v.size();
  for (size_t o = std::bit_ceil(n) / 2; o >= 1; o /= 2)
    for (size_t i = 0; i < o && i + o < n; ++i) v[i] = ops.add(v[i], v[i + o]);
  return v[0];
}
template <class Ops>
typename Ops::Value shuffle_up(Ops& ops, std::vector<typename Ops::Value> v) {
  const size_t n = v.size();
  for (size_t o = 1; o < n; o *= 2)
    for (size_t i = 0; i + o < n; i += 2 * o) v[i] = ops.add(v[i], v[i + o]);
  return v[0];
}
// from_zero: a sequential reducer's running sum starts at zero (Stage::sequential_from_zero),
// so its first member enters through an addition too.
template <class Ops>
typename Ops::Value reduce_group(Ops& ops, const Reducer& r, std::vector<typename Ops::Value> v, const NoiseKey& key,
                                 uint64_t stage, uint64_t group, bool from_zero = false) {
  using K = Reducer::Kind;
  using V = typename Ops::Value;
  if (v.size() == 1 && !from_zero && r.kind != K::exact && r.kind != K::binned && r.kind != K::fused) return v[0];
  const auto start = [&](const V& first) { return from_zero ? ops.add(ops.zero(), first) : first; };
  switch (r.kind) {
    case K::seq: {
      V acc = start(v[0]);
      for (size_t i = 1; i < v.size(); ++i) acc = ops.add(acc, v[i]);
      return acc;
    }
    case K::rev: {
      V acc = start(v.back());
      for (size_t i = v.size() - 1; i-- > 0;) acc = ops.add(v[i], acc);
      return acc;
    }
    case K::tree:
      return tree_reduce<Ops>(ops, v);
    case K::shfl_down:
    case K::shfl_xor:  // the butterfly's lane 0 pairs exactly as shfl_down; other lanes never reach it
      return shuffle_down(ops, std::move(v));
    case K::shfl_up:
      return shuffle_up(ops, std::move(v));
    case K::atomic: {
      permute(v, key.stream(stage, group));
      V acc = start(v[0]);
      for (size_t i = 1; i < v.size(); ++i) acc = ops.add(acc, v[i]);
      return acc;
    }
    case K::ring: {
      // NCCL ring: the chunk of tile t starts its sum one rank after t.
      const size_t n = v.size(), first = (key.tile + 1) % n;
      V acc = start(v[first]);
      for (size_t k = 1; k < n; ++k) acc = ops.add(acc, v[(first + k) % n]);
      return acc;
    }
    case K::numpy_pairwise:
      return numpy_pairwise<Ops>(ops, v);
    case K::torch_cascade:
    case K::cub_reduce: {
      const AdditionSteps steps = reducer_addition_steps(r, v.size());
      for (const auto& [into, from] : steps.adds) v[into] = ops.add(v[into], v[from]);
      return v[steps.result];
    }
    case K::kahan:
    case K::neumaier:
    case K::exact:
    case K::binned:
    case K::fused:
      return ops.reduce_whole(r, v, key.tile);
  }
  return v[0];
}

// Groups of the current list for one stage: (first index, stride, count) triples.
struct GroupSpan {
  size_t first, stride, count;
};
inline std::vector<GroupSpan> groups_of(const Grouping& g, size_t n) {
  std::vector<GroupSpan> out;
  const auto size = static_cast<size_t>(g.size);
  switch (g.kind) {
    case Grouping::Kind::all:
      out.push_back({0, 1, n});
      break;
    case Grouping::Kind::contig:
      for (size_t s = 0; s < n; s += size) out.push_back({s, 1, std::min(size, n - s)});
      break;
    case Grouping::Kind::strided:
      for (size_t r = 0; r < std::min(size, n); ++r) out.push_back({r, size, (n - r + size - 1) / size});
      break;
    case Grouping::Kind::split: {
      const size_t chunk = (n + size - 1) / size;  // ceil(n / S); trailing parts may be shorter or empty
      for (size_t s = 0; s < n; s += chunk) out.push_back({s, 1, std::min(chunk, n - s)});
      break;
    }
  }
  return out;
}

// perm(p): the order of `n` partials after it — block b's position k takes index b·L + p[k]; a
// last block of fewer than L keeps, in that order, the p[k] it has.
inline std::vector<size_t> perm_order(const std::vector<int64_t>& p, size_t n) {
  std::vector<size_t> order;
  order.reserve(n);
  const size_t lanes = p.size();
  for (size_t base = 0; base < n; base += lanes)
    for (int64_t k : p)
      if (base + static_cast<size_t>(k) < n) order.push_back(base + static_cast<size_t>(k));
  return order;
}

// cols(R): the order of `n` partials after it — rows of R read column by column (a last, shorter
// row has no entries in the columns it lacks).
inline std::vector<size_t> cols_order(int64_t row, size_t n) {
  std::vector<size_t> order;
  order.reserve(n);
  const auto r = static_cast<size_t>(row);
  for (size_t column = 0; column < std::min(r, n); ++column)
    for (size_t at = column; at < n; at += r) order.push_back(at);
  return order;
}

// deal(P,B): the hands of `n` partials, each the indices of its blocks in order (block i of B
// consecutive partials to hand i mod P; a last, shorter block stays one). Empty hands are none.
inline std::vector<std::vector<size_t>> deal_hands(int64_t hands, int64_t block, size_t n) {
  const auto p = static_cast<size_t>(hands), b = static_cast<size_t>(block);
  const size_t blocks = (n + b - 1) / b;
  std::vector<std::vector<size_t>> out(std::min(p, blocks));
  for (size_t i = 0; i < blocks; ++i)
    for (size_t at = i * b; at < std::min(n, i * b + b); ++at) out[i % p].push_back(at);
  return out;
}

// The order of `n` partials after a reordering stage (perm or cols).
inline std::vector<size_t> reorder_order(const Stage& st, size_t n) {
  return st.cols > 0 ? cols_order(st.cols, n) : perm_order(st.perm, n);
}

// A stage that only reorders its list — perm, cols, or each(S)[...] of such stages (an NHWC
// convolution's channel blocks, each by kernel position: each(288)[cols(9)]) — as the order of `n`
// partials after it; nothing for any other stage.
inline std::optional<std::vector<size_t>> fixed_order(const Stage& st, size_t n) {
  if (st.reorders()) return reorder_order(st, n);
  if (st.each == 0 || st.inner.empty()) return std::nullopt;
  std::vector<size_t> order;
  order.reserve(n);
  const auto run = static_cast<size_t>(st.each);
  for (size_t from = 0; from < n; from += run) {
    const size_t length = std::min(run, n - from);
    std::vector<size_t> within(length);
    std::iota(within.begin(), within.end(), size_t{0});
    for (const Stage& inner : st.inner) {
      const std::optional<std::vector<size_t>> step = fixed_order(inner, length);
      if (!step) return std::nullopt;
      std::vector<size_t> next;
      next.reserve(length);
      for (size_t i : *step) next.push_back(within[i]);
      within = std::move(next);
    }
    for (size_t i : within) order.push_back(from + i);
  }
  return order;
}

// The noise-stream id of stage s of a list of stages: top-level stages are numbered from 0; the
// stages inside the body(M)[...], each(S)[...] or deal(P,B)[...] that is stage `parent` apart from
// every top-level one.
inline uint64_t stage_id(std::optional<uint64_t> parent, size_t s) { return parent ? ((*parent + 1) << 16) + s : s; }

template <class Ops>
void set_stage_format(Ops& ops, const Stage& st) {
  if constexpr (requires { ops.set_format(nullptr, nullptr); })
    ops.set_format(st.format ? &*st.format : nullptr, st.hold ? &*st.hold : nullptr);
}

// Runs `stages` (inside the body that is stage `parent`, if any) on the list; returns what they leave.
template <class Ops>
std::vector<typename Ops::Value> walk_list(Ops& ops, const std::vector<Stage>& stages, size_t first, size_t last,
                                           std::vector<typename Ops::Value> list, const NoiseKey& key,
                                           std::optional<uint64_t> parent) {
  using V = typename Ops::Value;
  for (size_t s = first; s < last && !list.empty(); ++s) {
    const Stage& st = stages[s];
    const uint64_t id = stage_id(parent, s);
    if (st.shuffle) {
      permute(list, key.stream(id, 0));
      continue;
    }
    if (st.reorders()) {
      std::vector<V> next;
      next.reserve(list.size());
      for (size_t i : reorder_order(st, list.size())) next.push_back(list[i]);
      list = std::move(next);
      continue;
    }
    if (st.body > 0) {
      const size_t body = list.size() - list.size() % static_cast<size_t>(st.body);
      std::vector<V> inside(list.begin(), list.begin() + static_cast<ptrdiff_t>(body));
      std::vector<V> next(list.begin() + static_cast<ptrdiff_t>(body), list.end());
      inside = walk_list(ops, st.inner, 0, st.inner.size(), std::move(inside), key, id);
      next.insert(next.end(), inside.begin(), inside.end());
      list = std::move(next);
      continue;
    }
    if (st.deal > 0) {  // every hand on its own, what each leaves listed in hand order
      std::vector<V> next;
      for (const std::vector<size_t>& hand : deal_hands(st.deal, st.deal_block, list.size())) {
        std::vector<V> members;
        members.reserve(hand.size());
        for (size_t i : hand) members.push_back(list[i]);
        std::vector<V> left = walk_list(ops, st.inner, 0, st.inner.size(), std::move(members), key, id);
        next.insert(next.end(), std::make_move_iterator(left.begin()), std::make_move_iterator(left.end()));
      }
      list = std::move(next);
      continue;
    }
    if (st.each > 0) {  // every run of S on its own, what each leaves listed in run order
      const size_t run = static_cast<size_t>(st.each);
      std::vector<V> next;
      for (size_t from = 0; from < list.size(); from += run) {
        const auto to = list.begin() + static_cast<ptrdiff_t>(std::min(list.size(), from + run));
        std::vector<V> left =
            walk_list(ops, st.inner, 0, st.inner.size(), std::vector<V>(list.begin() + static_cast<ptrdiff_t>(from), to),
                      key, id);
        next.insert(next.end(), std::make_move_iterator(left.begin()), std::make_move_iterator(left.end()));
      }
      list = std::move(next);
      continue;
    }
    set_stage_format(ops, st);
    std::vector<V> next;
    const auto groups = groups_of(st.grouping, list.size());
    next.reserve(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<V> members;
      members.reserve(groups[g].count);
      for (size_t k = 0; k < groups[g].count; ++k) members.push_back(list[groups[g].first + k * groups[g].stride]);
      // A group's result is stored in the format, like a register: a lone product is rounded.
      next.push_back(
          ops.finish(reduce_group(ops, st.reducer, std::move(members), key, id, g, st.sequential_from_zero())));
    }
    set_stage_format(ops, Stage{});
    list = std::move(next);
  }
  return list;
}

// Runs stages [first, last) of the schedule on the list; returns the partials they leave.
template <class Ops>
std::vector<typename Ops::Value> walk_stages(Ops& ops, const Schedule& schedule, size_t first, size_t last,
                                             std::vector<typename Ops::Value> list, const NoiseKey& key) {
  return walk_list(ops, schedule.stages, first, last, std::move(list), key, std::nullopt);
}

// Runs the whole schedule; throws ScheduleError if more than one value is left at the end.
template <class Ops>
typename Ops::Value walk(Ops& ops, const Schedule& schedule, std::vector<typename Ops::Value> list,
                         const NoiseKey& key) {
  list = walk_stages(ops, schedule, 0, schedule.stages.size(), std::move(list), key);
  if (list.empty()) return ops.finish(ops.zero());
  if (list.size() > 1)
    throw ScheduleError("schedule '" + to_string(schedule) + "' leaves " + std::to_string(list.size()) +
                            " partial results; end it with an all: stage",
                        0);
  return ops.finish(list.front());
}

}  // namespace fplab::sim::detail
