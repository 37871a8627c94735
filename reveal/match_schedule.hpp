// Which schedule of fplab's grammar (docs/schedules.md) adds in a revealed tree's order, if any:
// the presets and the families a CPU or GPU library is likely to use (one or more lanes or blocks
// summed sequentially, then folded by a sequence, a tree or a shuffle), each drawn for n terms
// (sim::schedule_addition_tree) and compared with the tree, addition for addition.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "reveal/probe_varying_sum.hpp"
#include "sim/addition_tree.hpp"

namespace fplab::reveal {

struct ScheduleMatch {
  std::vector<std::string> schedules;  // every candidate whose tree is the revealed one, in trial order
  size_t candidates = 0;               // how many were compared
};

// The deterministic candidates for n terms, in the order they are tried (simplest first).
std::vector<std::string> candidate_schedules(size_t n);

ScheduleMatch match_schedule(const sim::AdditionTree& revealed);

// A sum whose order varies (reveal/probe_varying_sum.hpp): the candidates ending in `all:seq`
// whose stages before it leave exactly the revealed parts, each with the revealed tree, written
// with `all:atomic` (a chain of the parts in an order drawn per call). A sum that did not vary:
// match_schedule of its tree.
ScheduleMatch match_varying_schedule(const RevealedVaryingSum& revealed);

}  // namespace fplab::reveal
