// Named schedules: each preset is an alias that expands to (and prints as) an ordinary schedule.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/schedule.hpp"

namespace fplab::sim {

struct PresetInfo {
  std::string name;         // as typed, with parameter placeholders: "splitk(S)"
  std::string example;      // a concrete use: "splitk(4)"
  std::string description;  // what it models and from where
};

const std::vector<PresetInfo>& presets();

// The expansion if `text` names a preset (with its parameters), nothing if it does not;
// throws ScheduleError for a preset name with bad parameters.
std::optional<Schedule> expand_preset(std::string_view text);

}  // namespace fplab::sim
