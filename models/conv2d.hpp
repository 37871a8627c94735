// 2-D convolution as a GEMM over C*kh*kw (explicit im2col): input (B, C, H, W), weight stored
// (C*kh*kw) x C_out. The forward reduction runs over C*kh*kw, the weight gradient's over
// B*H_out*W_out, the input gradient's over C_out; col2im then adds the (at most kh*kw)
// overlapping contributions of each input pixel in a fixed order, in T. With a backend that takes
// convolutions (ComputeBackend::conv_forward / conv_input_grad), im2col + GEMM and GEMM + col2im
// run there instead, with the same bits.
#pragma once

#include "models/layer.hpp"
#include "sim/conv_geometry.hpp"

namespace fplab::models {

template <class T>
class Conv2d : public Layer<T> {
 public:
  Conv2d(size_t in_channels, size_t out_channels, size_t kernel, size_t stride = 1, size_t padding = 0);
  std::string describe() const override;
  std::vector<size_t> output_shape(const std::vector<size_t>& in) const override;
  Tensor<T> forward(const Tensor<T>& x, Context& ctx) override;
  Tensor<T> backward(const Tensor<T>& dy, Context& ctx) override;
  std::vector<Parameter<T>*> parameters() override { return {&weight_, &bias_}; }
  void initialize(const Context& ctx) override;
  // cols ((B*H_out*W_out) x C*kh*kw) = the lowering of x; public for the GPU kernel's tests.
  void im2col(const Tensor<T>& x, Tensor<T>& cols) const;

 private:
  size_t out_size(size_t in) const { return (in + 2 * padding_ - kernel_) / stride_ + 1; }
  // The input gradient as profiles::ConvDgrad::direct adds it, from the output gradient dy.
  Tensor<T> input_grad_direct(const Tensor<T>& dy, Context& ctx) const;
  // The weight gradient as profiles::ConvWgrad::winograd computes it, into weight_.grad.
  void weight_grad_winograd(const Tensor<T>& dy, Context& ctx);
  sim::ConvGeometry geometry(const std::vector<size_t>& in) const {
    return {in[0], cin_, in[2], in[3], kernel_, stride_, padding_};
  }
  // What a profile's layer rules see of this layer on an input of shape `in`.
  profiles::LayerShape layer_shape(const std::vector<size_t>& in) const {
    return {profiles::LayerShape::Kind::conv, cin_, cout_, kernel_, stride_, in[2], in[0]};
  }

  size_t cin_, cout_, kernel_, stride_, padding_;
  Parameter<T> weight_, bias_;
  Tensor<T> cols_;   // im2col of the last training input
  Tensor<T> input_;  // the last training input itself, where the weight gradient is Winograd's
  std::vector<size_t> input_shape_;
};

}  // namespace fplab::models
