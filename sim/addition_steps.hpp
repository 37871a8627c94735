// Reducers given as a list of additions over the group's slots: torch_cascade(V), PyTorch's CPU
// sum (sim/torch_cascade.hpp), and cub_reduce(T,I,V,G), CUB's DeviceReduce::Sum
// (sim/cub_reduce.hpp). Their orders depend only on the group's size, so the walks
// (sim/schedule_walk.hpp, sim/tile_walker.hpp) replay the same list on every group of that size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace fplab::sim {

struct Reducer;

// In order, each (into, from) means slot `into` = slot `into` + slot `from`, the slots starting as
// the terms 0..n-1; `result` is the slot that holds the sum at the end.
struct AdditionSteps {
  std::vector<std::pair<int32_t, int32_t>> adds;
  int32_t result = 0;
};

// `into` = `into` + `from` as a step, where either may hold no slot yet (an accumulator before its
// first term): an empty `into` takes `from` as it is, an empty `from` adds nothing.
inline void add_slot(AdditionSteps& steps, std::optional<int32_t>& into, const std::optional<int32_t>& from) {
  if (!from) return;
  if (!into)
    into = from;
  else
    steps.adds.emplace_back(*into, *from);
}

// The additions over n >= 1 terms of torch_cascade or cub_reduce.
AdditionSteps reducer_addition_steps(const Reducer& reducer, size_t n);

}  // namespace fplab::sim
