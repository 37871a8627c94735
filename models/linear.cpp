#include "models/linear.hpp"

#include "models/compute.hpp"
#include "models/algo_noise.hpp"
#include "models/init.hpp"

namespace fplab::models {

template <class T>
Linear<T>::Linear(size_t in, size_t out)
    : in_(in),
      out_(out),
      weight_{"weight", Tensor<T>({in, out}), Tensor<T>({in, out}), true},
      bias_{"bias", Tensor<T>({out}), Tensor<T>({out}), false} {}

template <class T>
std::string Linear<T>::describe() const {
  return "linear(" + std::to_string(in_) + "->" + std::to_string(out_) + ")";
}

template <class T>
void Linear<T>::initialize(const Context& ctx) {
  he_normal(weight_.value, in_, init_stream(ctx.algo_seed, ctx.layer));
  std::fill(bias_.value.data.begin(), bias_.value.data.end(), T(0));
}

template <class T>
Tensor<T> Linear<T>::forward(const Tensor<T>& x, Context& ctx) {
  const size_t batch = x.dim(0);
  const profiles::LayerShape layer{profiles::LayerShape::Kind::linear, in_, out_, 0, 0, 0, batch};
  const LayerShapeScope scope(ctx, layer);
  if (ctx.training) input_ = x;
  Tensor<T> y({batch, out_});
  matmul(ctx, profiles::OpKind::fwd, x.ptr(), weight_.value.ptr(), y.ptr(), batch, out_, in_);
  for (size_t b = 0; b < batch; ++b)
    for (size_t o = 0; o < out_; ++o) y.data[b * out_ + o] += bias_.value.data[o];
  return y;
}

template <class T>
Tensor<T> Linear<T>::backward(const Tensor<T>& dy, Context& ctx) {
  const size_t batch = dy.dim(0);
  const profiles::LayerShape layer{profiles::LayerShape::Kind::linear, in_, out_, 0, 0, 0, batch};
  const LayerShapeScope scope(ctx, layer);
  // dW (in x out) = x^T (in x batch) dy (batch x out): a reduction over the batch.
  Tensor<T> xt({in_, batch});
  transpose(input_.ptr(), batch, in_, xt.ptr());
  matmul(ctx, profiles::OpKind::wgrad, xt.ptr(), dy.ptr(), weight_.grad.ptr(), in_, out_, batch);
  sum_rows(ctx, profiles::OpKind::bias_grad, dy.ptr(), batch, out_, bias_.grad.ptr());
  if (!ctx.input_grad) return {};
  // dx (batch x in) = dy (batch x out) W^T (out x in): a reduction over output features.
  Tensor<T> wt({out_, in_}), dx({batch, in_});
  transpose(weight_.value.ptr(), in_, out_, wt.ptr());
  matmul(ctx, profiles::OpKind::dgrad, dy.ptr(), wt.ptr(), dx.ptr(), batch, in_, out_);
  return dx;
}

template class Linear<float>;
template class Linear<double>;

}  // namespace fplab::models
