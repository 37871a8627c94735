#include "reveal/match_schedule.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "sim/presets.hpp"
#include "sim/schedule_walk.hpp"
#include "sim/schedule.hpp"

namespace fplab::reveal {

std::vector<std::string> candidate_schedules(size_t n) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  const auto offer = [&](const std::string& text) {
    if (seen.insert(text).second) out.push_back(text);
  };
  const char* folds[] = {"seq", "rev", "tree", "shfl_down", "shfl_up", "numpy_pairwise"};
  for (const char* f : folds) offer(std::string("all:") + f);
  // Lanes (SIMD registers, threads striding through the input) each summed in order, then folded.
  for (size_t lanes = 2; lanes <= 256 && lanes < n; lanes *= 2)
    for (const char* inner : {"seq", "rev"})
      for (const char* f : folds) offer("strided(" + std::to_string(lanes) + "):" + inner + " | all:" + f);
  // Blocks of consecutive terms each summed, then folded (split-K, pairwise blocks).
  for (size_t block = 2; block < n; block *= 2)
    for (const char* inner : {"seq", "tree", "numpy_pairwise"})
      for (const char* f : folds) offer("contig(" + std::to_string(block) + "):" + inner + " | all:" + f);
  // Split-K GEMMs: P slices of consecutive terms, each a whole number of the kernel's K tiles T
  // but the last, their sums chained: contig(T ceil(ceil(n / P) / T)). cuBLAS's sgemm_largek
  // kernels on an H100: K = 512 in 5 slices of 104, K = 784 in 7 of 112 (docs/results/reveal_torch.md).
  for (size_t parts = 3; parts <= 64 && parts < n; ++parts)
    for (size_t tile : {1, 2, 4, 8, 16, 32}) {
      const size_t slice = (n + parts - 1) / parts, block = (slice + tile - 1) / tile * tile;
      if (block < n) offer("contig(" + std::to_string(block) + "):seq | all:seq");
    }
  for (int lanes : {8, 16}) offer("all:torch_cascade(" + std::to_string(lanes) + ")");  // PyTorch's CPU sum
  // PyTorch's CUDA reduction kernel in one block of T threads: each thread keeps 4 accumulators,
  // of 4 consecutive terms (vector loads of a contiguous input) or of terms T apart (a strided
  // one), chains them, and the threads meet by halves (or each warp first, then the warps):
  // torch.sum, bias gradients and the loss on an H100/H200 (docs/results/reveal_torch.md).
  for (size_t threads = 4; threads <= 512 && threads < n; threads *= 2) {
    const std::string fold = "strided(" + std::to_string(4 * threads) + "):seq | ";
    for (const std::string& accumulators : {std::string("contig(4):seq | "),
                                           "strided(" + std::to_string(threads) + "):seq | "}) {
      offer(fold + accumulators + "all:shfl_down");
      if (threads > 32) offer(fold + accumulators + "contig(32):shfl_down | all:shfl_down");
    }
  }
  std::vector<std::string> tensor_cores;  // the deterministic tensor-core chains (tc-* presets)
  for (const auto& preset : sim::presets()) {
    try {
      const sim::Schedule s = sim::parse_schedule(preset.example);
      if (s.nondeterministic()) continue;
      offer(preset.example);
      if (preset.name.rfind("tc-", 0) == 0) tensor_cores.push_back(sim::to_string(s));
    } catch (const sim::ScheduleError&) {
    }
  }
  // A convolution kernel in NHWC takes an im2col row's terms (channel, kernel position) in blocks
  // of B channels, each by kernel position with its channels inner (each(P B)[cols(P)], P the
  // kernel's positions: 9 for 3x3, 25 for 5x5), an input gradient's kernel positions in reverse
  // (cuDNN's TF32 kernels of a ResNet-18 on an H200: B = 32 or 16, docs/results/reveal_torch.md).
  for (size_t positions : {size_t{9}, size_t{25}}) {
    if (n % positions || n <= positions) continue;
    const std::string cols = "cols(" + std::to_string(positions) + ")";
    std::string reversed = "perm(";
    for (size_t p = positions; p-- > 0;) reversed += std::to_string(p) + (p ? "," : ") | ");
    std::vector<std::string> leads;
    for (const std::string& inner : {cols, reversed + cols}) {
      leads.push_back(inner + " | ");
      for (size_t block : {8, 16, 32, 64})
        if (positions * block < n) leads.push_back("each(" + std::to_string(positions * block) + ")[" + inner + "] | ");
    }
    for (const std::string& lead : leads) {
      offer(lead + "all:seq");
      for (const std::string& chain : tensor_cores) offer(lead + chain);
    }
  }
  // cuDNN's singleread BatchNorm kernels (a channel's statistics and its backward's sums): 512
  // threads each chain every 512th term, a warp's 32 partials meet by shuffles down (forward) or in
  // a tree (backward), then the warps likewise, or as by shuffles up where a channel holds fewer
  // values than threads (docs/results/reveal_torch.md, "The last batch: 8 images").
  for (const char* warps :
       {"contig(32):shfl_down | all:shfl_down", "contig(32):tree | all:tree", "contig(32):tree | all:shfl_up"})
    if (n > 32) offer(std::string("strided(512):seq | ") + warps);
  return out;
}

namespace {

// Whether node `id` adds two partial sums (a fold's addition), not a term into a chain.
bool adds_partials(const sim::AdditionTree& tree, size_t id) {
  const size_t n = tree.terms;
  return id >= n && tree.nodes[id - n].size() == 2 && tree.nodes[id - n][0] >= n && tree.nodes[id - n][1] >= n;
}

// The terms under node `id`, in increasing order.
std::vector<size_t> terms_under(const sim::AdditionTree& tree, size_t id) {
  std::vector<size_t> stack{id}, terms;
  while (!stack.empty()) {
    const size_t at = stack.back();
    stack.pop_back();
    if (at < tree.terms)
      terms.push_back(at);
    else
      stack.insert(stack.end(), tree.nodes[at - tree.terms].begin(), tree.nodes[at - tree.terms].end());
  }
  std::sort(terms.begin(), terms.end());
  return terms;
}

// What a dealt hand's chain may be: an FMA chain, or any tensor-core chain of the tc-* presets.
std::vector<std::string> hand_chains() {
  std::vector<std::string> chains{"all:seq"};
  for (const auto& preset : sim::presets())
    if (preset.name.rfind("tc-", 0) == 0) chains.push_back(sim::to_string(sim::parse_schedule(preset.example)));
  return chains;
}

// Chains added one after another (cuDNN's TF32 weight gradients on an H200: split-K slices of
// dealt tiles, folded 0, P - 1, 1, 2, ...; its fp32 dgrad_engine: one FMA chain per kernel
// position, the nine added 4, 8, 0, 5, 1, 6, 2, 7, 3; docs/results/reveal_torch.md), read off the
// tree: where its top is a left fold of P hands (from the root down through additions of two
// partial sums), each hand the terms of one residue mod P (strided(P):seq) or of one hand of
// deal(P,B) (B the run of consecutive terms the hand of term 0 starts with; CHAIN each tensor-core
// chain and all:seq), offered with the fold's order: none, cols(P - 1), or a perm.
std::vector<std::string> folded_chain_candidates(const sim::AdditionTree& tree) {
  if (!adds_partials(tree, tree.root)) return {};
  std::vector<size_t> spine_hands;  // from the top down
  size_t at = tree.root;
  for (;;) {
    const auto& children = tree.nodes[at - tree.terms];
    const bool first = adds_partials(tree, children[0]), second = adds_partials(tree, children[1]);
    if (first && second) return {};  // a tree of folds, not one chain of them
    if (!first && !second) {
      spine_hands.push_back(children[1]), spine_hands.push_back(children[0]);
      break;
    }
    spine_hands.push_back(first ? children[1] : children[0]);
    at = first ? children[0] : children[1];
  }
  const size_t p = spine_hands.size();
  if (2 * p > tree.terms) return {};
  std::vector<std::vector<size_t>> hands;  // in the fold's order
  for (auto h = spine_hands.rbegin(); h != spine_hands.rend(); ++h) hands.push_back(terms_under(tree, *h));
  // The fold's stages before all:seq when hand k has index index_of(hand k); "" if not P distinct.
  auto fold_of = [&](auto index_of) -> std::optional<std::string> {
    std::vector<size_t> order;
    for (const auto& terms : hands) order.push_back(index_of(terms));
    std::sort(order.begin(), order.begin() + 2);  // the first addition's two hands commute
    std::vector<bool> seen(p, false);
    for (size_t index : order) {
      if (index >= p || seen[index]) return std::nullopt;
      seen[index] = true;
    }
    std::vector<size_t> in_order(p), by_columns;
    std::iota(in_order.begin(), in_order.end(), size_t{0});
    if (order == in_order) return std::string();
    if (p > 2) by_columns = sim::detail::cols_order(static_cast<int64_t>(p - 1), p);
    if (order == by_columns) return "cols(" + std::to_string(p - 1) + ") | ";
    std::string text = "perm(";
    for (size_t k = 0; k < p; ++k) text += (k ? "," : "") + std::to_string(order[k]);
    return text + ") | ";
  };
  std::vector<std::string> out;
  const auto by_residue = fold_of([&](const std::vector<size_t>& terms) {
    for (size_t t : terms)
      if (t % p != terms[0] % p) return p;
    return terms[0] % p;
  });
  if (by_residue) out.push_back("strided(" + std::to_string(p) + "):seq | " + *by_residue + "all:seq");
  size_t block = 0;  // deal(P,B): hand h starts with block h
  for (const auto& terms : hands)
    if (terms[0] == 0)
      while (block < terms.size() && terms[block] == block) ++block;
  const auto by_block =
      block > 0 ? fold_of([&](const std::vector<size_t>& terms) { return terms[0] / block; }) : std::nullopt;
  if (by_block)
    for (const std::string& chain : hand_chains())
      out.push_back("deal(" + std::to_string(p) + "," + std::to_string(block) + ")[" + chain + "] | " + *by_block +
                    "all:seq");
  return out;
}

// Hands that chain their terms in runs and add the runs (cuBLAS's small-N GEMM on an H200: K dealt
// to 16 threads, each chaining its terms 16 at a time), read off the chain that starts at term 0:
// B its run of consecutive terms, P B the step to its next term, R its length; offered as
// deal(P,B)[contig(R):seq | all:seq] with the hands folded in order or by cols(P - 1). Hands of
// tensor-core steps chained in runs are not read (a fused step is no chain of single terms).
std::vector<std::string> dealt_run_candidates(const sim::AdditionTree& tree) {
  const size_t n = tree.terms;
  std::vector<size_t> parent(tree.nodes.size() + n, n + tree.nodes.size());
  for (size_t k = 0; k < tree.nodes.size(); ++k)
    for (size_t child : tree.nodes[k]) parent[child] = n + k;
  // Up from term 0 while each addition brings in one more term: the chain's top.
  size_t top = 0;
  while (parent[top] < n + tree.nodes.size()) {
    const auto& children = tree.nodes[parent[top] - n];
    if (children.size() != 2 || (children[0] >= n && children[1] >= n)) break;
    top = parent[top];
  }
  const std::vector<size_t> chain = terms_under(tree, top);
  size_t block = 0;
  while (block < chain.size() && chain[block] == block) ++block;
  if (block == 0 || block >= chain.size() || chain[block] % block != 0) return {};
  const size_t p = chain[block] / block, run = chain.size();  // p >= 2: chain[block] > block
  size_t hand = 0;                                            // the terms of the hand of term 0: blocks 0, p, 2p, ...
  for (size_t start = 0; start < n; start += p * block) hand += std::min(block, n - start);
  if (run >= hand || 2 * p > n) return {};  // one chain a hand: deal(P,B)[all:seq], named above
  const std::string head = "deal(" + std::to_string(p) + "," + std::to_string(block) + ")[contig(" +
                           std::to_string(run) + "):seq | all:seq] | ";
  std::vector<std::string> out{head + "all:seq"};
  if (p > 2) out.push_back(head + "cols(" + std::to_string(p - 1) + ") | all:seq");
  return out;
}

}  // namespace

ScheduleMatch match_schedule(const sim::AdditionTree& revealed) {
  ScheduleMatch m;
  const std::string want = revealed.text();
  std::vector<std::string> candidates = candidate_schedules(revealed.terms);
  const std::set<std::string> usual(candidates.begin(), candidates.end());
  for (std::string& folded : folded_chain_candidates(revealed))
    if (!usual.count(folded)) candidates.push_back(std::move(folded));
  for (std::string& dealt : dealt_run_candidates(revealed))
    if (!usual.count(dealt)) candidates.push_back(std::move(dealt));
  for (const auto& text : candidates) {
    sim::AdditionTree tree;
    try {
      tree = sim::schedule_addition_tree(sim::parse_schedule(text), revealed.terms);
    } catch (const sim::ScheduleError&) {
      continue;  // a preset that does not end in one value for this n
    }
    ++m.candidates;
    if (!tree.opaque && tree.text() == want) m.schedules.push_back(text);
  }
  return m;
}

namespace {

// "each(S)[contig(G):" where the parts are runs of contiguous terms in order, of sizes G, ..., G, r
// with r < G, repeated at least into a second run (the last run may stop early); "" otherwise (one
// size throughout, or a plain contig(G) with a short last part: contig(G) says those).
std::string restarting_tiles(const std::vector<std::vector<size_t>>& parts) {
  size_t next = 0;
  for (const auto& part : parts) {
    if (part.empty() || part.front() != next || part.back() != next + part.size() - 1) return {};
    next += part.size();
  }
  if (parts.size() < 2) return {};
  const size_t g = parts[0].size();
  size_t k = 0;
  while (k < parts.size() && parts[k].size() == g) ++k;
  if (k + 1 >= parts.size() || parts[k].size() > g) return {};
  const size_t period = k + 1;  // parts a run: k of G, one of r
  for (size_t i = 0; i < parts.size(); ++i) {
    const size_t want = i % period == k ? parts[k].size() : g;
    if (i + 1 < parts.size() ? parts[i].size() != want : parts[i].size() > want) return {};
  }
  const size_t run = k * g + parts[k].size();
  return "each(" + std::to_string(run) + ")[contig(" + std::to_string(g) + "):";
}

}  // namespace

ScheduleMatch match_varying_schedule(const RevealedVaryingSum& revealed) {
  if (!revealed.varies) return match_schedule(revealed.skeleton);
  ScheduleMatch m;
  const size_t parts = revealed.parts.size();
  if (parts > 1024) return m;  // beyond fused(N,F)'s N, which draws the parts' node below
  const std::string want = revealed.skeleton.text(), last = "all:seq";
  // Besides the usual candidates, lanes and blocks as many as the parts (a 3x3 convolution's
  // nine taps, each its own chain, are nine parts).
  std::vector<std::string> candidates = candidate_schedules(revealed.skeleton.terms);
  const size_t n = revealed.skeleton.terms, block = (n + parts - 1) / parts;
  // Tiles that restart at a boundary the sum does not know of (cuDNN's weight gradient: per image
  // of 784 pixels, tiles of 512 and 272): parts of contiguous terms whose sizes repeat G, ..., G, r
  // (r < G), a run of S = (k - 1) G + r terms each: each(S)[contig(G):...].
  const std::string tiles = restarting_tiles(revealed.parts);
  for (const char* inner : {"seq", "rev", "tree"}) {
    candidates.push_back("strided(" + std::to_string(parts) + "):" + inner + " | all:seq");
    candidates.push_back("contig(" + std::to_string(block) + "):" + inner + " | all:seq");
    if (!tiles.empty()) candidates.push_back(tiles + inner + "] | all:seq");
  }
  for (const auto& text : candidates) {
    if (text.size() < last.size() || text.compare(text.size() - last.size(), last.size(), last) != 0) continue;
    const std::string prefix = text.substr(0, text.size() - last.size());  // "" or "STAGES | "
    // The stages before the fold, then one node of all they leave: the skeleton's form.
    sim::AdditionTree tree;
    try {
      tree = sim::schedule_addition_tree(sim::parse_schedule(prefix + "all:fused(" + std::to_string(parts) + ",1)"),
                                         revealed.skeleton.terms);
    } catch (const sim::ScheduleError&) {
      continue;
    }
    ++m.candidates;
    if (tree.text() == want) m.schedules.push_back(prefix + "all:atomic");
  }
  return m;
}

}  // namespace fplab::reveal
