// Rounding modes and the options that go with a rounding.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "fp/counter_rng.hpp"

namespace fplab::fp {

enum class Mode : uint8_t {
  rne,  // nearest, ties to even
  rna,  // nearest, ties away from zero
  rz,   // toward zero (truncation)
  ru,   // toward +inf
  rd,   // toward -inf
  ro,   // to odd: inexact results take the neighbour whose last bit is 1
  sr,   // stochastic: up with probability equal to the distance from the lower neighbour
};

inline constexpr std::array<Mode, 7> all_modes = {Mode::rne, Mode::rna, Mode::rz, Mode::ru,
                                                  Mode::rd,  Mode::ro,  Mode::sr};

std::string_view mode_name(Mode mode);
// Throws FormatError (from format.hpp) naming the bad token.
Mode parse_mode(std::string_view text);

struct RoundingOptions {
  Mode mode = Mode::rne;
  // Results that would be subnormal after rounding become zero of the same sign.
  bool flush_subnormals = false;
  // Finite values that overflow become +-max finite instead of +-inf (or NaN in a format
  // without infinities); an infinite input becomes +-max finite only in formats without
  // infinities.
  bool saturate = false;
  // Stochastic rounding draws one 64-bit number per inexact rounding from this stream.
  // Required when mode == sr (rounding throws std::logic_error without it).
  CounterRng* stream = nullptr;
};

}  // namespace fplab::fp
