// NCCL's all-reduce orders (sim/nccl_all_reduce): the layout model on the cases worked out from
// NCCL 2.28's source, every element in one chunk, the ring's order against the schedule grammar's
// `all:ring`, the fold's rounding, and the probe of reveal/probe_all_reduce recovering the
// orders of an emulated NCCL (what tools/gpu/nccl_order does on real GPUs).
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <vector>

#include "fp/format.hpp"
#include "fp/round.hpp"
#include "reveal/probe_all_reduce.hpp"
#include "reveal/probe_sum.hpp"
#include "sim/addition_tree.hpp"
#include "sim/nccl_all_reduce.hpp"
#include "sim/schedule.hpp"

using namespace fplab;
using namespace fplab::sim;

namespace {

NcclCall call_of(size_t count, int ranks, int channels, size_t element_bytes) {
  NcclCall c;
  c.count = count;
  c.ranks = ranks;
  c.comm_channels = channels;
  c.element_bytes = element_bytes;
  return c;
}

// The layout's own invariants: the channels tile [0, count); each loop's chunks cover it.
void check_covers(const NcclRingLayout& l) {
  size_t at = 0;
  for (const auto& ch : l.channels) {
    CHECK(ch.offset == at);
    at += ch.count;
    const size_t loop = static_cast<size_t>(l.ranks) * ch.chunk;
    CHECK(ch.last_chunk * static_cast<size_t>(l.ranks) >= ch.count % loop);
  }
  CHECK(at == l.count);
}

}  // namespace

TEST_CASE("nccl ring layout: 4 ranks, 2 channels, 1e6 fp32 (worked from NCCL 2.28's host code)") {
  const auto l = nccl_ring_layout(call_of(1000000, 4, 2, 4));
  REQUIRE(l.channels.size() == 2);
  CHECK(l.channels[0].offset == 0);
  CHECK(l.channels[0].count == 501760);  // 245 cells of 2048 elements
  CHECK(l.channels[1].count == 498240);  // 244 cells, less the 1472 past the end
  CHECK(l.channels[0].chunk == 524288);  // 2 MiB: 4 of NCCL_BUFFSIZE's 8 steps
  CHECK(l.channels[0].last_chunk == 125440);
  CHECK(l.channels[1].last_chunk == 124560);
  check_covers(l);
  // Element 300000: chunk 2 of channel 0, finished at ring position 2, so started at 3.
  CHECK(ring_order(l, 300000) == std::vector<int>{3, 0, 1, 2});
  CHECK(ring_order(l, 600000) == std::vector<int>{1, 2, 3, 0});
  CHECK(ring_order(l, 0) == std::vector<int>{1, 2, 3, 0});
  CHECK(ring_order(l, 501759) == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("nccl ring layout: 8 ranks, 24 channels, 64 Mi bf16; full loops, then a short one") {
  const auto l = nccl_ring_layout(call_of(size_t{64} << 20, 8, 24, 2));
  REQUIRE(l.channels.size() == 24);
  CHECK(l.channels[0].count == 2797568);
  CHECK(l.channels[1].count == 2797568);
  CHECK(l.channels[23].count == 2764800);
  CHECK(l.channels[0].last_chunk == 349696);
  CHECK(l.channels[23].last_chunk == 345600);
  check_covers(l);
  // 40 M bf16 in 2 channels: 20 Mi each, two full loops of 8 Mi (chunks of 1 Mi), then 4 Mi left.
  const auto big = nccl_ring_layout(call_of(size_t{40} << 20, 8, 2, 2));
  REQUIRE(big.channels.size() == 2);
  CHECK(big.channels[0].chunk == (size_t{1} << 20));
  CHECK(ring_order(big, (size_t{1} << 20) - 1) == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 0});
  CHECK(ring_order(big, (size_t{8} << 20) + (size_t{3} << 20)) == std::vector<int>{4, 5, 6, 7, 0, 1, 2, 3});
  check_covers(big);
}

TEST_CASE("nccl ring layout: a small message takes fewer channels; bad calls are refused") {
  // 1000 fp32 = 4000 bytes: below one channel's 512 threads x 64 bytes, so one channel.
  CHECK(nccl_ring_layout(call_of(1000, 8, 16, 4)).channels.size() == 1);
  CHECK(nccl_ring_layout(call_of(0, 8, 16, 4)).channels.empty());
  auto c = call_of(100, 3, 2, 4);
  c.rings = {{0, 1, 1}};
  CHECK_THROWS_AS(nccl_ring_layout(c), std::invalid_argument);
  CHECK_THROWS_AS(nccl_ring_layout(call_of(100, 0, 2, 4)), std::invalid_argument);
  CHECK_THROWS_AS(nccl_ring_layout(call_of(100, 2, 65, 4)), std::invalid_argument);
  CHECK_THROWS_AS(parse_nccl_protocol("LL64"), std::invalid_argument);
  CHECK(parse_nccl_protocol("ll128") == NcclProtocol::ll128);
}

TEST_CASE("nccl ring order is the schedule grammar's all:ring, with the chunk's position as the tile") {
  // Seeded random sizes and rank counts: each element's chain equals `all:ring`'s tree for the
  // tile the chunk is finished at.
  for (int ranks : {2, 3, 4, 8}) {
    for (size_t count : {size_t{1}, size_t{37}, size_t{5000}, size_t{300001}}) {
      const auto l = nccl_ring_layout(call_of(count, ranks, 3, 4));
      check_covers(l);
      for (size_t e = 0; e < count; e += 1 + count / 97) {
        const auto order = ring_order(l, e);
        // The position that finishes the sum is the last in the order.
        NoiseKey key;
        key.tile = static_cast<uint64_t>(order.back());
        const auto schedule = schedule_addition_tree(parse_schedule("all:ring"), static_cast<size_t>(ranks), key);
        INFO("ranks " << ranks << " count " << count << " element " << e);
        CHECK(chain_tree(order).text() == schedule.text());
      }
    }
  }
}

TEST_CASE("chain_order inverts chain_tree; a tree of another shape has none") {
  for (const std::vector<int>& order : {std::vector<int>{0, 1}, {1, 0, 2}, {3, 0, 1, 2}, {4, 2, 0, 1, 3}}) {
    const auto back = chain_order(chain_tree(order));
    REQUIRE(back);
    // The first two commute: chain_order puts the smaller first.
    std::vector<int> want = order;
    if (want[0] > want[1]) std::swap(want[0], want[1]);
    CHECK(*back == want);
  }
  CHECK_FALSE(chain_order(schedule_addition_tree(parse_schedule("all:tree"), 4)));
}

TEST_CASE("nccl tree within a node: the leaf first, the root last") {
  const std::vector<int> chain = {0, 1, 2, 3};
  CHECK(tree_chain_order(chain) == std::vector<int>{3, 2, 1, 0});
}

TEST_CASE("nccl fold: one rounding to the buffer's type per addition, in the order given") {
  // bf16 has 8 significant bits: 1 + 2^-8 is a tie that stays 1, 2^-8 + 2^-8 is exact.
  const std::vector<std::vector<double>> in = {{1.0}, {0x1p-8}, {0x1p-8}};
  CHECK(fold_in_order(in, 0, std::vector<int>{0, 1, 2}, fp::bf16()) == 1.0);
  CHECK(fold_in_order(in, 0, std::vector<int>{1, 2, 0}, fp::bf16()) == 1.0 + 0x1p-7);
  CHECK(fold_in_order(in, 0, std::vector<int>{0, 1, 2}, fp::fp32()) == 1.0 + 0x1p-7);
}

TEST_CASE("emulate_nccl_all_reduce: every element folded in its ring order or the tree's chain") {
  // Values of wide magnitudes, so that orders differ in their bits.
  std::vector<std::vector<double>> in(4, std::vector<double>(5000));
  uint64_t state = 7;
  for (auto& buffer : in)
    for (double& v : buffer) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v = static_cast<float>(std::ldexp(static_cast<double>(state >> 11) / 0x1p53 - 0.5, static_cast<int>(state % 40) - 20));
    }
  NcclCall call = call_of(0, 0, 2, 0);  // count, ranks and element size come from the buffers
  const auto ring = emulate_nccl_all_reduce(in, NcclAlgorithm::ring, call, fp::fp32());
  const auto layout = nccl_ring_layout(call_of(5000, 4, 2, 4));
  std::set<std::vector<int>> orders;
  for (size_t e = 0; e < 5000; ++e) {
    const auto order = ring_order(layout, e);
    orders.insert(order);
    REQUIRE(ring[e] == fold_in_order(in, e, order, fp::fp32()));
  }
  CHECK(orders.size() == 4);
  std::vector<std::vector<double>> in16 = in;  // bf16 buffers hold bf16 values
  for (auto& buffer : in16)
    for (double& v : buffer) v = fp::round_double(v, fp::bf16(), fp::RoundingOptions(fp::Mode::rne)).value;
  const auto tree = emulate_nccl_all_reduce(in16, NcclAlgorithm::tree, call, fp::bf16());
  for (size_t e = 0; e < 5000; ++e)
    REQUIRE(tree[e] == fold_in_order(in16, e, std::vector<int>{3, 2, 1, 0}, fp::bf16()));
  CHECK_THROWS_WITH(emulate_nccl_all_reduce({{1.0, 0.1}, {1.0, 1.0}}, NcclAlgorithm::tree, call, fp::fp32()),
                    "buffer 0, element 1: 0.1 is not a value of fp32, the buffers' type (round them to it first)");
  NcclCall no_channels = call;
  no_channels.comm_channels = 0;
  CHECK_THROWS(emulate_nccl_all_reduce(in, NcclAlgorithm::tree, no_channels, fp::fp32()));
  size_t apart = 0;  // the orders matter: the ring's and the tree's fp32 sums are not all equal
  const auto tree32 = emulate_nccl_all_reduce(in, NcclAlgorithm::tree, call, fp::fp32());
  for (size_t e = 0; e < 5000; ++e) apart += ring[e] != tree32[e];
  CHECK(apart > 100);

  CHECK(parse_nccl_algorithm("TREE") == NcclAlgorithm::tree);
  CHECK(parse_nccl_algorithm("ring") == NcclAlgorithm::ring);
  CHECK_THROWS_WITH(parse_nccl_algorithm("Rung"), "unknown NCCL algorithm 'Rung' (Ring or Tree)");
  CHECK_THROWS_WITH(emulate_nccl_all_reduce(in, NcclAlgorithm::ring, call, fp::fp64()),
                    "NCCL all-reduces fp32, bf16 or fp16 buffers here, not fp64");
  CHECK_THROWS_WITH(emulate_nccl_all_reduce({}, NcclAlgorithm::ring, call, fp::fp32()),
                    "an all-reduce needs at least one rank's buffer");
  in[2].pop_back();
  CHECK_THROWS_WITH(emulate_nccl_all_reduce(in, NcclAlgorithm::tree, call, fp::fp32()),
                    "the ranks' buffers differ in length (5000 and 4999 elements)");
}

TEST_CASE("reveal_all_reduce recovers every element's order from an emulated NCCL") {
  // Rings that are not 0..R-1, one per channel, as a machine's topology may give.
  for (int ranks : {2, 4, 5}) {
    NcclCall c = call_of(70000, ranks, 2, 4);
    c.rings = {{}, {}};
    for (int r = 0; r < ranks; ++r) {
      c.rings[0].push_back(r);              // 0, 1, ... on channel 0
      c.rings[1].push_back(ranks - 1 - r);  // reversed on channel 1
    }
    c.buffer_bytes = 64 * 1024;  // small chunks: several full loops in 70000 elements
    const auto layout = nccl_ring_layout(c);
    size_t calls = 0;
    const reveal::AllReduceFunction emulated = [&](const std::vector<std::vector<float>>& in) {
      ++calls;
      std::vector<std::vector<double>> x(in.size());
      for (size_t r = 0; r < in.size(); ++r) x[r].assign(in[r].begin(), in[r].end());
      std::vector<float> out(c.count);
      for (size_t e = 0; e < c.count; ++e)
        out[e] = static_cast<float>(fold_in_order(x, e, ring_order(layout, e), fp::fp32()));
      return out;
    };
    const auto revealed = reveal::reveal_all_reduce(emulated, ranks, c.count);
    CHECK(revealed.calls == static_cast<size_t>(ranks * (ranks - 1)));
    CHECK(calls == revealed.calls);
    std::set<std::string> distinct;
    for (size_t e = 0; e < c.count; ++e) {
      const auto want = chain_tree(ring_order(layout, e)).text();
      distinct.insert(want);
      REQUIRE(revealed.trees[revealed.tree_of[e]].text() == want);
    }
    // Two ranks: one addition, one tree. More: each channel's ring gives R orders.
    CHECK(revealed.trees.size() == distinct.size());
    CHECK(distinct.size() == (ranks == 2 ? 1u : 2u * static_cast<size_t>(ranks)));
  }
}

TEST_CASE("reveal_all_reduce in fp16 with a probe value fp16 holds") {
  const int ranks = 8;
  const auto layout = nccl_ring_layout(call_of(5000, ranks, 2, 2));
  const reveal::AllReduceFunction emulated = [&](const std::vector<std::vector<float>>& in) {
    std::vector<std::vector<double>> x(in.size());
    for (size_t r = 0; r < in.size(); ++r) x[r].assign(in[r].begin(), in[r].end());
    std::vector<float> out(x[0].size());
    for (size_t e = 0; e < out.size(); ++e)
      out[e] = static_cast<float>(fold_in_order(x, e, ring_order(layout, e), fp::fp16()));
    return out;
  };
  const auto revealed = reveal::reveal_all_reduce(emulated, ranks, 5000, 0x1p15f);
  for (size_t e = 0; e < 5000; ++e)
    REQUIRE(revealed.trees[revealed.tree_of[e]].text() == chain_tree(ring_order(layout, e)).text());
  // fp16 overflows the default probe value: the sums are infinities and NaNs, not counts.
  CHECK_THROWS_AS(reveal::reveal_all_reduce(emulated, ranks, 5000), reveal::RevealError);
}
