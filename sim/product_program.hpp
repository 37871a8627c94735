// Internal to sim/: a GEMM's first reduction stage over product terms as a flat list of steps,
// for the reducers whose order of additions is fixed by K alone (tree, rev, shfl_down, shfl_up,
// shfl_xor, numpy_pairwise). Built once per GEMM from the reference's own orders (schedule_walk.hpp's
// reduce_group records each group's tree of additions), then run across every tile's outputs by
// product_program_tile.hpp, so the tile kernel neither recurses nor allocates.
//
// The steps evaluate each group's tree with one running value and a stack of values waiting for
// their other operand. A product enters as the reference has it (reference_evaluator.cpp,
// NumericOps::add): an addition of a product and a value is one FMA; two products meeting round
// the left one first; a lone product leaving a group is rounded. Addition is commutative, so
// which operand a step holds in the running value does not change a bit (signs of zero included;
// only a NaN's payload could differ, and no evaluator here promises one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/schedule.hpp"

namespace fplab::sim::detail {

struct ProductStep {
  enum class Kind : uint8_t {
    // running = round(p[0]) + p[1], one FMA: two products meeting, the left one rounded first
    pair,
    // running = pair(p[0], p[1]) + pair(p[2], p[3]): two pairs meeting, without the stack
    quad,
    product,  // running = round(p[0]): a group of one product
    // running = running + p[t], rounded once, for the p[1] terms t = p[0], p[0] + d, p[0] + 2d, ...
    // with d = int32_t(p[2]): a chain of FMAs in one step (rev's whole group is one pair and one
    // chain)
    fmas,
    add_popped,  // running = (value popped from the stack) + running
    store,       // the result of group p[0] = running
  };
  Kind kind;
  // pair, quad, product: the running value is pushed first (an add_popped takes it)
  bool push = false;
  uint32_t p[4] = {};  // the product terms (store: the group)
};

struct ProductProgram {
  std::vector<ProductStep> steps;
  size_t depth = 0;   // the most values on the stack at once
  size_t groups = 0;  // the results stored (group g by `store` with p[0] = g)
  // The steps' terms are numbered in the order they first read them: step term j is product term
  // order[j] of the GEMM. The tile kernel reads factors packed in that order, so a warp tree's
  // far-apart terms (shfl_down pairs t with t + K/2) stream from memory like a tree's neighbours.
  std::vector<uint32_t> order;
};

// True for the reducers whose orders product_program records.
bool has_product_program(const Reducer& reducer);

// The steps of the reduction stage `stage` (stage.reduces() and has_product_program(stage.reducer))
// on k product terms, term t being the product of column t of A's row and row t of B's column
// (numbered as `order` says).
ProductProgram product_program(const Stage& stage, size_t k);

}  // namespace fplab::sim::detail
