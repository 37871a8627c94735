// A schedule drawn as the tree of its additions (Graphviz DOT): the picture a teacher projects.
#pragma once

#include <cstddef>
#include <string>

#include "sim/noise.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

struct ScheduleTree {
  std::string dot;               // Graphviz source
  size_t nodes = 0;              // every node drawn, terms included (what Graphviz has to lay out)
  size_t additions = 0;          // binary additions in the tree (one rounding each)
  size_t fused_operations = 0;   // tensor-core fused steps: accumulator + N terms, one rounding each
  size_t whole_group_nodes = 0;  // kahan/neumaier/exact/binned nodes, drawn as one n-ary node
  size_t depth = 0;              // most roundings on any path from a term to the result
};

// The tree for k terms (atomic and shuffle steps drawn as the order `key` gives). A fused(N,F)
// step over a group is drawn as the chain the hardware runs: one node per N terms, each taking
// the previous node's result as its accumulator. Terms are drawn left to right in index order.
ScheduleTree draw_schedule(const Schedule& schedule, size_t k, const NoiseKey& key = {});

// Nodes draw_schedule() would draw for k terms, without building the picture (cheap).
size_t schedule_tree_nodes(const Schedule& schedule, size_t k, const NoiseKey& key = {});

// The most roundings on any path from a term to the result (a whole-group reducer counts as
// one; a fused chain as one per step); cheap enough for millions of terms.
size_t schedule_depth(const Schedule& schedule, size_t k, const NoiseKey& key = {});

}  // namespace fplab::sim
