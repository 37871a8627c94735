// libFuzzer target for --config files (apps/cli_support.hpp, apply_toml_text) applied to the
// options of `fplab train`, the command that takes them. Properties: any text either sets
// options or is refused with a UsageError that starts with the file's name, which one_line makes
// a single line for fplab to print (the TOML parser quotes what it stopped at, a newline
// included; exit code 2); no CLI11 error or other exception escapes the bridge; nothing crashes
// (an empty array for a flag once did).
#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "apps/cli_support.hpp"
#include "apps/commands.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = "fuzz.toml";
  // One command for every input (building it dominated the run time); clear() forgets the
  // results the previous input gave its options, so each input starts from a fresh command line.
  static CLI::App app("fplab");
  static fplab::app::Runner run;
  static CLI::App* const train = [] {
    fplab::app::add_train_command(app, run);
    return app.get_subcommand("train");
  }();
  train->clear();
  try {
    fplab::app::apply_toml_text(train, text, path);
  } catch (const fplab::app::UsageError& e) {
    const std::string message = e.what();
    if (message.rfind(path + ":", 0) != 0) std::abort();
    if (fplab::app::one_line(message).find_first_of("\n\r") != std::string::npos) std::abort();
  }
  return 0;
}
