// The option conventions of tools/gpu/'s programs, as fplab's own: CLI11, `--help` with examples,
// a bad option or value is one line on stderr and exit status 2.
#pragma once

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

namespace fplab::tools::gpu {

// Parses argv into `app`. Returns -1 to go on, else the exit status (0 after --help, 2 on an error).
inline int parse_options(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s (see %s --help)\n", app.get_name().c_str(), e.what(), app.get_name().c_str());
    return 2;
  }
  return -1;
}

}  // namespace fplab::tools::gpu
