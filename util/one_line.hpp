// Messages that stay on one line: control characters that user text brought into an error
// message (a file name, a value typed at the prompt) are written as escapes (\n, \t, \xNN), so
// that the command line's "fplab: error: ..." and the Python package's fplab.Error are each one
// line whatever the input.
#pragma once

#include <string>
#include <string_view>

namespace fplab::util {

std::string one_line(std::string_view message);

}  // namespace fplab::util
