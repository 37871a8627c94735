// Revealing the order in which an all-reduce sums each element of a buffer (NCCL's, on real GPUs:
// tools/gpu/nccl_order). The pair probe of probe_sum.hpp, asked of every element at once: one
// all-reduce with rank a's buffer all +M, rank b's all -M and the others all 1 answers the pair
// (a, b) for every element. R (R - 1) calls answer every pair of every element; each element's
// answers then give its tree as reveal_sum would, and elements with the same answers share one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "sim/addition_tree.hpp"

namespace fplab::reveal {

// The all-reduce under study: inputs[rank][element] in (values its type holds exactly: 1 and a
// power of two), the result's elements out (the same on every rank, which the caller checks).
using AllReduceFunction = std::function<std::vector<float>(const std::vector<std::vector<float>>& inputs)>;

struct RevealedAllReduce {
  std::vector<sim::AdditionTree> trees;  // the distinct trees, in the order of their first element
  std::vector<uint32_t> tree_of;         // element -> index into trees
  size_t calls = 0;                      // all-reduces made
};

// `large` is the probes' M: 0 takes absorbing_value(ranks) (fp32 and bf16 hold it); a narrower
// type needs one it holds whose partial sums still absorb up to ranks 1s (fp16, to 17 ranks:
// 2^15). Throws RevealError (probe_sum.hpp) when an element's answers are not those of one tree
// of additions.
RevealedAllReduce reveal_all_reduce(const AllReduceFunction& all_reduce, int ranks, size_t count, float large = 0);

}  // namespace fplab::reveal
