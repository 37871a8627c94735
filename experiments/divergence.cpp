#include "experiments/divergence.hpp"

#include <bit>
#include <cmath>

namespace fplab::experiments {
namespace {

struct Named {
  std::string name;
  const std::vector<float>* values;
};

std::vector<Named> named_parameters(models::Model<float>& model) {
  std::vector<Named> out;
  for (size_t i = 0; i < model.layer_count(); ++i)
    for (auto* p : model.layer(i).parameters())
      out.push_back({"layer " + std::to_string(i) + " " + model.layer(i).describe() + " " + p->name, &p->value.data});
  return out;
}

}  // namespace

Divergence diverge(const models::TrainConfig& a, const models::TrainConfig& b, const models::Dataset& data,
                   const std::function<void(const std::string&)>& progress) {
  auto on_batch = [&](const char* replica) -> models::BatchFn {
    if (!progress) return {};
    return [&progress, replica](size_t epoch, size_t batch, size_t batches) {
      progress("replica " + std::string(replica) + ": epoch " + std::to_string(epoch + 1) + ", batch " +
               std::to_string(batch + 1) + "/" + std::to_string(batches));
    };
  };
  auto on_evaluation = [&](const char* replica) -> models::EvaluationFn {
    if (!progress) return {};
    return [&progress, replica](size_t done, size_t total) {
      progress("replica " + std::string(replica) + ": evaluating, " + std::to_string(done) + "/" +
               std::to_string(total) + " test images");
    };
  };
  // Snapshots of A after every step; memory is steps x parameters floats (meant for small runs).
  std::vector<std::vector<std::vector<float>>> snapshots;
  models::train(
      a, data, {}, on_batch("a"),
      [&](uint64_t, models::Model<float>& m) {
        std::vector<std::vector<float>> copy;
        for (const auto& p : named_parameters(m)) copy.push_back(*p.values);
        snapshots.push_back(std::move(copy));
      },
      on_evaluation("a"));
  Divergence d;
  models::train(
      b, data, {}, on_batch("b"),
      [&](uint64_t step, models::Model<float>& m) {
        if (step >= snapshots.size()) return;
        const auto params = named_parameters(m);
        DivergencePoint point{step, 0, 0, 0};
        double norm = 0;
        d.parameters = 0;
        for (size_t k = 0; k < params.size(); ++k) {
          const auto& wb = *params[k].values;
          const auto& wa = snapshots[step][k];
          d.parameters += wa.size();
          for (size_t i = 0; i < wa.size(); ++i) {
            const double diff = static_cast<double>(wa[i]) - wb[i];
            point.l2 += diff * diff;
            norm += static_cast<double>(wa[i]) * wa[i];
            if (std::bit_cast<uint32_t>(wa[i]) != std::bit_cast<uint32_t>(wb[i])) {
              if (d.first_step < 0) d.first_step = static_cast<int64_t>(step);
              if (d.first_step == static_cast<int64_t>(step) &&
                  (d.first_layers.empty() || d.first_layers.back() != params[k].name))
                d.first_layers.push_back(params[k].name);
              ++point.differing;
            }
          }
        }
        point.l2 = std::sqrt(point.l2);
        point.relative = norm > 0 ? point.l2 / std::sqrt(norm) : 0;
        d.curve.push_back(point);
      },
      on_evaluation("b"));
  return d;
}

}  // namespace fplab::experiments
