// Running a Python interpreter as an oracle (NumPy, gfloat): the last line it prints.
#pragma once

#include <exception>
#include <string>
#include <vector>

#include "util/external_program.hpp"

namespace fplab::test {

// The last line the interpreter prints running `code` with `arguments` (sys.argv[1:]), or "" when
// it cannot start or fails. No shell: util::run_program passes an argument vector.
inline std::string python_output(const std::string& python, const std::string& code,
                                 const std::vector<std::string>& arguments = {}) {
  std::vector<std::string> argv = {"-c", code};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  util::ProgramResult result;
  try {
    result = util::run_program(python, argv);
  } catch (const std::exception&) {
    return "";
  }
  if (result.exit_status != 0) return "";
  std::string text = result.output;  // stdout and stderr together: a warning may precede the line
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.substr(text.find_last_of('\n') + 1);
}

}  // namespace fplab::test
