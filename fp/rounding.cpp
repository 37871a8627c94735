#include "fp/rounding.hpp"

#include <string>

#include "fp/format.hpp"

namespace fplab::fp {

std::string_view mode_name(Mode mode) {
  switch (mode) {
    case Mode::rne:
      return "rne";
    case Mode::rna:
      return "rna";
    case Mode::rz:
      return "rz";
    case Mode::ru:
      return "ru";
    case Mode::rd:
      return "rd";
    case Mode::ro:
      return "ro";
    case Mode::sr:
      return "sr";
  }
  return "?";
}

Mode parse_mode(std::string_view text) {
  for (Mode mode : all_modes)
    if (text == mode_name(mode)) return mode;
  throw FormatError("unknown rounding mode '" + std::string(text) + "' (known: rne, rna, rz, ru, rd, ro, sr)");
}

}  // namespace fplab::fp
