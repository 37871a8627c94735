// How tools/gpu/'s programs start on a machine: the device they will measure, or a SKIPPED line
// and exit status 0 where there is none (scripts/gpu-check and CI alike read that as "nothing to
// run here"), and the date their headers and JSON carry.
#pragma once

#include <cstdio>
#include <ctime>
#include <optional>
#include <string>

#include "sim/cuda/gpu_device.hpp"

namespace fplab::tools::gpu {

// The device, after printing "device: ..." (and "date: DATE" when `date` is given); none, after
// printing "SKIPPED: why", where no CUDA device can be used.
inline std::optional<sim::gpu::DeviceInfo> device_or_skip(const std::string* date = nullptr) {
  std::string why;
  if (!sim::gpu::device_available(&why)) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return std::nullopt;
  }
  sim::gpu::DeviceInfo info = sim::gpu::device_info();
  std::printf("device: %s\n", info.describe().c_str());
  if (date) std::printf("date: %s\n", date->c_str());
  return info;
}

// Now, as "YYYY-MM-DD HH:MM UTC".
inline std::string utc_now() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return text;
}

}  // namespace fplab::tools::gpu
