// Numbers as people type them (decimal, hex-float, inf, nan) to exact values, and doubles
// back to the shortest text that reads back identically.
//
// A decimal like 0.1 is not a double; rounding it to bf16 through a double would round twice.
// parse_number() therefore keeps 64 significant bits and a sticky bit (MPFR reads the text
// with rounding toward zero and reports whether anything was lost), which is exactly what
// round_exact() needs to round the typed number once.
#pragma once

#include <string>
#include <string_view>

#include "fp/exact_value.hpp"

namespace fplab::fp {

// Throws FormatError("cannot read 'TEXT' as a number") on anything but a whole number.
ExactValue parse_number(std::string_view text);
// The typed number rounded to the nearest double (ties to even).
double parse_double(std::string_view text);
// value - (the number TEXT), to about 1e-30 relative accuracy, as a double.
double difference_from_text(double value, std::string_view text);

// Shortest decimal that reads back as the same double; "inf", "-inf", "nan", "-nan" otherwise.
std::string format_double(double value);
// C99 hex-float text of a double, e.g. 0x1.99999ap-4.
std::string format_hex(double value);

}  // namespace fplab::fp
