#include "reveal/replay_schedule.hpp"

#include <bit>
#include <random>

#include "reveal/replay_sum.hpp"
#include "sim/reference_evaluator.hpp"

namespace fplab::reveal {
namespace {

std::vector<double> widened(const std::vector<float>& x) { return {x.begin(), x.end()}; }

bool same_bits(double emulated, float real) {
  return std::bit_cast<uint32_t>(static_cast<float>(emulated)) == std::bit_cast<uint32_t>(real);
}

std::vector<ScheduleReplay> start(const std::vector<std::string>& texts, std::vector<sim::Schedule>& parsed) {
  std::vector<ScheduleReplay> out;
  for (const auto& text : texts) {
    parsed.push_back(sim::parse_schedule(text));
    out.push_back({text, 0});
  }
  return out;
}

}  // namespace

std::vector<ScheduleReplay> replay_schedules_sum(const SumFunction& sum, const std::vector<std::string>& schedules,
                                                 size_t n, size_t trials, uint64_t seed) {
  std::vector<sim::Schedule> parsed;
  auto out = start(schedules, parsed);
  const sim::Arithmetic fp32;
  std::mt19937_64 rng(seed);  // the draws of verify_sum
  for (size_t t = 0; t < trials; ++t) {
    const auto x = draw_trial_inputs(rng, n, t);
    const float real = sum(x);
    const auto values = widened(x);
    for (size_t k = 0; k < parsed.size(); ++k)
      out[k].identical += same_bits(sim::reduce_reference(parsed[k], values, fp32), real);
  }
  return out;
}

std::vector<ScheduleReplay> replay_schedules_dot(const DotFunction& dot, const std::vector<std::string>& schedules,
                                                 size_t n, size_t trials, uint64_t seed) {
  std::vector<sim::Schedule> parsed;
  auto out = start(schedules, parsed);
  const sim::Arithmetic fp32;
  std::mt19937_64 rng(seed);  // the draws of verify_dot
  for (size_t t = 0; t < trials; ++t) {
    const auto a = draw_trial_inputs(rng, n, t), b = draw_trial_inputs(rng, n, t + 1);
    const float real = dot(a, b);
    const auto wa = widened(a), wb = widened(b);
    for (size_t k = 0; k < parsed.size(); ++k)
      out[k].identical += same_bits(sim::dot_reference(parsed[k], wa, wb, fp32), real);
  }
  return out;
}

}  // namespace fplab::reveal
