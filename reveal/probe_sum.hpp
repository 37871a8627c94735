// Revealing the order in which a black-box sum adds its inputs (the technique of FPRev, Xie et al.,
// USENIX ATC 2025, with fewer calls): all inputs 1 but a pair +M, -M, with M so large that a
// partial sum holding M absorbs every 1 added to it. The result then counts the 1s that met
// neither M nor -M before the two cancelled, that is n minus the size of the subtree where they
// meet (their lowest common ancestor). Those sizes determine the tree.
//
// Calls: the pairs of a pivot (a random term of a subtree) with the rest of the subtree, and of a
// pivot with the rest of a sibling group, each asked once: about 2n for a sequential chain in
// either direction, n log2 n / 2 for a balanced tree, where FPRev's basic form asks all
// n (n - 1) / 2 pairs.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>

#include "sim/addition_tree.hpp"

namespace fplab::reveal {

// The sum under study: n float inputs in, one float out.
using SumFunction = std::function<float(std::span<const float>)>;
// A dot product under study: a and b of n floats in, one float out.
using DotFunction = std::function<float(std::span<const float> a, std::span<const float> b)>;

// The dot product as the sum it probes: b all 1, so every product x_i * 1 is exact.
SumFunction dot_with_ones(DotFunction dot);

// The function's answers are not those of one tree of additions (one line, for the user).
struct RevealError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RevealedSum {
  sim::AdditionTree tree;
  size_t calls = 0;    // evaluations of the function
  double seconds = 0;  // wall time of the probing
};

// Throws RevealError when a result is not a count of 1s, or the counts contradict each other
// (a compensated or exact sum, one wider than fp64, or not a sum).
RevealedSum reveal_sum(const SumFunction& sum, size_t n);

// The probes' large value for n terms: a power of two whose fp64 (and so fp32) ulp exceeds 2n.
float absorbing_value(size_t n);

}  // namespace fplab::reveal
