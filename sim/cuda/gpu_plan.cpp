#include "sim/cuda/gpu_plan.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>

#include "sim/schedule_walk.hpp"

namespace fplab::sim::gpu {
namespace {

using GK = Grouping::Kind;
using RK = Reducer::Kind;

constexpr int64_t kMaxBlocks = (int64_t{1} << 31) - 1;  // gridDim.x

[[noreturn]] void reject(const Schedule& s, const char* kernel, const std::string& why) {
  throw NotRealisable("schedule '" + to_string(s) + "' is not realisable by the GPU " + kernel + " kernel: " + why);
}

bool is(const Stage& st, GK g, RK r) { return st.reduces() && st.grouping.kind == g && st.reducer.kind == r; }

std::optional<WarpOrder> warp_order(RK r) {
  switch (r) {
    case RK::shfl_down:
      return WarpOrder::shfl_down;
    case RK::shfl_up:
      return WarpOrder::shfl_up;
    case RK::shfl_xor:
      return WarpOrder::shfl_xor;
    case RK::seq:
      return WarpOrder::seq;
    default:
      return std::nullopt;
  }
}

std::optional<BlockOrder> block_order(RK r) {
  switch (r) {
    case RK::seq:
      return BlockOrder::seq;
    case RK::shfl_down:
      return BlockOrder::shfl_down;
    case RK::shfl_up:
      return BlockOrder::shfl_up;
    case RK::shfl_xor:
      return BlockOrder::shfl_xor;
    default:
      return std::nullopt;
  }
}

const char* name(WarpOrder o) {
  switch (o) {
    case WarpOrder::shfl_down:
      return "shfl_down";
    case WarpOrder::shfl_up:
      return "shfl_up";
    case WarpOrder::shfl_xor:
      return "shfl_xor";
    case WarpOrder::seq:
      return "seq";
  }
  return "?";
}
const char* name(BlockOrder o) {
  switch (o) {
    case BlockOrder::seq:
      return "seq";
    case BlockOrder::shfl_down:
      return "shfl_down";
    case BlockOrder::shfl_up:
      return "shfl_up";
    case BlockOrder::shfl_xor:
      return "shfl_xor";
  }
  return "?";
}

// Reads one pass starting at stage i (advanced past it). `one_block` is set when the pass ends
// in an `all:` block stage, i.e. runs in a single block.
BlockPass read_pass(const Schedule& s, size_t& i, bool second, bool& one_block) {
  auto fail = [&](const std::string& why) { reject(s, "reduction", why); };
  const auto& st = s.stages;
  const auto stage_name = [&](size_t k) { return "stage " + std::to_string(k + 1) + " ('" + to_string(st[k]) + "')"; };
  BlockPass p;
  if (i >= st.size()) fail("expected a per-thread fold after the first pass");
  if (st[i].shuffle) fail("shuffle stages have no GPU kernel");
  if (is(st[i], GK::strided, RK::seq)) {
    p.grid_threads = st[i].grouping.size;
  } else if (!second && is(st[i], GK::contig, RK::seq)) {
    p.contiguous = true;
    p.chunk = st[i].grouping.size;
  } else {
    fail(stage_name(i) + " is not a per-thread fold (" +
         (second ? "strided(P):seq" : "strided(P):seq or contig(G):seq") + ")");
  }
  ++i;
  // V accumulators a thread: the residues V*t .. V*t+V-1 of strided(V*T*B), added in order.
  // (contig(32):seq is the warp stage: 32 accumulators a thread are not realised.)
  if (!p.contiguous && i < st.size() && is(st[i], GK::contig, RK::seq) && st[i].grouping.size != 32) {
    const int64_t v = st[i].grouping.size;
    if (v != 2 && v != 4 && v != 8) fail(stage_name(i) + ": per-thread accumulators contig(V):seq need V = 2, 4 or 8");
    if (p.grid_threads % v != 0) fail("strided(P) with V accumulators needs P divisible by V");
    p.vector = static_cast<int>(v);
    p.grid_threads /= v;
    ++i;
  } else if (!p.contiguous && i < st.size() && is(st[i], GK::strided, RK::seq) && st[i].grouping.size < p.grid_threads) {
    // ... or the residues t, t + P, .. t + (V-1)*P of strided(V*P), P = T*B threads (interleaved).
    const int64_t threads = st[i].grouping.size, v = p.grid_threads / threads;
    if (p.grid_threads % threads != 0 || (v != 2 && v != 4 && v != 8))
      fail(stage_name(i) + ": interleaved accumulators strided(V*P):seq | strided(P):seq need V = 2, 4 or 8");
    p.vector = static_cast<int>(v);
    p.grid_threads = threads;
    p.interleaved = true;
    ++i;
  }
  // One warp's worth of partials: an `all:` stage over them pairs lanes as contig(32): does. Fewer
  // threads leave lanes of -0, which change none of the warp orders' sums (as in a block of fewer
  // than 32 warps, combine_warps).
  if (!p.contiguous && p.grid_threads <= 32 && i + 1 == st.size() && !st[i].shuffle && st[i].grouping.kind == GK::all &&
      warp_order(st[i].reducer.kind)) {
    p.warp = *warp_order(st[i].reducer.kind);
    ++i;
    one_block = true;
    return p;
  }
  if (i >= st.size() || st[i].shuffle || st[i].grouping.kind != GK::contig || st[i].grouping.size != 32 ||
      !warp_order(st[i].reducer.kind))
    fail("expected a warp stage contig(32):shfl_down|shfl_up|shfl_xor|seq after the per-thread fold" +
         (i < st.size() ? ", got " + stage_name(i) : std::string()));
  p.warp = *warp_order(st[i].reducer.kind);
  ++i;

  one_block = false;
  if (i < st.size() && !st[i].shuffle && block_order(st[i].reducer.kind)) {
    const Stage& b = st[i];
    if (b.grouping.kind == GK::contig) {
      if (b.grouping.size > 32) fail(stage_name(i) + ": a block holds at most 32 warps");
      p.warps = static_cast<int>(b.grouping.size);
      p.block = *block_order(b.reducer.kind);
      ++i;
    } else if (b.grouping.kind == GK::all) {
      // `all:R` over the warps is one block's combine when the whole grid fits in a block; an
      // `all:seq` that does not is a fixed-order combine across blocks of one warp (the same sum).
      const bool fits = !p.contiguous && p.grid_threads % 32 == 0 && p.grid_threads / 32 <= 32;
      if (fits && (second || i + 1 == st.size())) {
        p.warps = static_cast<int>(p.grid_threads / 32);
        p.block = *block_order(b.reducer.kind);
        one_block = true;
        ++i;
      } else if (b.reducer.kind != RK::seq) {
        fail(stage_name(i) +
             ": a warp-shuffle combine of all warps needs one block (strided(P) with P <= 1024 threads)");
      }
    }
  }
  if (!p.contiguous) {
    const int64_t t = p.threads_per_block();
    if (p.grid_threads % t != 0)
      fail("strided(" + std::to_string(p.grid_threads * p.vector) + "): " + std::to_string(p.grid_threads) +
           " threads are not a whole number of blocks of " + std::to_string(t));
    if (p.grid_threads / t > kMaxBlocks) fail("more than 2^31 - 1 blocks");
  }
  return p;
}

}  // namespace

int64_t BlockPass::blocks(int64_t n) const {
  const int64_t t = threads_per_block();
  if (!contiguous) return std::max<int64_t>(1, grid_threads / t);  // a one-warp pass may have fewer threads
  if (chunk == 0) return 1;
  const int64_t threads = (n + chunk - 1) / chunk;
  return std::max<int64_t>(1, (threads + t - 1) / t);
}

std::string ReductionPlan::describe(int64_t n) const {
  auto pass = [](const BlockPass& p, int64_t terms) {
    std::string s = p.contiguous && p.chunk == 0 ? std::string("one thread folds all terms")
                    : p.contiguous               ? "contiguous runs of " + std::to_string(p.chunk)
                                   : "grid-stride" + (p.vector > 1 ? " x" + std::to_string(p.vector) +
                                                                         (p.interleaved ? " interleaved" : "")
                                                                   : std::string());
    return s + ", " + std::to_string(p.blocks(terms)) + " blocks x " + std::to_string(p.threads_per_block()) +
           " threads, warps " + name(p.warp) + ", block " + name(p.block);
  };
  std::string s = pass(first, n);
  switch (combine) {
    case GridCombine::single_block:
      return s;
    case GridCombine::seq:
      return s + "; grid: last block folds in block order";
    case GridCombine::atomic:
      return s + "; grid: atomicAdd";
    case GridCombine::second_pass:
      return s + "; grid: second pass " + pass(second, first.blocks(n));
  }
  return s;
}

ReductionPlan plan_reduction(const Schedule& s) {
  auto fail = [&](const std::string& why) { reject(s, "reduction", why); };
  if (s.stages.empty()) fail("empty schedule");
  if (!s.plain())
    fail("perm, cols(R), body(M)[...], each(S)[...], deal(P,B)[...] and @FORMAT stages have no GPU kernel");
  ReductionPlan plan;
  if (s.stages.size() == 1 && is(s.stages[0], GK::all, RK::seq)) {  // a left fold: one thread of one warp
    plan.first.contiguous = true;
    plan.first.chunk = 0;
    return plan;
  }
  size_t i = 0;
  bool one_block = false;
  plan.first = read_pass(s, i, false, one_block);
  const auto& st = s.stages;
  if (one_block) {
    if (i != st.size()) fail("nothing may follow a one-block pass");
    plan.combine = GridCombine::single_block;
    return plan;
  }
  if (i == st.size()) fail("end with a grid combine: all:seq, all:atomic or a one-block second pass");
  if (i + 1 == st.size() && is(st[i], GK::all, RK::seq)) {
    plan.combine = GridCombine::seq;
  } else if (i + 1 == st.size() && is(st[i], GK::all, RK::atomic)) {
    plan.combine = GridCombine::atomic;
  } else {
    bool second_one_block = false;
    plan.second = read_pass(s, i, true, second_one_block);
    if (!second_one_block || plan.second.grid_threads != plan.second.threads_per_block())
      fail("a second pass must run in one block (strided(T):seq ... | all:R with T <= 1024 threads)");
    if (i != st.size()) fail("nothing may follow the second pass");
    plan.combine = GridCombine::second_pass;
  }
  return plan;
}

int64_t GemmPlan::chunk(int64_t k) const {
  switch (parts) {
    case Parts::one:
      return std::max<int64_t>(k, 1);
    case Parts::split:
      return std::max<int64_t>((k + size - 1) / size, 1);
    case Parts::contig:
      return size;
    case Parts::strided:  // fewer terms than parts: one a part (the empty ones are no parts)
      return std::max<int64_t>(k / size, 1);
    case Parts::dealt:  // whole blocks a hand (the first hands one more)
      return (k + block - 1) / block / size * block;
  }
  return k;
}

KParts GemmPlan::k_parts(int64_t k) const {
  KParts p;
  p.chunk = chunk(k);
  if (parts == Parts::strided && k >= size) p.longer = k % size;
  if (parts == Parts::dealt && k > 0) {
    const int64_t blocks = (k + block - 1) / block;
    p.unit = block;
    p.longer = blocks % size;
    p.hands = std::min(blocks, size);
    p.short_part = (blocks - 1) % size;
    p.shortfall = blocks * block - k;
  }
  if (run) {
    p.run = run;
    p.per_run = (run + p.chunk - 1) / p.chunk;
  }
  return p;
}

int64_t GemmPlan::part_count(int64_t k) const { return k_parts(k).count(k); }

std::vector<size_t> GemmPlan::k_order(int64_t k) const {
  if (parts == Parts::dealt) {
    if ((k + block - 1) / block <= size) return {};  // a block a hand (or one hand): in order already
    std::vector<size_t> order;
    order.reserve(static_cast<size_t>(k));
    for (const std::vector<size_t>& hand : sim::detail::deal_hands(size, block, static_cast<size_t>(k)))
      order.insert(order.end(), hand.begin(), hand.end());
    return order;
  }
  if (parts != Parts::strided || k <= size) return {};  // P or fewer terms: one a part, in order
  return sim::detail::cols_order(size, static_cast<size_t>(k));
}

std::vector<size_t> TensorCoreGemmPlan::fold_order(int64_t k) const {
  if (fold_reorders.empty()) return {};
  const auto count = static_cast<size_t>(parts.part_count(k));
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  for (const Stage& reorder : fold_reorders) {
    std::vector<size_t> next;
    next.reserve(count);
    for (size_t i : sim::detail::reorder_order(reorder, count)) next.push_back(order[i]);
    order = std::move(next);
  }
  return order;
}

std::vector<size_t> OrderedGemmRoute::k_order(int64_t k) const {
  if (!order) return {};
  return sim::detail::fixed_order(*order, static_cast<size_t>(k)).value_or(std::vector<size_t>{});
}

namespace {

// each(R)[contig(G):seq] or each(R)[all:seq] (= contig(R)) leading a GEMM schedule: R and G, else
// a one-line refusal.
std::pair<int64_t, int64_t> restarting_parts(const Schedule& s) {
  const Stage& first = s.stages[0];
  const Stage* inner = first.inner.size() == 1 ? &first.inner[0] : nullptr;
  if (!inner || !inner->reduces() || inner->format || inner->reducer.kind != RK::seq ||
      (inner->grouping.kind != GK::contig && inner->grouping.kind != GK::all))
    reject(s, "GEMM", "each(R)[...] takes one stage contig(G):seq or all:seq");
  const int64_t run = first.each;
  return {run, inner->grouping.kind == GK::all ? run : std::min(inner->grouping.size, run)};
}

}  // namespace

GemmPlan plan_gemm(const Schedule& s) {
  const auto& st = s.stages;
  // A leading each(R)[...] is the kernel's too (parts that restart every R terms): the stages
  // after it must be plain.
  const bool restarts = !st.empty() && st[0].each > 0;
  if (!Schedule{std::vector<Stage>(st.begin() + (restarts ? 1 : 0), st.end())}.plain())
    reject(s, "GEMM",
           "perm, cols(R), body(M)[...], each(S)[...] (but a first each(R)[contig(G):seq]), deal(P,B)[...] "
           "(on the tensor-core GEMM only) and @FORMAT stages have no GPU kernel");
  GemmPlan plan;
  if (st.size() == 1 && is(st[0], GK::all, RK::seq)) return plan;
  const bool parts = st.size() == 2 && !st[1].shuffle && st[1].grouping.kind == GK::all &&
                     (restarts || (!st[0].shuffle && st[0].reducer.kind == RK::seq &&
                                   (st[0].grouping.kind == GK::split || st[0].grouping.kind == GK::contig ||
                                    st[0].grouping.kind == GK::strided)));
  if (!parts)
    reject(s, "GEMM",
           "expected all:seq, split(S):seq | all:R, contig(G):seq | all:R, strided(P):seq | all:R or "
           "each(S)[contig(G):seq] | all:R (R = seq, tree or atomic)");
  if (restarts) {
    plan.parts = GemmPlan::Parts::contig;
    std::tie(plan.run, plan.size) = restarting_parts(s);
  } else {
    plan.parts = st[0].grouping.kind == GK::split    ? GemmPlan::Parts::split
                 : st[0].grouping.kind == GK::strided ? GemmPlan::Parts::strided
                                                      : GemmPlan::Parts::contig;
    plan.size = st[0].grouping.size;
  }
  switch (st[1].reducer.kind) {
    case RK::seq:
      plan.combine = GemmPlan::Combine::seq;
      break;
    case RK::tree:
      plan.combine = GemmPlan::Combine::tree;
      break;
    case RK::atomic:
      plan.combine = GemmPlan::Combine::atomic;
      break;
    default:
      reject(s, "GEMM", "split-K parts are combined by seq, tree or atomic, not " + to_string(st[1].reducer));
  }
  if ((plan.parts == GemmPlan::Parts::split || plan.parts == GemmPlan::Parts::strided) && plan.size > 65535)
    reject(s, "GEMM", "at most 65535 split-K parts");
  return plan;
}

namespace {

// deal(P,B)[all:fused(N,F,IN)] | [perm(...) | cols(R) ...] | all:seq: the plan of its hands'
// chains, or nothing for another schedule.
std::optional<TensorCoreGemmPlan> plan_dealt_tensor_core_gemm(const Schedule& s) {
  const auto& st = s.stages;
  if (st.size() < 2 || st[0].deal == 0) return std::nullopt;
  constexpr const char* kernel = "tensor-core GEMM";
  const Stage& hands = st[0];
  if (hands.inner.size() != 1 || !is(hands.inner[0], GK::all, RK::fused) || hands.inner[0].format)
    reject(s, kernel, "deal(P,B)[...] takes one stage all:fused(N,F,IN)");
  for (size_t i = 1; i + 1 < st.size(); ++i)
    if (!st[i].reorders()) reject(s, kernel, "between deal(P,B)[...] and all:seq only perm(...) and cols(R) stages");
  if (!is(st.back(), GK::all, RK::seq) || st.back().format)
    reject(s, kernel, "deal(P,B)[...]'s hands are added by all:seq");
  TensorCoreGemmPlan plan = plan_tensor_core_gemm(Schedule{{hands.inner[0]}});
  if (plan.cuda_cores) reject(s, kernel, "deal(P,B)[...] runs on the tensor cores' own steps only (tc-h100 models)");
  plan.parts.parts = GemmPlan::Parts::dealt;
  plan.parts.size = hands.deal;
  plan.parts.block = hands.deal_block;
  plan.fold_reorders.assign(st.begin() + 1, st.end() - 1);
  return plan;
}

}  // namespace

TensorCoreGemmPlan plan_tensor_core_gemm(const Schedule& s) {
  constexpr const char* kernel = "tensor-core GEMM";
  const auto& st = s.stages;
  if (std::optional<TensorCoreGemmPlan> dealt = plan_dealt_tensor_core_gemm(s)) return *dealt;
  if (!s.plain())
    reject(s, kernel,
           "perm, cols(R), body(M)[...], each(S)[...], deal(P,B)[...] (but as deal(P,B)[all:fused(N,F,IN)] | "
           "all:seq) and @FORMAT stages have no GPU kernel");
  const bool one = st.size() == 1 && !st[0].shuffle && st[0].grouping.kind == GK::all;
  const bool parts = st.size() == 2 && !st[0].shuffle && !st[1].shuffle &&
                     (st[0].grouping.kind == GK::split || st[0].grouping.kind == GK::contig) &&
                     (is(st[1], GK::all, RK::seq) || is(st[1], GK::all, RK::atomic));
  if (!one && !parts)
    reject(s, kernel, "expected all:fused(N,F,IN) or split(S)|contig(G):fused(N,F,IN) | all:{seq|atomic}");
  const Reducer& r = st[0].reducer;
  if (r.kind != RK::fused) reject(s, kernel, "its first stage must be fused(N,F,IN), not " + to_string(r));
  using In = Reducer::Input;
  TensorCoreGemmPlan plan;
  plan.factors = r.fused_input;
  plan.step_products = r.fused_products;
  plan.fraction_bits = r.fused_fraction_bits;
  // The H100's own instruction where it is the model's step; otherwise the step in software.
  const bool hardware = plan.factors != In::none && r.fused_products == plan.products() && r.fused_fraction_bits == 25;
  if (!hardware) {
    const std::string why = fused_steps_why_not(r.fused_products, r.fused_fraction_bits, plan.factors);
    if (!why.empty()) reject(s, kernel, why);
    plan.cuda_cores = true;
  }
  if (parts) {
    plan.parts.parts = st[0].grouping.kind == GK::split ? GemmPlan::Parts::split : GemmPlan::Parts::contig;
    plan.parts.size = st[0].grouping.size;
    if (st[1].reducer.kind == RK::atomic) plan.parts.combine = GemmPlan::Combine::atomic;  // in the seed's order
    if (plan.parts.parts == GemmPlan::Parts::split && plan.parts.size > 65535)
      reject(s, kernel, "at most 65535 split-K parts");
  }
  return plan;
}

std::string fused_steps_why_not(int products, int fraction_bits, Reducer::Input factors) {
  using In = Reducer::Input;
  if (products != 1 && products != 2 && products != 4 && products != 8 && products != 16)
    return "fused steps on CUDA cores take 1, 2, 4, 8 or 16 products a step, not " + std::to_string(products);
  if (fraction_bits > 25)
    return "fused steps on CUDA cores keep at most 25 fraction bits, not " + std::to_string(fraction_bits);
  if (factors != In::tf32 && factors != In::tf32rne && factors != In::tf32rna && factors != In::bf16 &&
      factors != In::fp16 && factors != In::none)
    return std::string("fused steps on CUDA cores take factors as they are or converted to tf32, tf32rne, tf32rna, "
                       "bf16 or fp16, not '") +
           to_string(factors) + "'";
  return {};
}

GemmRoute plan_any_gemm(const Schedule& schedule) {
  if (!schedule.stages.empty() && (schedule.stages[0].reducer.kind == RK::fused || schedule.stages[0].deal > 0))
    return plan_tensor_core_gemm(schedule);
  return plan_gemm(schedule);
}

bool only_reorders(const Stage& stage) {
  if (stage.reorders()) return true;
  return stage.each > 0 && !stage.inner.empty() && std::all_of(stage.inner.begin(), stage.inner.end(), only_reorders);
}

OrderedGemmRoute plan_ordered_gemm(const Schedule& schedule) {
  const auto& st = schedule.stages;
  if (st.size() < 2 || !only_reorders(st[0]) || schedule.nondeterministic()) return {std::nullopt, plan_any_gemm(schedule)};
  const Schedule rest{std::vector<Stage>(st.begin() + 1, st.end())};
  try {
    return {st[0], plan_any_gemm(rest)};
  } catch (const NotRealisable& e) {
    throw NotRealisable("schedule '" + to_string(schedule) + "' is not realisable on the GPU: after its first stage, " +
                        "which reorders K, " + e.what());
  }
}

bool exact_sum_schedule(const Schedule& schedule) {
  if (!schedule.order_independent()) return false;
  for (const Stage& st : schedule.stages)
    if (st.reduces()) return st.reducer.kind == RK::exact;  // binned is order independent too, and not this
  return false;
}

SeededPlan plan_seeded(const Schedule& schedule) {
  auto refuse = [&](const std::string& why) {
    return NotRealisable("schedule '" + to_string(schedule) +
                         "' is not realisable by the GPU seeded-order kernel: " + why);
  };
  const auto& stages = schedule.stages;
  if (!schedule.plain())
    throw refuse("perm, cols(R), body(M)[...], each(S)[...], deal(P,B)[...] and @FORMAT stages have no GPU kernel");
  if (stages.empty() || stages.size() > 2) throw refuse("it takes one or two stages");
  auto ordered = [](const Stage& st) {
    return !st.shuffle && (st.reducer.kind == Reducer::Kind::seq || st.reducer.kind == Reducer::Kind::atomic);
  };
  for (const Stage& st : stages)
    if (!ordered(st)) throw refuse("every stage must be GROUPS:seq or GROUPS:atomic");
  SeededPlan plan;
  plan.first = stages[0].grouping;
  plan.first_atomic = stages[0].reducer.kind == Reducer::Kind::atomic;
  if (stages.size() == 2) {
    if (stages[1].grouping.kind != Grouping::Kind::all) throw refuse("the second stage must be all:");
    plan.two_stages = true;
    plan.second_atomic = stages[1].reducer.kind == Reducer::Kind::atomic;
  } else if (plan.first.kind != Grouping::Kind::all) {
    throw refuse("a single stage must be all:");
  }
  return plan;
}

}  // namespace fplab::sim::gpu
