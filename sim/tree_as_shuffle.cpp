#include "sim/tree_as_shuffle.hpp"

#include <bit>

#include "sim/schedule_walk.hpp"

namespace fplab::sim {

std::optional<Schedule> trees_as_shuffles(const Schedule& schedule, size_t n) {
  if (!schedule.plain()) return std::nullopt;
  Schedule rewritten = schedule;
  bool any = false;
  size_t partials = n;
  for (Stage& stage : rewritten.stages) {
    if (!stage.reduces()) return std::nullopt;
    const auto groups = detail::groups_of(stage.grouping, partials);
    if (stage.reducer.kind == Reducer::Kind::tree) {
      for (const auto& g : groups)
        if (!std::has_single_bit(g.count)) return std::nullopt;
      stage.reducer.kind = Reducer::Kind::shfl_up;
      any = true;
    }
    partials = groups.size();
  }
  if (!any) return std::nullopt;
  return rewritten;
}

}  // namespace fplab::sim
