#include "apps/cli_support.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
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

nlohmann::json json_number(double value) {
  if (std::isfinite(value)) return value;
  return nullptr;
}

void print_json(const nlohmann::json& document) { std::cout << document.dump(2) << '\n'; }

std::string bits_hex(uint64_t bits, int width_bits) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "0x%0*llx", (width_bits + 3) / 4, static_cast<unsigned long long>(bits));
  return buffer;
}

}  // namespace fplab::app
