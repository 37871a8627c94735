#include "models/softmax_cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/compute.hpp"

namespace fplab::models {

template <class T>
T SoftmaxCrossEntropy<T>::forward(const Tensor<T>& logits, std::span<const uint8_t> labels, Context& ctx) {
  const size_t batch = logits.dim(0), classes = logits.dim(1);
  if (labels.size() != batch) throw std::invalid_argument("softmax cross-entropy: labels and batch differ");
  Tensor<T> exps({classes, batch});  // classes x batch: each example's sum runs over the leading axis
  std::vector<T> row_max(batch);
  for (size_t b = 0; b < batch; ++b) {
    const T* row = &logits.data[b * classes];
    row_max[b] = *std::max_element(row, row + classes);
    for (size_t c = 0; c < classes; ++c) exps.data[c * batch + b] = std::exp(row[c] - row_max[b]);
  }
  std::vector<T> denominators(batch), losses(batch);
  sum_rows(ctx, profiles::OpKind::softmax, exps.ptr(), classes, batch, denominators.data());
  probabilities_ = Tensor<T>({batch, classes});
  for (size_t b = 0; b < batch; ++b) {
    for (size_t c = 0; c < classes; ++c)
      probabilities_.data[b * classes + c] = exps.data[c * batch + b] / denominators[b];
    losses[b] = std::log(denominators[b]) + row_max[b] - logits.data[b * classes + labels[b]];
  }
  T total;
  sum_rows(ctx, profiles::OpKind::loss, losses.data(), batch, 1, &total);
  labels_.assign(labels.begin(), labels.end());
  return total / static_cast<T>(batch);
}

template <class T>
Tensor<T> SoftmaxCrossEntropy<T>::backward() const {
  Tensor<T> d = probabilities_;
  const size_t batch = d.dim(0), classes = d.dim(1);
  for (size_t b = 0; b < batch; ++b) {
    d.data[b * classes + labels_[b]] -= T(1);
    for (size_t c = 0; c < classes; ++c) d.data[b * classes + c] /= static_cast<T>(batch);
  }
  return d;
}

template <class T>
std::vector<uint8_t> predictions(const Tensor<T>& logits) {
  const size_t batch = logits.dim(0), classes = logits.dim(1);
  std::vector<uint8_t> out(batch);
  for (size_t b = 0; b < batch; ++b) {
    const T* row = &logits.data[b * classes];
    out[b] = static_cast<uint8_t>(std::max_element(row, row + classes) - row);
  }
  return out;
}

template class SoftmaxCrossEntropy<float>;
template class SoftmaxCrossEntropy<double>;
template std::vector<uint8_t> predictions(const Tensor<float>&);
template std::vector<uint8_t> predictions(const Tensor<double>&);

}  // namespace fplab::models
