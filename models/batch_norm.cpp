#include "models/batch_norm.hpp"

#include <cmath>

#include "models/compute.hpp"

namespace fplab::models {
namespace {

// (B, C, S) <-> (B*S, C) so that per-channel sums are sums over the leading axis.
template <class T>
Tensor<T> to_rows(const Tensor<T>& x, size_t channels) {
  const size_t batch = x.dim(0), spatial = x.size() / (batch * channels);
  Tensor<T> m({batch * spatial, channels});
  for (size_t b = 0; b < batch; ++b)
    for (size_t c = 0; c < channels; ++c)
      for (size_t s = 0; s < spatial; ++s)
        m.data[(b * spatial + s) * channels + c] = x.data[(b * channels + c) * spatial + s];
  return m;
}
template <class T>
Tensor<T> from_rows(const Tensor<T>& m, const std::vector<size_t>& shape) {
  const size_t batch = shape[0], channels = shape[1], spatial = Tensor<T>::count(shape) / (batch * channels);
  Tensor<T> x(shape);
  for (size_t b = 0; b < batch; ++b)
    for (size_t c = 0; c < channels; ++c)
      for (size_t s = 0; s < spatial; ++s)
        x.data[(b * channels + c) * spatial + s] = m.data[(b * spatial + s) * channels + c];
  return x;
}

}  // namespace

template <class T>
BatchNorm<T>::BatchNorm(size_t channels, double momentum, double eps)
    : channels_(channels),
      momentum_(momentum),
      eps_(eps),
      gamma_{"gamma", Tensor<T>({channels}, T(1)), Tensor<T>({channels}), false},
      beta_{"beta", Tensor<T>({channels}), Tensor<T>({channels}), false},
      running_mean_({channels}),
      running_var_({channels}, T(1)) {}

template <class T>
void BatchNorm<T>::initialize(const Context&) {
  std::fill(gamma_.value.data.begin(), gamma_.value.data.end(), T(1));
  std::fill(beta_.value.data.begin(), beta_.value.data.end(), T(0));
  std::fill(running_mean_.data.begin(), running_mean_.data.end(), T(0));
  std::fill(running_var_.data.begin(), running_var_.data.end(), T(1));
}

template <class T>
Tensor<T> BatchNorm<T>::forward(const Tensor<T>& x, Context& ctx) {
  Tensor<T> m = to_rows(x, channels_);
  const size_t n = m.dim(0);
  std::vector<T> mean(channels_), var(channels_), inv_std(channels_);
  if (ctx.training) {
    sum_rows(ctx, profiles::OpKind::bn_stats, m.ptr(), n, channels_, mean.data(), 0);
    for (auto& v : mean) v /= static_cast<T>(n);
    Tensor<T> squares({n, channels_});
    for (size_t i = 0; i < n; ++i)
      for (size_t c = 0; c < channels_; ++c) {
        const T d = m.data[i * channels_ + c] - mean[c];
        squares.data[i * channels_ + c] = d * d;
      }
    sum_rows(ctx, profiles::OpKind::bn_stats, squares.ptr(), n, channels_, var.data(), 1);
    for (size_t c = 0; c < channels_; ++c) {
      var[c] /= static_cast<T>(n);
      const T unbiased = n > 1 ? var[c] * static_cast<T>(n) / static_cast<T>(n - 1) : var[c];
      running_mean_.data[c] = static_cast<T>((1 - momentum_) * running_mean_.data[c] + momentum_ * mean[c]);
      running_var_.data[c] = static_cast<T>((1 - momentum_) * running_var_.data[c] + momentum_ * unbiased);
    }
  } else {
    mean = running_mean_.data;
    var = running_var_.data;
  }
  for (size_t c = 0; c < channels_; ++c) inv_std[c] = T(1) / std::sqrt(var[c] + static_cast<T>(eps_));
  Tensor<T> xhat({n, channels_}), y({n, channels_});
  for (size_t i = 0; i < n; ++i)
    for (size_t c = 0; c < channels_; ++c) {
      const size_t at = i * channels_ + c;
      xhat.data[at] = (m.data[at] - mean[c]) * inv_std[c];
      y.data[at] = gamma_.value.data[c] * xhat.data[at] + beta_.value.data[c];
    }
  if (ctx.training) {
    xhat_ = std::move(xhat);
    inv_std_ = inv_std;
    shape_ = x.shape;
  }
  return from_rows(y, x.shape);
}

template <class T>
Tensor<T> BatchNorm<T>::backward(const Tensor<T>& dy, Context& ctx) {
  Tensor<T> g = to_rows(dy, channels_);
  const size_t n = g.dim(0);
  sum_rows(ctx, profiles::OpKind::bias_grad, g.ptr(), n, channels_, beta_.grad.ptr(), 0);
  Tensor<T> gx({n, channels_});
  for (size_t i = 0; i < g.size(); ++i) gx.data[i] = g.data[i] * xhat_.data[i];
  sum_rows(ctx, profiles::OpKind::bias_grad, gx.ptr(), n, channels_, gamma_.grad.ptr(), 1);
  Tensor<T> dx({n, channels_});
  const T count = static_cast<T>(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t c = 0; c < channels_; ++c) {
      const size_t at = i * channels_ + c;
      dx.data[at] = gamma_.value.data[c] * inv_std_[c] / count *
                    (count * g.data[at] - beta_.grad.data[c] - xhat_.data[at] * gamma_.grad.data[c]);
    }
  return from_rows(dx, shape_);
}

template class BatchNorm<float>;
template class BatchNorm<double>;

}  // namespace fplab::models
