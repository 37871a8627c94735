// libFuzzer target for hardware-profile files (profiles/hw_profile.hpp, parse_hw_profile): any
// text is either a profile or refused with a message that starts with the file's name (the
// contract of load_hw_profile; fplab prints it as one line through apps/cli_support.hpp's one_line).
// Nothing escapes but std::exception; nothing crashes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>

#include "profiles/hw_profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = "fuzz.toml";
  try {
    const auto profile = fplab::profiles::parse_hw_profile(text, path);
    if (profile.path != path) std::abort();
  } catch (const std::exception& e) {
    const std::string message = e.what();
    if (message.rfind(path + ":", 0) != 0) std::abort();
  }
  return 0;
}
