// What every fplab command shares: reading numbers, printing JSON, and the error contract
// (one line on stderr, exit code 2).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "util/one_line.hpp"

namespace fplab::app {

// Bad input from the user: reported as one line, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An error message as one line (util/one_line.hpp).
using util::one_line;

// Numbers from the command line, or one per line from a file ("-" is stdin); blank lines and
// lines starting with '#' are skipped. Throws UsageError when nothing is left or a file
// cannot be read, naming the file by `option` (the option that gave it).
std::vector<std::string> read_number_texts(const std::vector<std::string>& arguments, const std::string& file,
                                           const std::string& option = "--file");

// A double as JSON: a number when finite, null otherwise (the *_text fields carry inf/nan).
nlohmann::json json_number(double value);
void print_json(const nlohmann::json& document);

// Applies a TOML file of `long-option-name = value` pairs to a command's options, except those
// given on the command line (flags override the file). Arrays give several values; booleans set
// flags. Unknown keys, empty arrays and unreadable files: UsageError naming the file, line and key.
void apply_toml_config(CLI::App* command, const std::string& path);
// The same on a config file's text; `path` names it in errors (the fuzz harness's entry point).
void apply_toml_text(CLI::App* command, std::string_view text, const std::string& path);

// For every option held in an unsigned integer (seeds, sizes, counts): CLI11 itself wraps "-1"
// to 2^64-1 and saturates numbers past it; this refuses both, and anything but decimal digits.
const CLI::Validator& whole_number();

// --profiles-dir FOLDER (repeatable): the user's folders of hardware profiles, searched before
// $FPLAB_HW_PROFILES and the shipped profiles (profiles/hw_profile.hpp).
void add_profiles_dir_option(CLI::App* command, std::vector<std::string>& folders);

// argv as one line that a POSIX shell reads back as the same words (arguments quoted where needed).
std::string shell_command_line(int argc, char** argv);

// "0x3f80"-style hex of a format's bit pattern, zero-padded to the format's width.
std::string bits_hex(uint64_t bits, int width_bits);

}  // namespace fplab::app
