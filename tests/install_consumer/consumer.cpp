// Uses three of an installed fplab's layers: a rounding (fp), a summation order (sim) and a
// shipped hardware profile (profiles). Prints one line the check compares.
#include <cstdio>
#include <vector>

#include "fp/format.hpp"
#include "fp/round.hpp"
#include "profiles/hw_profile.hpp"
#include "sim/engine.hpp"
#include "sim/schedule.hpp"

int main() {
  using namespace fplab;
  // 1/3 to bf16 (round to nearest even): 0x3eab, i.e. 0.333984375.
  const fp::Rounded third = fp::round_double(1.0 / 3.0, fp::bf16(), fp::RoundingOptions{});
  // 2^-24 + 2^-24 + 1 in fp32: in order the small terms meet first and survive; in reverse each
  // is lost against 1.
  const std::vector<double> values = {0x1p-24, 0x1p-24, 1.0};
  const sim::Arithmetic fp32;
  const double forward = sim::reduce(sim::parse_schedule("seq"), values, fp32);
  const double reverse = sim::reduce(sim::parse_schedule("rev"), values, fp32);
  const profiles::HardwareProfile h100 = profiles::find_hw_profile("h100");
  std::printf("bf16(1/3)=%a seq=%a rev=%a profile=%s\n", third.value, forward, reverse, h100.name.c_str());
  return 0;
}
