#include "reveal/match_schedule.hpp"

#include <set>

#include "sim/presets.hpp"
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
      for (const char* f : folds)
        offer("strided(" + std::to_string(lanes) + "):" + inner + " | all:" + f);
  // Blocks of consecutive terms each summed, then folded (split-K, pairwise blocks).
  for (size_t block = 2; block < n; block *= 2)
    for (const char* inner : {"seq", "tree", "numpy_pairwise"})
      for (const char* f : folds) offer("contig(" + std::to_string(block) + "):" + inner + " | all:" + f);
  for (const auto& preset : sim::presets()) {
    try {
      if (!sim::parse_schedule(preset.example).nondeterministic()) offer(preset.example);
    } catch (const sim::ScheduleError&) {
    }
  }
  return out;
}

ScheduleMatch match_schedule(const sim::AdditionTree& revealed) {
  ScheduleMatch m;
  const std::string want = revealed.text();
  for (const auto& text : candidate_schedules(revealed.terms)) {
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

}  // namespace fplab::reveal
