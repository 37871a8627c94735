// Softmax cross-entropy over logits (B x C): the softmax denominators follow the softmax
// schedule (a sum over classes per example) and the mean over the batch the loss schedule. The
// maximum subtracted for stability and exp/log are elementwise, in T.
#pragma once

#include <cstdint>
#include <span>

#include "models/context.hpp"
#include "models/tensor.hpp"

namespace fplab::models {

template <class T>
class SoftmaxCrossEntropy {
 public:
  // The mean loss; keeps what backward() needs.
  T forward(const Tensor<T>& logits, std::span<const uint8_t> labels, Context& ctx);
  // dL/dlogits = (softmax - onehot) / B.
  Tensor<T> backward() const;

 private:
  Tensor<T> probabilities_;
  std::vector<uint8_t> labels_;
};

// Index of the largest logit of each row (the first one on ties).
template <class T>
std::vector<uint8_t> predictions(const Tensor<T>& logits);

}  // namespace fplab::models
