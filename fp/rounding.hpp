// Rounding modes and the options that go with a rounding.
#pragma once

#include <array>
#include <optional>
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
  // The four options most callers set, in this order ({mode, flush, saturate, &stream}); the rest
  // are named where they are used.
  RoundingOptions() = default;
  RoundingOptions(Mode mode, bool flush_subnormals = false, bool saturate = false, CounterRng* stream = nullptr)
      : mode(mode), flush_subnormals(flush_subnormals), saturate(saturate), stream(stream) {}

  Mode mode = Mode::rne;
  // Results that would be subnormal after rounding become zero of the same sign.
  bool flush_subnormals = false;
  // Finite values that overflow become +-max finite instead of +-inf (or NaN in a format
  // without infinities); an infinite input becomes +-max finite only in formats without
  // infinities.
  bool saturate = false;
  // Stochastic rounding draws one 64-bit number per inexact rounding from this stream.
  // Required when mode == sr and no sr_random is given (rounding throws std::logic_error).
  CounterRng* stream = nullptr;
  // Saturate, and infinite inputs become +-max finite in formats with infinities too (OCP MX's
  // SAT conversions, PTX cvt's .satfinite, gfloat's sat=True). NaN stays NaN.
  bool saturate_infinities = false;
  // Stochastic rounding with R = sr_bits random bits (1..64), as hardware does it: the dropped
  // part of the significand, truncated to its R leading bits, is added to R random bits, and a
  // carry out rounds up. R = 64 is the finest resolution the stream gives.
  int sr_bits = 64;
  // Caller-supplied random bits for that addition (its low sr_bits bits are used) instead of a
  // draw from the stream: for replaying hardware whose random bits are known (cvt.rs's rbits).
  std::optional<uint64_t> sr_random;

  // Whether overflow saturates (either saturation option asks for it).
  bool saturates() const { return saturate || saturate_infinities; }
};

}  // namespace fplab::fp
