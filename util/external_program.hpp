// Starting another program (Graphviz, gnuplot) without a shell: the program is looked up on
// PATH and given its arguments as a vector, so no text of the user's is ever parsed by a shell.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace fplab::util {

struct ProgramResult {
  int exit_status = -1;  // the program's exit code; -1 if it was killed by a signal
  std::string output;    // what it wrote to stdout and stderr, cut after 64 KiB
};

// Thrown when the program cannot be started at all (not installed, not executable).
struct ProgramNotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs `program` with `arguments` (argv[1...]) in `working_folder` (the caller's when empty),
// standard input from /dev/null, and waits for it. Never involves /bin/sh.
ProgramResult run_program(const std::string& program, const std::vector<std::string>& arguments,
                          const std::string& working_folder = "");

// Whether `program` can be found on PATH as an executable file.
bool program_on_path(const std::string& program);

}  // namespace fplab::util
