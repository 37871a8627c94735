#include "models/dropout.hpp"

#include "models/algo_noise.hpp"

namespace fplab::models {

template <class T>
Tensor<T> Dropout<T>::forward(const Tensor<T>& x, Context& ctx) {
  if (!ctx.training || p_ <= 0) return x;
  std::vector<uint8_t> keep(x.size());
  dropout_mask(ctx.algo_seed, ctx.layer, ctx.call, p_, keep);
  const T kept = static_cast<T>(1.0 / (1.0 - p_));
  scale_.resize(x.size());
  Tensor<T> y = x;
  for (size_t i = 0; i < y.size(); ++i) {
    scale_[i] = keep[i] ? kept : T(0);
    y.data[i] *= scale_[i];
  }
  return y;
}

template <class T>
Tensor<T> Dropout<T>::backward(const Tensor<T>& dy, Context& ctx) {
  if (!ctx.training || p_ <= 0) return dy;
  Tensor<T> dx = dy;
  for (size_t i = 0; i < dx.size(); ++i) dx.data[i] *= scale_[i];
  return dx;
}

template class Dropout<float>;
template class Dropout<double>;

}  // namespace fplab::models
