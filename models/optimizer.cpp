#include "models/optimizer.hpp"

#include <cmath>

#include "fp/format.hpp"

namespace fplab::models {

double OptimizerSpec::lr_at(size_t epoch) const {
  if (decay_every == 0) return lr;
  return lr * std::pow(decay_factor, static_cast<double>(epoch / decay_every));
}

template <class T>
void Optimizer<T>::step(const std::vector<Parameter<T>*>& params, size_t epoch) {
  const bool adam = spec_.kind == "adam";
  if (!adam && spec_.kind != "sgd") throw fp::FormatError("unknown optimizer '" + spec_.kind + "' (known: sgd, adam)");
  const size_t slots = adam ? 2 : 1;
  if (state_.size() != params.size() * slots) {
    state_.clear();
    for (auto* p : params)
      for (size_t s = 0; s < slots; ++s) state_.emplace_back(p->value.size(), T(0));
  }
  ++steps_;
  const T lr = static_cast<T>(spec_.lr_at(epoch));
  for (size_t i = 0; i < params.size(); ++i) {
    auto& w = params[i]->value.data;
    const auto& g = params[i]->grad.data;
    const T decay = params[i]->weight_decay ? static_cast<T>(spec_.weight_decay) : T(0);
    if (!adam) {
      auto& v = state_[i];
      const T mu = static_cast<T>(spec_.momentum);
      for (size_t j = 0; j < w.size(); ++j) {
        v[j] = mu * v[j] + (g[j] + decay * w[j]);
        w[j] -= lr * v[j];
      }
    } else {
      auto& m = state_[2 * i];
      auto& v = state_[2 * i + 1];
      const T b1 = static_cast<T>(spec_.beta1), b2 = static_cast<T>(spec_.beta2);
      const T c1 = static_cast<T>(1 - std::pow(spec_.beta1, static_cast<double>(steps_)));
      const T c2 = static_cast<T>(1 - std::pow(spec_.beta2, static_cast<double>(steps_)));
      for (size_t j = 0; j < w.size(); ++j) {
        const T gj = g[j] + decay * w[j];
        m[j] = b1 * m[j] + (1 - b1) * gj;
        v[j] = b2 * v[j] + (1 - b2) * gj * gj;
        w[j] -= lr * (m[j] / c1) / (std::sqrt(v[j] / c2) + static_cast<T>(spec_.eps));
      }
    }
  }
}

template class Optimizer<float>;
template class Optimizer<double>;

}  // namespace fplab::models
