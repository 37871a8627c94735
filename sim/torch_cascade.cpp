#include "sim/torch_cascade.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <optional>
#include <stdexcept>
#include <string>

namespace fplab::sim {
namespace {

// An accumulator of each lane: the slot holding its running sum, or none before its first term
// (where torch holds +0).
using Lanes = std::vector<std::optional<int32_t>>;

class Cascade {
 public:
  Cascade(int lanes, AdditionSteps& steps) : lanes_(lanes), steps_(steps) {}

  // The sum of `count` elements, element e being lanes [e * lanes_, e * lanes_ + lanes_) of the
  // terms: ATen's row_sum with its four-way interleave.
  Lanes row_sum(int64_t count) {
    constexpr int64_t kInterleave = 4;
    const int64_t rows = count / kInterleave;
    std::array<Lanes, kInterleave> partial = multi_row_sum(rows);
    for (int64_t e = rows * kInterleave; e < count; ++e) add(partial[0], element(e));
    for (int64_t k = 1; k < kInterleave; ++k) add(partial[0], partial[k]);
    return partial[0];
  }

  void add(std::optional<int32_t>& into, const std::optional<int32_t>& from) { add_slot(steps_, into, from); }

 private:
  Lanes element(int64_t e) const {
    Lanes v(static_cast<size_t>(lanes_));
    for (int l = 0; l < lanes_; ++l) v[static_cast<size_t>(l)] = static_cast<int32_t>(e * lanes_ + l);
    return v;
  }
  Lanes empty() const { return Lanes(static_cast<size_t>(lanes_)); }
  void add(Lanes& into, const Lanes& from) {
    for (size_t l = 0; l < into.size(); ++l) add(into[l], from[l]);
  }

  // ATen's multi_row_sum over `rows` rows of four elements (row r: elements 4r .. 4r + 3).
  std::array<Lanes, 4> multi_row_sum(int64_t rows) {
    constexpr int kLevels = 4, kColumns = 4;
    const int64_t ceil_log2 = rows <= 2 ? 1 : std::bit_width(static_cast<uint64_t>(rows) - 1);
    const int64_t power = std::max<int64_t>(4, ceil_log2 / kLevels);
    const int64_t step = int64_t{1} << power, mask = step - 1;
    std::array<std::array<Lanes, kColumns>, kLevels> acc;
    for (auto& level : acc) level.fill(empty());
    int64_t i = 0;
    while (i + step <= rows) {
      for (int64_t j = 0; j < step; ++j, ++i)
        for (int k = 0; k < kColumns; ++k) add(acc[0][k], element(i * kColumns + k));
      for (int j = 1; j < kLevels; ++j) {
        for (int k = 0; k < kColumns; ++k) {
          add(acc[j][k], acc[j - 1][k]);
          acc[j - 1][k] = empty();
        }
        if ((i & (mask << (j * power))) != 0) break;
      }
    }
    for (; i < rows; ++i)
      for (int k = 0; k < kColumns; ++k) add(acc[0][k], element(i * kColumns + k));
    for (int j = 1; j < kLevels; ++j)
      for (int k = 0; k < kColumns; ++k) add(acc[0][k], acc[j][k]);
    return acc[0];
  }

  int lanes_;
  AdditionSteps& steps_;
};

}  // namespace

AdditionSteps torch_cascade_steps(size_t n, int lanes) {
  if (n == 0 || lanes < 1) throw std::invalid_argument("torch_cascade_steps: at least one term and one lane");
  if (n > static_cast<size_t>(INT32_MAX)) throw std::invalid_argument("torch_cascade_steps: more than 2^31 - 1 terms");
  AdditionSteps steps;
  steps.adds.reserve(n);
  const auto count = static_cast<int64_t>(n);
  if (count < lanes) {  // ATen's scalar loop: the same cascade over single terms
    Cascade scalar(1, steps);
    steps.result = *scalar.row_sum(count)[0];
    return steps;
  }
  Cascade vectors(lanes, steps);
  const int64_t whole = count / lanes;
  const Lanes sums = vectors.row_sum(whole);
  std::optional<int32_t> final_sum;
  for (int64_t t = whole * lanes; t < count; ++t) vectors.add(final_sum, static_cast<int32_t>(t));
  for (const auto& lane : sums) vectors.add(final_sum, lane);
  steps.result = *final_sum;
  return steps;
}

}  // namespace fplab::sim
