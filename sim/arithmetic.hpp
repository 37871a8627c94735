// The arithmetic of a reduction, separate from its order: the accumulation format and
// rounding of every addition, and how products enter (exact, rounded first, or fused).
#pragma once

#include <string>
#include <string_view>

#include "fp/format.hpp"
#include "fp/rounding.hpp"

namespace fplab::sim {

enum class Products : uint8_t {
  exact,    // a product is exact until the addition that consumes it rounds (one rounding)
  rounded,  // every product is rounded to the format first, then added (no FMA)
  fused,    // FMA: a product is consumed exactly by an addition with a rounded value; when two
            // products meet (tree leaves), the left one is rounded first
};

std::string_view products_name(Products p);
Products parse_products(std::string_view text);  // throws fp::FormatError

struct Arithmetic {
  fp::Format format = fp::fp32();
  fp::Mode mode = fp::Mode::rne;
  bool flush_subnormals = false;
  bool saturate = false;
  Products products = Products::fused;
  // Random bits per stochastic rounding (fp::RoundingOptions::sr_bits): 64, or the few that
  // hardware SR units use.
  int sr_bits = 64;

  // The options every rounding of this arithmetic uses, drawing from `stream` in sr.
  fp::RoundingOptions rounding(fp::CounterRng* stream) const {
    fp::RoundingOptions o{mode, flush_subnormals, saturate, stream};
    o.sr_bits = sr_bits;
    return o;
  }

  // True when every addition is IEEE binary32 or binary64 round-to-nearest with subnormals,
  // i.e. what the host's own float/double arithmetic computes.
  bool native_float() const;
  bool native_double() const;
  std::string to_string() const;  // "fp32/rne/fused"
};

}  // namespace fplab::sim
