#include "models/conv2d.hpp"

#include <algorithm>
#include <stdexcept>

#include "models/compute.hpp"
#include "models/conv_dgrad_taps.hpp"
#include "models/algo_noise.hpp"
#include "models/init.hpp"
#include "sim/winograd_wgrad.hpp"

namespace fplab::models {

template <class T>
Conv2d<T>::Conv2d(size_t cin, size_t cout, size_t kernel, size_t stride, size_t padding)
    : cin_(cin),
      cout_(cout),
      kernel_(kernel),
      stride_(stride),
      padding_(padding),
      weight_{"weight", Tensor<T>({cin * kernel * kernel, cout}), Tensor<T>({cin * kernel * kernel, cout}), true},
      bias_{"bias", Tensor<T>({cout}), Tensor<T>({cout}), false} {}

template <class T>
std::string Conv2d<T>::describe() const {
  return "conv2d(" + std::to_string(cin_) + "->" + std::to_string(cout_) + ", " + std::to_string(kernel_) + "x" +
         std::to_string(kernel_) + ", stride " + std::to_string(stride_) + ", pad " + std::to_string(padding_) + ")";
}

template <class T>
std::vector<size_t> Conv2d<T>::output_shape(const std::vector<size_t>& in) const {
  if (in.size() != 4 || in[1] != cin_)
    throw std::invalid_argument(describe() + ": input must be (B, " + std::to_string(cin_) + ", H, W)");
  return {in[0], cout_, out_size(in[2]), out_size(in[3])};
}

template <class T>
void Conv2d<T>::initialize(const Context& ctx) {
  he_normal(weight_.value, cin_ * kernel_ * kernel_, init_stream(ctx.algo_seed, ctx.layer));
  std::fill(bias_.value.data.begin(), bias_.value.data.end(), T(0));
}

template <class T>
void Conv2d<T>::im2col(const Tensor<T>& x, Tensor<T>& cols) const {
  const size_t batch = x.dim(0), h = x.dim(2), w = x.dim(3), ho = out_size(h), wo = out_size(w);
  const size_t k = cin_ * kernel_ * kernel_;
  cols = Tensor<T>({batch * ho * wo, k});  // zero-filled: the padding stays 0
  const long kk = static_cast<long>(kernel_), lh = static_cast<long>(h), lw = static_cast<long>(w);
  for (size_t b = 0; b < batch; ++b)
    for (size_t oy = 0; oy < ho; ++oy)
      for (size_t ox = 0; ox < wo; ++ox) {
        T* row = &cols.data[((b * ho + oy) * wo + ox) * k];
        const long x0 = static_cast<long>(ox * stride_) - static_cast<long>(padding_);
        const long j_lo = std::max(0L, -x0), j_hi = std::min(kk, lw - x0);  // the columns inside the image
        for (size_t c = 0; c < cin_; ++c)
          for (long i = 0; i < kk; ++i) {
            const long y = static_cast<long>(oy * stride_) + i - static_cast<long>(padding_);
            if (y < 0 || y >= lh) continue;
            const T* src = &x.data[((b * cin_ + c) * h + static_cast<size_t>(y)) * w];
            T* dst = row + (static_cast<long>(c) * kk + i) * kk;
            for (long j = j_lo; j < j_hi; ++j) dst[j] = src[x0 + j];
          }
      }
}

template <class T>
Tensor<T> Conv2d<T>::forward(const Tensor<T>& x, Context& ctx) {
  const auto shape = output_shape(x.shape);
  const size_t batch = shape[0], ho = shape[2], wo = shape[3], positions = ho * wo, k = cin_ * kernel_ * kernel_;
  const profiles::LayerShape layer = layer_shape(x.shape);
  const LayerShapeScope scope(ctx, layer);
  // The weight gradient reads the columns (GEMM form) or the input itself (Winograd form).
  const bool winograd = ctx.training && ctx.ops->conv_wgrad(layer) == profiles::ConvWgrad::winograd;
  const bool keep_cols = ctx.training && !winograd;
  Tensor<T> cols, out({batch * positions, cout_});
  if (ctx.backend && keep_cols) cols = Tensor<T>({batch * positions, k});  // the backend's copy, for wgrad
  if (!backend_conv_forward(ctx, geometry(x.shape), cout_, x.ptr(), weight_.value.ptr(), out.ptr(),
                            keep_cols ? cols.ptr() : nullptr)) {
    im2col(x, cols);
    matmul(ctx, profiles::OpKind::fwd, cols.ptr(), weight_.value.ptr(), out.ptr(), batch * positions, cout_, k);
  }
  Tensor<T> y(shape);
  for (size_t b = 0; b < batch; ++b)
    for (size_t p = 0; p < positions; ++p)
      for (size_t c = 0; c < cout_; ++c)
        y.data[(b * cout_ + c) * positions + p] = out.data[(b * positions + p) * cout_ + c] + bias_.value.data[c];
  if (ctx.training) {
    cols_ = keep_cols ? std::move(cols) : Tensor<T>();
    input_shape_ = x.shape;
    input_ = winograd ? x : Tensor<T>();
  }
  return y;
}

template <class T>
Tensor<T> Conv2d<T>::backward(const Tensor<T>& dy, Context& ctx) {
  const size_t batch = dy.dim(0), ho = dy.dim(2), wo = dy.dim(3), positions = ho * wo, k = cin_ * kernel_ * kernel_;
  const size_t rows = batch * positions;
  const profiles::LayerShape layer = layer_shape(input_shape_);
  const LayerShapeScope scope(ctx, layer);
  Tensor<T> g({rows, cout_});  // dy as (B*Ho*Wo) x C_out
  for (size_t b = 0; b < batch; ++b)
    for (size_t c = 0; c < cout_; ++c)
      for (size_t p = 0; p < positions; ++p)
        g.data[(b * positions + p) * cout_ + c] = dy.data[(b * cout_ + c) * positions + p];
  if (ctx.ops->conv_wgrad(layer) == profiles::ConvWgrad::winograd) {
    weight_grad_winograd(dy, ctx);
  } else {  // dW (k x C_out) = cols^T (k x rows) g (rows x C_out).
    Tensor<T> cols_t({k, rows});
    transpose(cols_.ptr(), rows, k, cols_t.ptr());
    matmul(ctx, profiles::OpKind::wgrad, cols_t.ptr(), g.ptr(), weight_.grad.ptr(), k, cout_, rows);
  }
  sum_rows(ctx, profiles::OpKind::bias_grad, g.ptr(), rows, cout_, bias_.grad.ptr());
  if (!ctx.input_grad) return {};
  if (ctx.ops->conv_dgrad == profiles::ConvDgrad::direct) return input_grad_direct(dy, ctx);
  // dcols (rows x k) = g (rows x C_out) W^T (C_out x k), then col2im: on the backend when it takes
  // convolutions, else here.
  Tensor<T> wt({cout_, k});
  transpose(weight_.value.ptr(), k, cout_, wt.ptr());
  Tensor<T> dx(input_shape_);
  if (backend_conv_input_grad(ctx, geometry(input_shape_), cout_, g.ptr(), wt.ptr(), dx.ptr())) return dx;
  Tensor<T> dcols({rows, k});
  matmul(ctx, profiles::OpKind::dgrad, g.ptr(), wt.ptr(), dcols.ptr(), rows, k, cout_);
  const size_t h = input_shape_[2], w = input_shape_[3];
  // col2im in the loop order of im2col, so every element of dx receives its terms in the same
  // order as a straightforward loop over (oy, ox, c, i, j) would add them.
  const long kk = static_cast<long>(kernel_), lh = static_cast<long>(h), lw = static_cast<long>(w);
  for (size_t b = 0; b < batch; ++b)
    for (size_t oy = 0; oy < ho; ++oy)
      for (size_t ox = 0; ox < wo; ++ox) {
        const T* row = &dcols.data[((b * ho + oy) * wo + ox) * k];
        const long x0 = static_cast<long>(ox * stride_) - static_cast<long>(padding_);
        const long j_lo = std::max(0L, -x0), j_hi = std::min(kk, lw - x0);
        for (size_t c = 0; c < cin_; ++c)
          for (long i = 0; i < kk; ++i) {
            const long y = static_cast<long>(oy * stride_) + i - static_cast<long>(padding_);
            if (y < 0 || y >= lh) continue;
            T* dst = &dx.data[((b * cin_ + c) * h + static_cast<size_t>(y)) * w];
            const T* src = row + (static_cast<long>(c) * kk + i) * kk;
            for (long j = j_lo; j < j_hi; ++j) dst[x0 + j] += src[j];
          }
      }
  return dx;
}

// dW through F(4x4, 3x3)'s transforms (profiles::ConvWgrad::winograd; the profile's rule admits
// 3x3 stride-1 layers only): the input, kept from the forward pass, and dy transformed, then per
// transformed position p a GEMM M_p (C_out x C) = U_p (C_out x terms) V_p (terms x C) over
// (image, tile) in the wgrad schedule, reduction part p; then dW from the 36 M_p.
template <class T>
void Conv2d<T>::weight_grad_winograd(const Tensor<T>& dy, Context& ctx) {
  if (kernel_ != 3 || stride_ != 1)
    throw std::logic_error("Conv2d: a Winograd weight gradient needs a 3x3 stride-1 convolution");
  const sim::WinogradWgradShape shape{input_shape_[0], cin_, cout_, input_shape_[2], input_shape_[3], padding_};
  const size_t terms = shape.terms();
  Tensor<T> v({sim::kWinogradPositions, terms, cin_}), u({sim::kWinogradPositions, cout_, terms}),
      m({sim::kWinogradPositions, cout_, cin_});
  sim::winograd_data_transform(input_.ptr(), shape, v.ptr());
  sim::winograd_delta_transform(dy.ptr(), shape, u.ptr());
  for (size_t p = 0; p < sim::kWinogradPositions; ++p)
    matmul(ctx, profiles::OpKind::wgrad, u.ptr() + p * cout_ * terms, v.ptr() + p * terms * cin_,
           m.ptr() + p * cout_ * cin_, cout_, cin_, terms, p);
  sim::winograd_output_transform(m.ptr(), cout_, cin_, weight_.grad.ptr());
}

// dx (B*H*W x C) = taps (B*H*W x C_out*kh*kw) W' (C_out*kh*kw x C): each input pixel's terms, ordered
// (output channel, kernel row, kernel column), in one reduction. A tap that falls outside the output
// (or between the strides) is a zero term, which no FMA chain changes.
template <class T>
Tensor<T> Conv2d<T>::input_grad_direct(const Tensor<T>& dy, Context& ctx) const {
  const size_t batch = input_shape_[0], h = input_shape_[2], w = input_shape_[3];
  const size_t kk = kernel_ * kernel_, terms = cout_ * kk, pixels = batch * h * w;
  const auto k = static_cast<long>(kernel_), s = static_cast<long>(stride_), p = static_cast<long>(padding_);
  Tensor<T> taps({pixels, terms});
  dgrad_taps(dy.ptr(), ConvTaps{batch, cout_, 0, cout_, h, w, dy.dim(2), dy.dim(3), k, k, s, s, p, p, 1, 1},
             taps.ptr());
  Tensor<T> w2({terms, cin_});  // W'[(co, i, j), c] = W[(c, i, j), co]
  for (size_t c = 0; c < cin_; ++c)
    for (size_t t = 0; t < kk; ++t)
      for (size_t co = 0; co < cout_; ++co) w2.data[(co * kk + t) * cin_ + c] = weight_.value.data[(c * kk + t) * cout_ + co];
  Tensor<T> rows({pixels, cin_});
  matmul(ctx, profiles::OpKind::dgrad, taps.ptr(), w2.ptr(), rows.ptr(), pixels, cin_, terms);
  Tensor<T> dx(input_shape_);
  for (size_t b = 0; b < batch; ++b)
    for (size_t c = 0; c < cin_; ++c)
      for (size_t q = 0; q < h * w; ++q) dx.data[(b * cin_ + c) * h * w + q] = rows.data[(b * h * w + q) * cin_ + c];
  return dx;
}

template class Conv2d<float>;
template class Conv2d<double>;

}  // namespace fplab::models
