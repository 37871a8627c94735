#include "apps/cli_support.hpp"

#include <toml++/toml.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <iostream>

namespace fplab::app {

std::vector<std::string> read_number_texts(const std::vector<std::string>& arguments, const std::string& file) {
  std::vector<std::string> texts = arguments;
  if (!file.empty()) {
    std::ifstream stream;
    std::istream* in = &std::cin;
    if (file != "-") {
      stream.open(file);
      if (!stream) throw UsageError("cannot read file '" + file + "'");
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
  if (texts.empty()) throw UsageError("no numbers given (pass them as arguments, or --file PATH, or --file - for stdin)");
  return texts;
}

std::string one_line(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else out += c;
  }
  return out;
}

nlohmann::json json_number(double value) {
  if (std::isfinite(value)) return value;
  return nullptr;
}

void print_json(const nlohmann::json& document) { std::cout << document.dump(2) << '\n'; }

void apply_toml_config(CLI::App* command, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot read the config file");
  std::ostringstream text;
  text << in.rdbuf();
  apply_toml_text(command, text.str(), path);
}

void apply_toml_text(CLI::App* command, std::string_view text, const std::string& path) {
  toml::table doc;
  try {
    doc = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw UsageError(path + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  for (const auto& [key, node] : doc) {
    const std::string name(key.str());
    const std::string where = path + ":" + std::to_string(node.source().begin.line);
    CLI::Option* option = command->get_option_no_throw("--" + name);
    if (option == nullptr || name == "config")
      throw UsageError(where + ": unknown key '" + name + "' (keys are the long option names of 'fplab " +
                       command->get_name() + " --help')");
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

std::string bits_hex(uint64_t bits, int width_bits) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "0x%0*llx", (width_bits + 3) / 4, static_cast<unsigned long long>(bits));
  return buffer;
}

}  // namespace fplab::app
