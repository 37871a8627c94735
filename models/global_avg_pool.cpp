#include "models/global_avg_pool.hpp"

#include "models/compute.hpp"

namespace fplab::models {

template <class T>
Tensor<T> GlobalAvgPool<T>::forward(const Tensor<T>& x, Context& ctx) {
  const size_t planes = x.dim(0) * x.dim(1), positions = x.dim(2) * x.dim(3);
  // positions x planes, so that each plane's sum is a sum over the leading axis.
  Tensor<T> t({positions, planes}), y({x.dim(0), x.dim(1)});
  transpose(x.ptr(), planes, positions, t.ptr());
  sum_rows(ctx, profiles::OpKind::bn_stats, t.ptr(), positions, planes, y.ptr());
  for (auto& v : y.data) v /= static_cast<T>(positions);
  input_shape_ = x.shape;
  return y;
}

template <class T>
Tensor<T> GlobalAvgPool<T>::backward(const Tensor<T>& dy, Context&) {
  const size_t positions = input_shape_[2] * input_shape_[3];
  Tensor<T> dx(input_shape_);
  for (size_t p = 0; p < dy.size(); ++p)
    for (size_t i = 0; i < positions; ++i) dx.data[p * positions + i] = dy.data[p] / static_cast<T>(positions);
  return dx;
}

template class GlobalAvgPool<float>;
template class GlobalAvgPool<double>;

}  // namespace fplab::models
