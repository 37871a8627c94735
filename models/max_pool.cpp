#include "models/max_pool.hpp"

namespace fplab::models {

template <class T>
Tensor<T> MaxPool2d<T>::forward(const Tensor<T>& x, Context& ctx) {
  const auto shape = output_shape(x.shape);
  if (shape == x.shape) {
    if (ctx.training) input_shape_ = x.shape, argmax_.clear();
    return x;
  }
  const size_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3), ho = shape[2], wo = shape[3];
  Tensor<T> y(shape);
  std::vector<size_t> argmax(y.size());
  for (size_t p = 0; p < planes; ++p)
    for (size_t oy = 0; oy < ho; ++oy)
      for (size_t ox = 0; ox < wo; ++ox) {
        size_t best = (p * h + 2 * oy) * w + 2 * ox;
        for (size_t i = 0; i < 2; ++i)
          for (size_t j = 0; j < 2; ++j) {
            const size_t at = (p * h + 2 * oy + i) * w + 2 * ox + j;
            if (x.data[at] > x.data[best]) best = at;
          }
        const size_t out = (p * ho + oy) * wo + ox;
        y.data[out] = x.data[best];
        argmax[out] = best;
      }
  if (ctx.training) {
    input_shape_ = x.shape;
    argmax_ = std::move(argmax);
  }
  return y;
}

template <class T>
Tensor<T> MaxPool2d<T>::backward(const Tensor<T>& dy, Context&) {
  if (argmax_.empty()) return dy;  // passed through
  Tensor<T> dx(input_shape_);
  for (size_t i = 0; i < dy.size(); ++i) dx.data[argmax_[i]] = dy.data[i];  // windows do not overlap
  return dx;
}

template class MaxPool2d<float>;
template class MaxPool2d<double>;

}  // namespace fplab::models
