#include "reveal/shared_function.hpp"

#include <dlfcn.h>

namespace fplab::reveal {

SharedFunction::SharedFunction(const std::string& library, const std::string& symbol) {
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    throw RevealError("cannot load " + library + ": " + (why ? why : "unknown reason"));
  }
  handle_ = std::shared_ptr<void>(h, [](void* p) { dlclose(p); });
  dlerror();
  symbol_ = dlsym(h, symbol.c_str());
  if (!symbol_) {
    const char* why = dlerror();
    throw RevealError("no symbol " + symbol + " in " + library + (why ? std::string(": ") + why : ""));
  }
}

SumFunction SharedFunction::as_sum() const {
  using Sum = float (*)(const float*, size_t);
  const auto f = reinterpret_cast<Sum>(symbol_);
  return [f, keep = handle_](std::span<const float> x) { return f(x.data(), x.size()); };
}

DotFunction SharedFunction::as_dot() const {
  using Dot = float (*)(const float*, const float*, size_t);
  const auto f = reinterpret_cast<Dot>(symbol_);
  return [f, keep = handle_](std::span<const float> a, std::span<const float> b) {
    return f(a.data(), b.data(), a.size());
  };
}

}  // namespace fplab::reveal
