// Which fplab this is: the project version from CMake and, where the source is a git checkout,
// `git describe` at configure time (scripts/setup configures on every run, so it stays current
// there; a build that is only rebuilt keeps the description of its last configure).
#pragma once

#include <string>

namespace fplab::util {

// "0.1.0" alone, or "0.1.0 (git 66cfd39-dirty)".
std::string version();

}  // namespace fplab::util
