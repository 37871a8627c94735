// Batch normalisation over (B) for (B, C) inputs and over (B, H, W) for (B, C, H, W) inputs.
// Training uses the batch statistics, whose sums follow the bn_stats schedule (the mean, then
// the mean squared deviation: parts 0 and 1; in cuDNN's form the variance's per-channel dots,
// parts 1 + c); gamma and beta gradients follow bias_grad (likewise).
// Running statistics (momentum 0.1, unbiased variance, as PyTorch) are used in evaluation.
// The arithmetic around the sums is the profile's batch_norm form for the layer (a layer rule's
// match = { layer = "bn", in = CHANNELS, height = H, batch = B }): fplab's formulas, or in training
// on inputs with positions (as PyTorch sends to cuDNN) cuDNN's
// singleread kernels' (profiles/layer_rule.hpp, BatchNormForm), which take the variance's squares
// and gamma's gradient as FMA chains (a per-channel dot through the same schedules) and the GPU's
// rsqrt (fp/cuda_rsqrt.hpp), or its kernels for larger planes (`cudnn-nchw`:
// sim/cudnn_nchw_batch_norm.hpp, float32 only; their orders are the kernels', not a schedule's).
#pragma once

#include "models/layer.hpp"

namespace fplab::models {

template <class T>
class BatchNorm : public Layer<T> {
 public:
  explicit BatchNorm(size_t channels, double momentum = 0.1, double eps = 1e-5);
  std::string describe() const override { return "batchnorm(" + std::to_string(channels_) + ")"; }
  std::vector<size_t> output_shape(const std::vector<size_t>& in) const override { return in; }
  Tensor<T> forward(const Tensor<T>& x, Context& ctx) override;
  Tensor<T> backward(const Tensor<T>& dy, Context& ctx) override;
  std::vector<Parameter<T>*> parameters() override { return {&gamma_, &beta_}; }
  std::vector<Tensor<T>*> buffers() override { return {&running_mean_, &running_var_}; }
  void initialize(const Context&) override;

 private:
  size_t channels_;
  double momentum_, eps_;
  Parameter<T> gamma_, beta_;
  Tensor<T> running_mean_, running_var_;
  profiles::LayerShape layer_shape(const std::vector<size_t>& shape) const;
  void move_running(size_t c, T mean, T var, size_t n);
  Tensor<T> forward_cudnn(const Tensor<T>& m, Context& ctx);
  Tensor<T> backward_cudnn(const Tensor<T>& g, Context& ctx);
  Tensor<T> forward_cudnn_nchw(const Tensor<T>& m, size_t batch);
  Tensor<T> backward_cudnn_nchw(const Tensor<T>& g);

  Tensor<T> xhat_;      // (N x C) normalised training input (fplab's form)
  Tensor<T> centred_;   // (N x C) x - mean (cuDNN's form)
  Tensor<T> input_;     // (N x C) x (cuDNN's NCHW form)
  std::vector<T> mean_;  // cuDNN's NCHW form
  bool cudnn_ = false;   // the last training forward took cuDNN's form
  bool cudnn_nchw_ = false;  // ... its NCHW kernels' form
  bool nchw_backward_ = false;  // ... the singleread forward with the NCHW kernels' backward
  std::vector<T> inv_std_;
  std::vector<size_t> shape_;
};

}  // namespace fplab::models
