// A schedule drawn as the tree of its additions (Graphviz DOT): the picture a teacher projects.
#pragma once

#include <cstddef>
#include <string>

#include "sim/noise.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

struct ScheduleTree {
  std::string dot;       // Graphviz source
  size_t additions = 0;  // binary additions in the tree
  size_t depth = 0;      // most roundings on any path from a term to the result
  size_t whole_group_nodes = 0;  // kahan/exact/binned/fused nodes, drawn as one n-ary node
};

// The tree for k terms (atomic and shuffle steps drawn as the order `key` gives).
ScheduleTree draw_schedule(const Schedule& schedule, size_t k, const NoiseKey& key = {});

// The most roundings on any path from a term to the result (a whole-group reducer counts as
// one); cheap enough for millions of terms.
size_t schedule_depth(const Schedule& schedule, size_t k, const NoiseKey& key = {});

}  // namespace fplab::sim
