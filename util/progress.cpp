#include "util/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace fplab::util {

namespace {

// FPLAB_PROGRESS=all: every update written, at once (the tests' way to see progress whatever the
// machine's speed, and a log's way to keep everything).
bool every_update() {
  const char* value = std::getenv("FPLAB_PROGRESS");
  return value != nullptr && std::string_view(value) == "all";
}

}  // namespace

Progress::Progress(bool enabled, double plain_interval_seconds, double delay_seconds)
    : enabled_(enabled),
      terminal_(isatty(fileno(stderr)) != 0),
      interval_(every_update() ? 0
                : terminal_    ? 0.1
                               : plain_interval_seconds),
      delay_(every_update() ? 0 : delay_seconds),
      started_(clock::now()) {}

Progress::~Progress() { finish(); }

void Progress::clear_line() {
  if (line_length_ == 0) return;
  std::fprintf(stderr, "\r%*s\r", static_cast<int>(line_length_), "");
  line_length_ = 0;
}

void Progress::update(const std::string& text) {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  const auto now = clock::now();
  if (std::chrono::duration<double>(now - started_).count() < delay_) return;
  if (shown_ && std::chrono::duration<double>(now - last_shown_).count() < interval_) return;
  shown_ = true;
  last_shown_ = now;
  if (terminal_) {
    clear_line();
    std::fprintf(stderr, "%s", text.c_str());
    line_length_ = text.size();
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
}

void Progress::note(const std::string& text) {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  clear_line();
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (!enabled_) return;
  std::lock_guard lock(mutex_);
  clear_line();
  std::fflush(stderr);
}

}  // namespace fplab::util
