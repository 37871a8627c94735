// Which schedule of fplab's grammar (docs/schedules.md) adds in a revealed tree's order, if any:
// the presets and the families a CPU or GPU library is likely to use (one or more lanes or blocks
// summed sequentially, then folded by a sequence, a tree or a shuffle), each drawn for n terms
// (sim::schedule_addition_tree) and compared with the tree, addition for addition.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/addition_tree.hpp"

namespace fplab::reveal {

struct ScheduleMatch {
  std::vector<std::string> schedules;  // every candidate whose tree is the revealed one, in trial order
  size_t candidates = 0;               // how many were compared
};

// The deterministic candidates for n terms, in the order they are tried (simplest first).
std::vector<std::string> candidate_schedules(size_t n);

ScheduleMatch match_schedule(const sim::AdditionTree& revealed);

}  // namespace fplab::reveal
