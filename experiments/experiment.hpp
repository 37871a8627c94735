// An experiment: one training recipe, run as replicas of several noise variants on one or more
// hardware profiles (docs/architecture.md's variants table), from a TOML file (docs/experiments.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "models/trainer.hpp"

namespace fplab::experiments {

// What varies between the replicas of a group.
enum class Variant {
  algo_impl,  // algo seed and impl seed vary; default-mode schedules
  algo,       // algo seed varies; impl fixed; deterministic-mode schedules
  impl,       // impl seed varies; algo fixed; default-mode schedules
  control,    // nothing varies; deterministic-mode schedules: replicas must be bit-identical
  order,      // only the data order varies; deterministic-mode schedules
  flip,       // replica i > 0 flips the lowest bit of one initial weight; deterministic schedules
};
std::string variant_name(Variant v);  // "algo+impl", "algo", "impl", "control", "order", "flip"
Variant parse_variant(const std::string& text);
// Whether the variant trains with the profile's default-mode schedules (algo+impl, impl) rather
// than its deterministic-mode ones (the rest).
bool uses_default_schedules(Variant v);

struct Experiment {
  std::string name, description;
  std::string paper;           // what the research found, quoted in the report
  std::string path;            // the file it came from
  models::TrainConfig recipe;  // the training recipe (seeds and schedules are set per replica)
  std::string format = "fp32";
  std::vector<std::string> profiles;
  std::vector<Variant> variants;
  size_t replicas = 5;
  uint64_t algo_seed = 1, impl_seed = 1;

  // The training of replica `replica` of (profile, variant), given the profile's op tables.
  models::TrainConfig replica_config(const profiles::OpTable& default_ops, const profiles::OpTable& deterministic_ops,
                                     Variant variant, size_t replica) const;
};

// Errors name the file, the line and the key (one line).
Experiment load_experiment(const std::string& path);
// The same from a file's text; `path` names it in errors (the fuzz harness's entry point).
Experiment parse_experiment(std::string_view text, const std::string& path);

}  // namespace fplab::experiments
