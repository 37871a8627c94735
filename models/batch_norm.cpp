#include "models/batch_norm.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "fp/cuda_rsqrt.hpp"
#include "models/compute.hpp"
#include "sim/channel_dots.hpp"
#include "sim/cudnn_nchw_batch_norm.hpp"

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

// Per channel c, the dot of column c of a and of b (both N x C): a 1 x N by N x 1 GEMM each, so that
// the products enter the op's schedule as its arithmetic says (fused into FMA chains, as cuDNN's
// kernels square the deviations and multiply the gradients). Part 1 + c keys channel c. In float
// sim::channel_dots, which fplab.torch calls too; in double (the gradient tests) the reference GEMM.
template <class T>
std::vector<T> column_dots(Context& ctx, profiles::OpKind op, const Tensor<T>& a, const Tensor<T>& b, size_t channels) {
  const size_t n = a.dim(0);
  std::vector<T> out(channels);
  if constexpr (std::is_same_v<T, float>) {
    std::vector<sim::NoiseKey> keys;
    for (size_t c = 0; c < channels; ++c) keys.push_back(ctx.key(op, 1 + c));
    const profiles::OpChoice& choice = ctx.choice(op);
    sim::channel_dots(choice.schedule, choice.arithmetic, a.ptr(), b.ptr(), {n, channels, 1}, keys, out.data());
    return out;
  }
  std::vector<T> ac(n), bc(n);
  for (size_t c = 0; c < channels; ++c) {
    for (size_t i = 0; i < n; ++i) {
      ac[i] = a.data[i * channels + c];
      bc[i] = b.data[i * channels + c];
    }
    matmul(ctx, op, ac.data(), bc.data(), &out[c], 1, 1, n, 1 + c);
  }
  return out;
}

// cuDNN's orders end in warp shuffles after the chains, which fplab's GPU GEMM kernels do not
// take: its sums run on the CPU engine, whose bits the GPU kernels reproduce where they run.
Context on_host(const Context& ctx) {
  Context host = ctx;
  host.backend = nullptr;
  return host;
}

// The GPU's rsqrt where the data are float (cuDNN's kernels are); the correctly rounded one in double.
template <class T>
T device_rsqrt(T v) {
  if constexpr (std::is_same_v<T, float>) return fp::cuda_rsqrt(v);
  return T(1) / std::sqrt(v);
}

}  // namespace

template <class T>
profiles::LayerShape BatchNorm<T>::layer_shape(const std::vector<size_t>& shape) const {
  return {profiles::LayerShape::Kind::batch_norm, channels_, 0, 0, 0, shape.size() > 2 ? shape[2] : 1, shape[0]};
}

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

// The running statistics move by momentum in double precision, the variance unbiased as
// var n / (n - 1) in T, whatever form computed the batch's (as PyTorch's, and fplab.torch's).
template <class T>
void BatchNorm<T>::move_running(size_t c, T mean, T var, size_t n) {
  const T unbiased = n > 1 ? var * static_cast<T>(n) / static_cast<T>(n - 1) : var;
  running_mean_.data[c] = static_cast<T>((1 - momentum_) * running_mean_.data[c] + momentum_ * mean);
  running_var_.data[c] = static_cast<T>((1 - momentum_) * running_var_.data[c] + momentum_ * unbiased);
}

template <class T>
Tensor<T> BatchNorm<T>::forward(const Tensor<T>& x, Context& ctx) {
  const profiles::LayerShape layer = layer_shape(x.shape);
  const LayerShapeScope scope(ctx, layer);
  Tensor<T> m = to_rows(x, channels_);
  // PyTorch sends only inputs with positions (3 or more dimensions) and eps >= cuDNN's least
  // (1e-5) to cuDNN; the others run its own kernel, fplab's formula here.
  const bool to_cudnn = ctx.training && x.shape.size() > 2 && eps_ >= 1e-5;
  const profiles::BatchNormForm form = to_cudnn ? ctx.ops->batch_norm(layer) : profiles::BatchNormForm::fplab;
  if (form == profiles::BatchNormForm::cudnn || form == profiles::BatchNormForm::cudnn_nchw_backward) {
    if (form == profiles::BatchNormForm::cudnn_nchw_backward)
      if (const std::string why = sim::cudnn_nchw_why_not(x.shape[0], m.dim(0) / x.shape[0], true); !why.empty())
        throw std::invalid_argument("batch_norm = \"cudnn-nchw-backward\" for " + describe() + ": " + why);
    Tensor<T> y = forward_cudnn(m, ctx);
    nchw_backward_ = form == profiles::BatchNormForm::cudnn_nchw_backward;
    shape_ = x.shape;
    return from_rows(y, x.shape);
  }
  if (form == profiles::BatchNormForm::cudnn_nchw) {
    Tensor<T> y = forward_cudnn_nchw(m, x.shape[0]);
    shape_ = x.shape;
    return from_rows(y, x.shape);
  }
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
      move_running(c, mean[c], var[c], n);
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
    centred_ = {};
    input_ = {};
    inv_std_ = inv_std;
    shape_ = x.shape;
    cudnn_ = cudnn_nchw_ = false;
  }
  return from_rows(y, x.shape);
}

// cuDNN's bn_fw_tr_1C11_singleread (H200, cuDNN 9.19), on rows m (N x C): mean = S(x) (1/n) with
// the reciprocal rounded first; var = S(d d) (1/n) over d = x - mean, the squares fused into the
// sum's chains; invstd = the GPU's rsqrt(var + eps); y = fma(x, scale, shift) with
// scale = gamma invstd and shift = beta - mean scale. The running statistics move as fplab's do.
template <class T>
Tensor<T> BatchNorm<T>::forward_cudnn(const Tensor<T>& m, Context& device_ctx) {
  Context ctx = on_host(device_ctx);
  const size_t n = m.dim(0);
  const T inv_n = T(1) / static_cast<T>(n);
  std::vector<T> mean(channels_);
  sum_rows(ctx, profiles::OpKind::bn_stats, m.ptr(), n, channels_, mean.data(), 0);
  for (auto& v : mean) v *= inv_n;
  Tensor<T> centred({n, channels_});
  for (size_t i = 0; i < n; ++i)
    for (size_t c = 0; c < channels_; ++c) centred.data[i * channels_ + c] = m.data[i * channels_ + c] - mean[c];
  std::vector<T> var = column_dots(ctx, profiles::OpKind::bn_stats, centred, centred, channels_);
  std::vector<T> scale(channels_), shift(channels_);
  inv_std_.assign(channels_, T(0));
  for (size_t c = 0; c < channels_; ++c) {
    var[c] *= inv_n;
    move_running(c, mean[c], var[c], n);
    inv_std_[c] = device_rsqrt<T>(var[c] + static_cast<T>(eps_));
    scale[c] = gamma_.value.data[c] * inv_std_[c];
    shift[c] = beta_.value.data[c] - mean[c] * scale[c];
  }
  Tensor<T> y({n, channels_});
  for (size_t i = 0; i < n; ++i)
    for (size_t c = 0; c < channels_; ++c) {
      const size_t at = i * channels_ + c;
      y.data[at] = std::fma(m.data[at], scale[c], shift[c]);
    }
  centred_ = std::move(centred);
  xhat_ = {};
  input_ = {};
  cudnn_ = true;
  cudnn_nchw_ = false;
  return y;
}

// cuDNN's kernels for larger planes (sim/cudnn_nchw_batch_norm.hpp), channel by channel on rows m
// (N x C, N = batch x positions): their own orders, whatever the profile's schedules say. The
// running statistics move as fplab's do, from the kernel's variance fl(Q rcp(n)).
template <class T>
Tensor<T> BatchNorm<T>::forward_cudnn_nchw(const Tensor<T>& m, size_t batch) {
  if constexpr (!std::is_same_v<T, float>) {
    throw std::invalid_argument("batch_norm = \"cudnn-nchw\": cuDNN's float32 kernels, not for another precision");
  } else {
    const size_t n = m.dim(0), positions = n / batch;
    if (const std::string why = sim::cudnn_nchw_why_not(batch, positions); !why.empty())
      throw std::invalid_argument("batch_norm = \"cudnn-nchw\" for " + describe() + ": " + why);
    mean_.assign(channels_, 0.0f);
    inv_std_.assign(channels_, 0.0f);
    Tensor<T> y({n, channels_});
    for (size_t c = 0; c < channels_; ++c) {
      const sim::NchwPlane plane{m.ptr() + c, batch, positions, positions * channels_, channels_};
      const sim::NchwStatistics s = sim::cudnn_nchw_statistics(plane, static_cast<float>(eps_));
      mean_[c] = s.mean;
      inv_std_[c] = s.inv_std;
      move_running(c, s.mean, s.var, n);
      for (size_t i = 0; i < n; ++i)
        y.data[i * channels_ + c] =
            sim::cudnn_nchw_output(m.data[i * channels_ + c], s, gamma_.value.data[c], beta_.value.data[c]);
    }
    input_ = m;
    xhat_ = {};
    centred_ = {};
    cudnn_ = false;
    cudnn_nchw_ = true;
    return y;
  }
}

// After the singleread forward (cudnn-nchw-backward) the values are the centred ones, x - mean as
// the forward rounded them, and the mean 0: the kernel's d = fl(x - mean) is then that value.
template <class T>
Tensor<T> BatchNorm<T>::backward_cudnn_nchw(const Tensor<T>& g) {
  if constexpr (!std::is_same_v<T, float>) {
    throw std::logic_error("backward_cudnn_nchw: float32 only");
  } else {
    const size_t n = g.dim(0), batch = shape_[0], positions = n / batch;
    const Tensor<T>& values = cudnn_ ? centred_ : input_;
    Tensor<T> dx({n, channels_});
    for (size_t c = 0; c < channels_; ++c) {
      const sim::NchwPlane gp{g.ptr() + c, batch, positions, positions * channels_, channels_};
      const sim::NchwPlane xp{values.ptr() + c, batch, positions, positions * channels_, channels_};
      sim::NchwStatistics s;
      s.mean = cudnn_ ? 0.0f : mean_[c];
      s.inv_std = inv_std_[c];
      const sim::NchwGradients grads = sim::cudnn_nchw_gradients(gp, xp, s);
      gamma_.grad.data[c] = grads.dgamma;
      beta_.grad.data[c] = grads.dbeta;
      for (size_t i = 0; i < n; ++i)
        dx.data[i * channels_ + c] = sim::cudnn_nchw_input_gradient(g.data[i * channels_ + c],
                                                                    values.data[i * channels_ + c], s, grads,
                                                                    gamma_.value.data[c]);
    }
    return dx;
  }
}

// cuDNN's bn_bw_1C11_singleread: dbeta = S(g); dgamma = S(g d) invstd, the products fused into the
// sum's chains; dx = fma(d, a, fma(g, scale, b)) with scale = gamma invstd, k = dgamma invstd (1/n),
// a = -(scale k) and b = -(scale dbeta (1/n)), every step rounded to T.
template <class T>
Tensor<T> BatchNorm<T>::backward_cudnn(const Tensor<T>& g, Context& device_ctx) {
  Context ctx = on_host(device_ctx);
  const size_t n = g.dim(0);
  const T inv_n = T(1) / static_cast<T>(n);
  sum_rows(ctx, profiles::OpKind::bias_grad, g.ptr(), n, channels_, beta_.grad.ptr(), 0);
  const std::vector<T> dots = column_dots(ctx, profiles::OpKind::bias_grad, g, centred_, channels_);
  std::vector<T> scale(channels_), a(channels_), b(channels_);
  for (size_t c = 0; c < channels_; ++c) {
    gamma_.grad.data[c] = dots[c] * inv_std_[c];
    scale[c] = gamma_.value.data[c] * inv_std_[c];
    const T k = (gamma_.grad.data[c] * inv_std_[c]) * inv_n;
    a[c] = -(scale[c] * k);
    b[c] = -(scale[c] * (beta_.grad.data[c] * inv_n));
  }
  Tensor<T> dx({n, channels_});
  for (size_t i = 0; i < n; ++i)
    for (size_t c = 0; c < channels_; ++c) {
      const size_t at = i * channels_ + c;
      dx.data[at] = std::fma(centred_.data[at], a[c], std::fma(g.data[at], scale[c], b[c]));
    }
  return dx;
}

template <class T>
Tensor<T> BatchNorm<T>::backward(const Tensor<T>& dy, Context& ctx) {
  const profiles::LayerShape layer = layer_shape(shape_);
  const LayerShapeScope scope(ctx, layer);
  Tensor<T> g = to_rows(dy, channels_);
  if (cudnn_nchw_ || (cudnn_ && nchw_backward_)) return from_rows(backward_cudnn_nchw(g), shape_);
  if (cudnn_) return from_rows(backward_cudnn(g, ctx), shape_);
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
