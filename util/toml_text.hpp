// TOML text parsed with toml++, a syntax error reported as one line "<path>:<line>: <what>" in
// the caller's own exception type (a profile's, an experiment's, a --config file's), which the
// command line prints as it is. Shared by every reader of TOML files.
#pragma once

#include <string>
#include <string_view>
#include <toml++/toml.h>

namespace fplab::util {

template <class Error>
toml::table parse_toml(std::string_view text, const std::string& path) {
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw Error(path + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
}

}  // namespace fplab::util
