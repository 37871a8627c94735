// The schedules a revealed tree was named by, run through fplab's own evaluator against the
// function on the trial inputs of --verify. A tree says only the order; a schedule also says where
// the arithmetic changes (a stage's @FORMAT: OpenBLAS's fp64 tail), so a function no single
// arithmetic of replay_sum.hpp replays can still be replayed by its schedule, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reveal/probe_sum.hpp"

namespace fplab::reveal {

struct ScheduleReplay {
  std::string schedule;
  size_t identical = 0;  // trials where sim::reduce_reference / dot_reference had the function's bits
};

// Each schedule evaluated in fp32, round to nearest even, products fused (the default arithmetic
// of `fplab dot`; a stage's @FORMAT overrides it there), on the inputs verify_sum / verify_dot
// draw for the same n, trials and seed.
std::vector<ScheduleReplay> replay_schedules_sum(const SumFunction& sum, const std::vector<std::string>& schedules,
                                                 size_t n, size_t trials, uint64_t seed);
std::vector<ScheduleReplay> replay_schedules_dot(const DotFunction& dot, const std::vector<std::string>& schedules,
                                                 size_t n, size_t trials, uint64_t seed);

}  // namespace fplab::reveal
