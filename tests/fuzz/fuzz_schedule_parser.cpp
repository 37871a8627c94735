// libFuzzer target for the schedule parser. Properties: whatever parses prints canonically and
// parses back to the same schedule; whatever does not parse is refused with a ScheduleError
// whose position lies inside the input; nothing else ever escapes (no crash, no other throw).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sim/schedule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fplab::sim::Schedule schedule;
  try {
    schedule = fplab::sim::parse_schedule(text);
  } catch (const fplab::sim::ScheduleError& e) {
    if (e.position > text.size()) std::abort();
    return 0;
  }
  const std::string canonical = fplab::sim::to_string(schedule);
  const fplab::sim::Schedule again = fplab::sim::parse_schedule(canonical);
  if (!(again == schedule) || fplab::sim::to_string(again) != canonical) std::abort();
  return 0;
}
