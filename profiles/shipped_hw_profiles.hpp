// The profiles of profiles/shipped/, compiled into the program: a binary moved to another machine or
// installed anywhere still knows every shipped profile by name (the files are read at build
// time; models/CMakeLists.txt regenerates them when one changes).
#pragma once

#include <span>
#include <string_view>

namespace fplab::profiles {

struct ShippedProfile {
  std::string_view name;  // the file's stem, e.g. "h100"
  std::string_view text;  // the whole TOML file
};

// Sorted by name.
std::span<const ShippedProfile> shipped_hw_profiles();

}  // namespace fplab::profiles
