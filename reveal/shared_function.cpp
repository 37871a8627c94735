#include "reveal/shared_function.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <vector>

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

DotFunction SharedFunction::as_cblas_sdot() const {
  using Sdot = float (*)(int, const float*, int, const float*, int);
  const auto f = reinterpret_cast<Sdot>(symbol_);
  return [f, keep = handle_](std::span<const float> a, std::span<const float> b) {
    if (a.size() > static_cast<size_t>(INT_MAX)) throw RevealError("cblas_sdot takes at most 2^31 - 1 terms");
    return f(static_cast<int>(a.size()), a.data(), 1, b.data(), 1);
  };
}

DotFunction SharedFunction::as_cblas_sgemm(size_t rows, size_t cols) const {
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
  constexpr int kRowMajor = 101, kNoTrans = 111;  // CBLAS_ORDER and CBLAS_TRANSPOSE, as cblas.h numbers them
  if (rows == 0 || cols == 0 || rows > 4096 || cols > 4096)
    throw RevealError("a cblas_sgemm probe takes 1 to 4096 rows and columns");
  const auto f = reinterpret_cast<Sgemm>(symbol_);
  // The matrices outlive each call: only A's row 0 and B's column 0 change between calls.
  struct Matrices {
    size_t k = 0;
    std::vector<float> a, b, c;
  };
  auto m = std::make_shared<Matrices>();
  return [f, keep = handle_, m, rows, cols](std::span<const float> x, std::span<const float> y) {
    const size_t k = x.size();
    if (rows * k > static_cast<size_t>(INT_MAX) || k * cols > static_cast<size_t>(INT_MAX))
      throw RevealError("a cblas_sgemm probe past 2^31 - 1 entries");
    if (m->k != k) {
      m->k = k;
      m->a.assign(rows * k, 0.0f);
      m->b.assign(k * cols, 0.0f);
      m->c.assign(rows * cols, 0.0f);
    }
    std::copy(x.begin(), x.end(), m->a.begin());
    for (size_t t = 0; t < k; ++t) m->b[t * cols] = y[t];
    const int ki = static_cast<int>(k), ri = static_cast<int>(rows), ci = static_cast<int>(cols);
    f(kRowMajor, kNoTrans, kNoTrans, ri, ci, ki, 1.0f, m->a.data(), ki, m->b.data(), ci, 0.0f, m->c.data(), ci);
    return m->c[0];
  };
}

}  // namespace fplab::reveal
