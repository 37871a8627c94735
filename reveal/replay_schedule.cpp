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

// Each schedule's count of trials whose value (`evaluate(schedule, a, b)`, b empty for a sum)
// has the function's bits (`real(a, b)`), on the inputs verify_sum / verify_dot draw.
template <class Real, class Evaluate>
std::vector<ScheduleReplay> replay(const std::vector<std::string>& texts, size_t n, size_t trials, uint64_t seed,
                                   bool dot, Real real, Evaluate evaluate) {
  std::vector<sim::Schedule> parsed;
  std::vector<ScheduleReplay> out;
  for (const auto& text : texts) {
    parsed.push_back(sim::parse_schedule(text));
    out.push_back({text, 0});
  }
  std::mt19937_64 rng(seed);
  for (size_t t = 0; t < trials; ++t) {
    const auto a = draw_trial_inputs(rng, n, t);
    const auto b = dot ? draw_trial_inputs(rng, n, t + 1) : std::vector<float>{};
    const float bits = real(a, b);
    const auto wa = widened(a), wb = widened(b);
    for (size_t k = 0; k < parsed.size(); ++k) out[k].identical += same_bits(evaluate(parsed[k], wa, wb), bits);
  }
  return out;
}

}  // namespace

std::vector<ScheduleReplay> replay_schedules_sum(const SumFunction& sum, const std::vector<std::string>& schedules,
                                                 size_t n, size_t trials, uint64_t seed) {
  return replay(
      schedules, n, trials, seed, false, [&](const auto& a, const auto&) { return sum(a); },
      [](const sim::Schedule& s, const auto& a, const auto&) { return sim::reduce_reference(s, a, sim::Arithmetic{}); });
}

std::vector<ScheduleReplay> replay_schedules_dot(const DotFunction& dot, const std::vector<std::string>& schedules,
                                                 size_t n, size_t trials, uint64_t seed) {
  return replay(
      schedules, n, trials, seed, true, [&](const auto& a, const auto& b) { return dot(a, b); },
      [](const sim::Schedule& s, const auto& a, const auto& b) { return sim::dot_reference(s, a, b, sim::Arithmetic{}); });
}

}  // namespace fplab::reveal
