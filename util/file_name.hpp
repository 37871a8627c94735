// Names from user text (an experiment's `name`, a profile given by path) made into one safe
// file-name component, so that no such text can put a file outside the output folder.
#pragma once

#include <string>
#include <string_view>

namespace fplab::util {

// `text` itself when it is already a plain name (1-64 of [A-Za-z0-9._-], starting with a letter
// or digit); otherwise a readable stem of it (its last path component without ".toml", other
// characters as '_', at most 40 of them) followed by '-' and 8 hex digits of its SHA-256, so that
// two different texts never share a stem. Never empty, never "." or "..", never holds '/'.
std::string safe_file_stem(std::string_view text);

}  // namespace fplab::util
