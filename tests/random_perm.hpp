// A seeded random lane permutation for perm(...) stages (1 to max_lanes lanes), for the tests that
// build random schedules with them (test_schedule_grammar, test_schedule_lanes).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace fplab::test {

inline std::vector<int64_t> random_perm(std::mt19937_64& g, size_t max_lanes) {
  std::vector<int64_t> perm(1 + g() % max_lanes);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), g);
  return perm;
}

}  // namespace fplab::test
