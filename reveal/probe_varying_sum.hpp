// Revealing a sum whose order changes from call to call, as a GPU kernel's does where blocks add
// their partial sums to the result with atomics: deterministic parts (each a fixed tree of its own
// terms), combined in an order that varies. From a pivot term, every other term not yet in a part
// is probed once (the probe of reveal/probe_sum.hpp); the pivot's part is the largest subtree
// around it that fits one tree and whose every term answered the same when asked `runs` times
// (only the terms that walk reaches are asked again). Then, for the pairs of terms in different
// parts, the sizes of the subtrees where they met say how the parts were combined: in a chain of
// atomic additions in arrival order, two parts meet once both have arrived, so the size is the
// sum of the sizes of every part that had arrived by then.
//
// Calls: (terms left) for each part's pivot plus `runs` for each term of a part, about
// n P / 2 + runs n for P parts (a pure chain of atomics, P = n, costs about n^2 / 2).
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "reveal/probe_sum.hpp"
#include "sim/addition_tree.hpp"

namespace fplab::reveal {

struct RevealedVaryingSum {
  // Every part's own tree; the root's children are the parts, in order of their smallest terms
  // (one node of P children: the order in which they are combined is what varies). When no
  // probe varied, the whole tree as one part (and `varies` false).
  sim::AdditionTree skeleton;
  std::vector<std::vector<size_t>> parts;  // each part's terms, ascending; parts by smallest term
  bool varies = false;
  size_t runs = 0, calls = 0;
  double seconds = 0;
  // The probes of pairs in different parts (one call each, or `runs` where the walk asked again):
  // size of the subtree where they met -> calls.
  std::map<size_t, size_t> cross_meets;
  // True when every such size is the two parts' sizes plus those of some other whole parts: what
  // a chain of the parts in some order gives. Checked exactly when all parts have one size.
  bool chain_of_parts = false;
  // With parts of one size B: parts_met[k] = calls in which the two parts met once k parts had
  // arrived (size k B); in a uniformly random order that is 2 (k - 1) / (P (P - 1)) of them.
  std::map<size_t, size_t> parts_met;
  // The total variation distance between parts_met's shares and a uniformly random order's:
  // 0 when they agree, about sqrt(P / calls) from sampling alone; -1 without parts of one size.
  double uniform_order_distance = -1;
};

// Throws RevealError when a result is not a count of 1s, or when the parts contradict one tree.
RevealedVaryingSum reveal_varying_sum(const SumFunction& sum, size_t n, size_t runs);

// The skeleton with its root unfolded into a chain of the parts in order of their smallest
// terms: a tree of binary additions, for matching with schedules (whose last stage's `seq` is
// then the varying `atomic`).
sim::AdditionTree chained_skeleton(const RevealedVaryingSum& revealed);

}  // namespace fplab::reveal
