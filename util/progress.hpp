// Progress of long work, on stderr, the same way in every command.
//
// On a terminal one line is rewritten in place (carriage return) a few times a second. Anywhere
// else (a log file, a pipe, CI) carriage returns would pile up into one unreadable line, so
// whole lines are written instead, at most one per `plain_interval_seconds`. Work that ends
// within `delay_seconds` shows no progress at all, so quick commands stay quiet. With the
// environment variable FPLAB_PROGRESS=all every update is written at once (tests, full logs).
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace fplab::util {

class Progress {
 public:
  explicit Progress(bool enabled = true, double plain_interval_seconds = 10, double delay_seconds = 1);
  ~Progress();  // finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // The current state ("epoch 1: 35%"): shown if the rate allows, otherwise dropped.
  void update(const std::string& text);
  // A line that stays (an epoch's summary): always written, whatever the rate.
  void note(const std::string& text);
  // Clears the in-place line, so that what follows starts on a clean line.
  void finish();

  bool terminal() const { return terminal_; }

 private:
  using clock = std::chrono::steady_clock;
  void clear_line();  // caller holds mutex_

  bool enabled_, terminal_;
  double interval_, delay_;
  clock::time_point started_, last_shown_;
  bool shown_ = false;      // some update was written
  size_t line_length_ = 0;  // of the in-place line now on the terminal (0: none)
  std::mutex mutex_;        // updates may come from worker threads
};

}  // namespace fplab::util
