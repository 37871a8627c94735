// A dense row-major array with a shape: all a layer needs, nothing more.
#pragma once

#include <cstddef>
#include <numeric>
#include <vector>

namespace fplab::models {

template <class T>
struct Tensor {
  std::vector<size_t> shape;
  std::vector<T> data;

  Tensor() = default;
  explicit Tensor(std::vector<size_t> s, T fill = T(0)) : shape(std::move(s)), data(count(shape), fill) {}

  static size_t count(const std::vector<size_t>& s) {
    return std::accumulate(s.begin(), s.end(), size_t{1}, std::multiplies<>());
  }
  size_t size() const { return data.size(); }
  size_t dim(size_t i) const { return shape[i]; }
  T* ptr() { return data.data(); }
  const T* ptr() const { return data.data(); }
};

}  // namespace fplab::models
