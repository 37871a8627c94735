#include "apps/cli_support.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>

#include "util/toml_text.hpp"
#include "util/whole_file.hpp"

namespace fplab::app {

std::vector<std::string> read_number_texts(const std::vector<std::string>& arguments, const std::string& file,
                                           const std::string& option) {
  std::vector<std::string> texts = arguments;
  if (!file.empty()) {
    std::ifstream stream;
    std::istream* in = &std::cin;
    if (file != "-") {
      // An ifstream opens a folder without complaint and then reads nothing.
      std::error_code ignored;
      if (std::filesystem::is_directory(file, ignored))
        throw UsageError(option + " '" + file + "' is a folder, not a file of numbers");
      stream.open(file);
      if (!stream) throw UsageError("cannot read " + option + " file '" + file + "'");
      in = &stream;
    }
    std::string line;
    while (std::getline(*in, line)) {
      const auto first = line.find_first_not_of(" \t\r");
      if (first == std::string::npos || line[first] == '#') continue;
      const auto last = line.find_last_not_of(" \t\r");
      texts.push_back(line.substr(first, last - first + 1));
    }
  }
  if (texts.empty() && option != "--file") throw UsageError(option + " '" + file + "' holds no numbers");
  if (texts.empty())
    throw UsageError("no numbers given (pass them as arguments, or --file PATH, or --file - for stdin)");
  return texts;
}

nlohmann::json json_number(double value) {
  if (std::isfinite(value)) return value;
  return nullptr;
}

void print_json(const nlohmann::json& document) { std::cout << document.dump(2) << '\n'; }

void apply_toml_config(CLI::App* command, const std::string& path) {
  apply_toml_text(command, util::read_text_file(path), path);
}

void apply_toml_text(CLI::App* command, std::string_view text, const std::string& path) {
  const toml::table doc = util::parse_toml<UsageError>(text, path);
  for (const auto& [key, node] : doc) {
    // Keys are spelled as in experiment files (train_subset); the option's own spelling
    // (train-subset) is accepted too.
    std::string name(key.str());
    std::replace(name.begin(), name.end(), '_', '-');
    const std::string where = path + ":" + std::to_string(node.source().begin.line);
    CLI::Option* option = command->get_option_no_throw("--" + name);
    if (option == nullptr || name == "config")
      throw UsageError(where + ": unknown key '" + std::string(key.str()) +
                       "' (keys are the long option names of 'fplab " + command->get_name() + " --help')");
    if (option->count() > 0) continue;  // given on the command line: it wins
    auto text = [&](const toml::node& v) -> std::string {
      if (auto s = v.as_string()) return s->get();
      if (auto i = v.as_integer()) return std::to_string(i->get());
      if (auto f = v.as_floating_point()) {
        std::ostringstream out;
        out.precision(17);
        out << f->get();
        return out.str();
      }
      if (auto b = v.as_boolean()) return b->get() ? "true" : "false";
      throw UsageError(where + ": key '" + name + "' must be a string, number, boolean or array of them");
    };
    if (const auto* array = node.as_array()) {
      // An empty array gives the option no value at all, which CLI11's callbacks do not expect
      // (a flag's reads its first result): refused, like every other key that cannot be applied.
      if (array->empty())
        throw UsageError(where + ": key '" + name + "' is an empty array (give a value, or leave the key out)");
      for (const auto& element : *array) option->add_result(text(element));
    } else
      option->add_result(text(node));
    try {
      option->run_callback();
    } catch (const CLI::Error& e) {
      throw UsageError(where + ": key '" + name + "': " + e.what());
    }
  }
}

const CLI::Validator& whole_number() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || error != std::errc() || end != text.data() + text.size())
          return "'" + text + "' is not a whole number from 0 to 18446744073709551615";
        return "";
      },
      "UINT");
  return validator;
}

void add_profiles_dir_option(CLI::App* command, std::vector<std::string>& folders) {
  command
      ->add_option("--profiles-dir", folders,
                   "a folder of your own hardware profiles, searched by name before the shipped ones (repeatable)")
      ->check(CLI::ExistingDirectory);
}

std::string bits_hex(uint64_t bits, int width_bits) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "0x%0*llx", (width_bits + 3) / 4, static_cast<unsigned long long>(bits));
  return buffer;
}

std::string shell_command_line(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    const std::string word = argv[i];
    const bool plain = !word.empty() && word.find_first_not_of(
                                            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                            "0123456789_-+=.,/:@%") == std::string::npos;
    if (i) line += ' ';
    if (plain) {
      line += word;
      continue;
    }
    line += '\'';  // single quotes take everything literally but a single quote: close, escape, reopen
    for (char c : word) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

}  // namespace fplab::app
