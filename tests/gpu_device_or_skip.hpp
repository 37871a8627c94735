// The GPU tests' one rule for a machine without a usable CUDA device: the GPU cases log
// "SKIPPED: <why>" once per case and pass (the CPU suite and CI run them that way).
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "sim/cuda/gpu_device.hpp"

namespace fplab::test {

inline bool have_device() {
  static std::string why;
  static const bool available = sim::gpu::device_available(&why);
  if (!available) WARN("SKIPPED: " << why);
  return available;
}

}  // namespace fplab::test
