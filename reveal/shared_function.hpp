// A C function in a shared library, as the black box fplab reveal probes:
//   float NAME(const float* x, size_t n)                      (a sum)
//   float NAME(const float* a, const float* b, size_t n)      (a dot product)
// The library stays loaded while the object lives. Loading runs the library's initialisers: only
// libraries one trusts belong here (fplab reveal says so in its help).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "reveal/probe_sum.hpp"
#include "reveal/replay_sum.hpp"

namespace fplab::reveal {

class SharedFunction {
 public:
  // Throws RevealError (one line, with dlerror's reason) if the library or symbol is missing.
  SharedFunction(const std::string& library, const std::string& symbol);
  SumFunction as_sum() const;
  DotFunction as_dot() const;

 private:
  std::shared_ptr<void> handle_;
  void* symbol_ = nullptr;
};

}  // namespace fplab::reveal
