#include "util/file_name.hpp"

#include "util/sha256.hpp"

namespace fplab::util {
namespace {

bool plain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

bool alphanumeric(char c) { return plain_char(c) && c != '.' && c != '_' && c != '-'; }

bool plain_name(std::string_view text) {
  if (text.empty() || text.size() > 64 || !alphanumeric(text.front())) return false;
  for (char c : text)
    if (!plain_char(c)) return false;
  return true;
}

}  // namespace

std::string safe_file_stem(std::string_view text) {
  if (plain_name(text)) return std::string(text);
  std::string_view readable = text;
  if (const size_t slash = readable.find_last_of('/'); slash != std::string_view::npos)
    readable.remove_prefix(slash + 1);
  if (readable.ends_with(".toml")) readable.remove_suffix(5);
  std::string stem;
  for (char c : readable) {
    if (stem.size() == 40) break;
    if (stem.empty() && !alphanumeric(c)) continue;  // no leading dots: no hidden files, no ".."
    stem += plain_char(c) ? c : '_';
  }
  if (stem.empty()) stem = "x";
  return stem + "-" + sha256_hex(text).substr(0, 8);
}

}  // namespace fplab::util
