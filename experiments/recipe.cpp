#include "experiments/recipe.hpp"

#include <sstream>

namespace fplab::experiments {

nlohmann::json recipe_json(const Experiment& x) {
  const auto& c = x.recipe;
  nlohmann::json variants = nlohmann::json::array();
  for (Variant v : x.variants) variants.push_back(variant_name(v));
  nlohmann::json data = {
      {"train_subset", c.selection.subset}, {"augment_pad", c.augmentation.pad}, {"flip", c.augmentation.flip}};
  if (c.selection.imbalance_class >= 0) {
    data["imbalance_class"] = c.selection.imbalance_class;
    data["imbalance_percent"] = c.selection.imbalance_percent;
  }
  nlohmann::json model = {{"name", c.model.name}, {"dropout", c.model.dropout}};
  if (c.model.name == "mlp") model["hidden"] = c.model.hidden;
  if (c.model.name == "medium_cnn") model["kernel"] = c.model.kernel;
  nlohmann::json training = {
      {"epochs", c.epochs}, {"batch", c.batch}, {"optimizer", c.optimizer.kind}, {"lr", c.optimizer.lr}};
  if (c.optimizer.kind == "sgd") {
    training["momentum"] = c.optimizer.momentum;
    training["weight_decay"] = c.optimizer.weight_decay;
    training["lr_decay_every"] = c.optimizer.decay_every;
    training["lr_decay_factor"] = c.optimizer.decay_factor;
  }
  return {{"file", x.path},
          {"data", data},
          {"model", model},
          {"training", training},
          {"run",
           {{"profiles", x.profiles},
            {"variants", variants},
            {"replicas", x.replicas},
            {"algo_seed", x.algo_seed},
            {"impl_seed", x.impl_seed},
            {"format", x.format}}}};
}

std::string recipe_text(const Experiment& x) {
  const auto& c = x.recipe;
  std::ostringstream s;
  s << "model " << c.model.name;
  if (c.model.name == "mlp") {
    s << " (hidden";
    for (size_t h : c.model.hidden) s << " " << h;
    s << ")";
  }
  if (c.model.dropout > 0) s << ", dropout " << c.model.dropout;
  s << "; " << c.epochs << " epoch(s), batch " << c.batch << ", " << c.optimizer.kind << " lr " << c.optimizer.lr;
  if (c.optimizer.kind == "sgd")
    s << " momentum " << c.optimizer.momentum << " weight decay " << c.optimizer.weight_decay;
  s << "; training subset " << (c.selection.subset ? std::to_string(c.selection.subset) : "all");
  if (c.selection.imbalance_class >= 0)
    s << " (class " << c.selection.imbalance_class << " kept at " << c.selection.imbalance_percent << " %)";
  if (c.augmentation.enabled())
    s << ", augmentation pad " << c.augmentation.pad << (c.augmentation.flip ? " + flips" : "");
  s << "; " << x.replicas << " replicas per variant (algo seed " << x.algo_seed << ", impl seed " << x.impl_seed
    << "); accumulation " << x.format << "; from " << x.path << ".";
  return s.str();
}

}  // namespace fplab::experiments
