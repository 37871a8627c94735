#include "experiments/experiment.hpp"

#include <toml++/toml.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "fp/format.hpp"
#include "profiles/hw_profile.hpp"
#include "models/recipe_limits.hpp"
#include "util/toml_text.hpp"
#include "util/whole_file.hpp"

namespace fplab::experiments {

std::string variant_name(Variant v) {
  switch (v) {
    case Variant::algo_impl:
      return "algo+impl";
    case Variant::algo:
      return "algo";
    case Variant::impl:
      return "impl";
    case Variant::control:
      return "control";
    case Variant::order:
      return "order";
    case Variant::flip:
      return "flip";
  }
  return "?";
}

Variant parse_variant(const std::string& text) {
  for (Variant v : {Variant::algo_impl, Variant::algo, Variant::impl, Variant::control, Variant::order, Variant::flip})
    if (text == variant_name(v)) return v;
  throw std::invalid_argument("unknown variant '" + text + "' (known: algo+impl, algo, impl, control, order, flip)");
}

bool uses_default_schedules(Variant v) { return v == Variant::algo_impl || v == Variant::impl; }

models::TrainConfig Experiment::replica_config(const profiles::OpTable& default_ops,
                                               const profiles::OpTable& deterministic_ops, Variant variant,
                                               size_t replica) const {
  models::TrainConfig c = recipe;
  const uint64_t i = replica;
  const bool vary_algo = variant == Variant::algo_impl || variant == Variant::algo;
  const bool vary_impl = variant == Variant::algo_impl || variant == Variant::impl;
  c.algo_seed = algo_seed + (vary_algo ? i : 0);
  c.impl_seed = impl_seed + (vary_impl ? i : 0);
  c.ops = uses_default_schedules(variant) ? default_ops : deterministic_ops;
  if (variant == Variant::order) c.order_seed = 1000003 * (algo_seed + i) + 17;
  // Spread the flipped weights over the model (a large odd stride, taken modulo the count).
  if (variant == Variant::flip && replica > 0) c.flip_weight = static_cast<int64_t>((replica - 1) * 7919 + 11);
  return c;
}

namespace {

struct Reader {
  const std::string& path;
  std::set<std::string> allowed;

  [[noreturn]] void fail(const toml::node& node, const std::string& key, const std::string& problem) const {
    throw std::runtime_error(path + ":" + std::to_string(node.source().begin.line) + ": key '" + key + "': " + problem);
  }
  void check_keys(const toml::table& table, const std::string& section, std::initializer_list<const char*> keys) const {
    std::set<std::string> known(keys.begin(), keys.end());
    for (const auto& [k, node] : table)
      if (!known.count(std::string(k.str()))) {
        std::string list;
        for (const char* key : keys) list += (list.empty() ? "" : ", ") + std::string(key);
        fail(node, section + std::string(k.str()), "unknown key (known here: " + list + ")");
      }
  }
  template <class T>
  T get(const toml::table& t, const std::string& section, const char* key, T fallback) const {
    const toml::node* node = t.get(key);
    if (!node) return fallback;
    if constexpr (std::is_same_v<T, std::string>) {
      if (auto v = node->as_string()) return v->get();
      fail(*node, section + key, "must be a string");
    } else if constexpr (std::is_same_v<T, bool>) {
      if (auto v = node->as_boolean()) return v->get();
      fail(*node, section + key, "must be true or false");
    } else if constexpr (std::is_floating_point_v<T>) {
      if (auto v = node->as_floating_point()) return static_cast<T>(v->get());
      if (auto v = node->as_integer()) return static_cast<T>(v->get());
      fail(*node, section + key, "must be a number");
    } else {
      if (auto v = node->as_integer()) {
        if (v->get() < 0) fail(*node, section + key, "must not be negative");
        return static_cast<T>(v->get());
      }
      fail(*node, section + key, "must be a whole number");
    }
  }
  // A number under the recipe's rule (models/recipe_limits.hpp): the same as `fplab train`'s.
  double number(const toml::table& t, const std::string& section, const char* key, double fallback) const {
    const double value = get<double>(t, section, key, fallback);
    if (const toml::node* node = t.get(key)) {
      if (const auto* whole = node->as_integer())
        return static_cast<double>(checked_whole(*node, section, key, whole->get()));
      try {
        models::check_recipe_number(key, value);
      } catch (const std::invalid_argument& e) {
        fail(*node, section + key, e.what());
      }
    }
    return value;
  }
  int64_t whole(const toml::table& t, const std::string& section, const char* key, int64_t fallback) const {
    const toml::node* node = t.get(key);
    if (!node) return fallback;
    const auto* value = node->as_integer();
    if (!value) fail(*node, section + key, "must be a whole number");
    return checked_whole(*node, section, key, value->get());
  }
  int64_t checked_whole(const toml::node& node, const std::string& section, const char* key, int64_t value) const {
    try {
      models::check_recipe_integer(key, value);
    } catch (const std::invalid_argument& e) {
      fail(node, section + key, e.what());
    }
    return value;
  }
  std::vector<std::string> strings(const toml::table& t, const std::string& section, const char* key) const {
    std::vector<std::string> out;
    const toml::node* node = t.get(key);
    if (!node) return out;
    const auto* array = node->as_array();
    if (!array) fail(*node, section + key, "must be an array of strings");
    for (const auto& e : *array) {
      if (!e.as_string()) fail(*node, section + key, "must be an array of strings");
      out.push_back(e.as_string()->get());
    }
    return out;
  }
  const toml::table& section(const toml::table& doc, const char* name) const {
    static const toml::table empty;
    const toml::node* node = doc.get(name);
    if (!node) return empty;
    if (!node->as_table()) fail(*node, name, "must be a table [" + std::string(name) + "]");
    return *node->as_table();
  }
};

}  // namespace

Experiment load_experiment(const std::string& path) { return parse_experiment(util::read_text_file(path), path); }

Experiment parse_experiment(std::string_view text, const std::string& path) {
  const toml::table doc = util::parse_toml<std::runtime_error>(text, path);
  const Reader r{path, {}};
  r.check_keys(doc, "", {"name", "description", "paper", "data", "model", "training", "run"});
  Experiment x;
  x.path = path;
  x.name = r.get<std::string>(doc, "", "name", "");
  if (x.name.empty()) throw std::runtime_error(path + ": missing key 'name'");
  x.description = r.get<std::string>(doc, "", "description", "");
  x.paper = r.get<std::string>(doc, "", "paper", "");

  const auto& data = r.section(doc, "data");
  r.check_keys(data, "data.", {"train_subset", "imbalance_class", "imbalance_percent", "augment_pad", "flip"});
  auto& c = x.recipe;
  c.evaluate_every_epoch = false;  // the metrics use the final model only
  c.selection.subset = static_cast<size_t>(r.whole(data, "data.", "train_subset", 0));
  c.selection.imbalance_class = static_cast<int>(r.whole(data, "data.", "imbalance_class", -1));
  c.selection.imbalance_percent = r.number(data, "data.", "imbalance_percent", 100);
  c.augmentation.pad = static_cast<int>(r.whole(data, "data.", "augment_pad", 0));
  c.augmentation.flip = r.get<bool>(data, "data.", "flip", false);

  const auto& model = r.section(doc, "model");
  r.check_keys(model, "model.", {"name", "hidden", "kernel", "dropout"});
  c.model.name = r.get<std::string>(model, "model.", "name", "mlp");
  if (const auto* hidden = model.get("hidden")) {
    c.model.hidden.clear();
    if (!hidden->as_array()) r.fail(*hidden, "model.hidden", "must be an array of sizes");
    for (const auto& h : *hidden->as_array()) {
      if (!h.as_integer()) r.fail(*hidden, "model.hidden", "must be an array of whole numbers");
      c.model.hidden.push_back(static_cast<size_t>(r.checked_whole(h, "model.", "hidden", h.as_integer()->get())));
    }
  }
  c.model.kernel = static_cast<size_t>(r.whole(model, "model.", "kernel", 3));
  c.model.dropout = r.number(model, "model.", "dropout", 0);

  const auto& training = r.section(doc, "training");
  r.check_keys(training, "training.",
               {"epochs", "batch", "optimizer", "lr", "momentum", "weight_decay", "lr_decay_every", "lr_decay_factor"});
  c.epochs = static_cast<size_t>(r.whole(training, "training.", "epochs", 1));
  c.batch = static_cast<size_t>(r.whole(training, "training.", "batch", 64));
  c.optimizer.kind = r.get<std::string>(training, "training.", "optimizer", "adam");
  c.optimizer.lr = r.number(training, "training.", "lr", 1e-3);
  c.optimizer.momentum = r.number(training, "training.", "momentum", 0.9);
  c.optimizer.weight_decay = r.number(training, "training.", "weight_decay", 0);
  c.optimizer.decay_every = static_cast<size_t>(r.whole(training, "training.", "lr_decay_every", 0));
  c.optimizer.decay_factor = r.number(training, "training.", "lr_decay_factor", 0.1);

  const auto& run = r.section(doc, "run");
  r.check_keys(run, "run.", {"profiles", "variants", "replicas", "algo_seed", "impl_seed", "format"});
  x.profiles = r.strings(run, "run.", "profiles");
  if (x.profiles.empty()) throw std::runtime_error(path + ": key 'run.profiles' must name at least one profile");
  // A profile given by a relative path is looked for beside the experiment file first, so that an
  // experiment and its own profiles travel together; otherwise it is relative to where fplab runs.
  for (auto& p : x.profiles) {
    std::error_code ec;
    const std::filesystem::path beside = std::filesystem::path(path).parent_path() / p;
    if (profiles::is_hw_profile_path(p) && std::filesystem::path(p).is_relative() &&
        std::filesystem::is_regular_file(beside, ec))
      p = beside.lexically_normal().string();
  }
  for (const auto& v : r.strings(run, "run.", "variants")) {
    try {
      x.variants.push_back(parse_variant(v));
    } catch (const std::invalid_argument& e) {
      r.fail(*run.get("variants"), "run.variants", e.what());
    }
  }
  if (x.variants.empty()) x.variants = {Variant::algo_impl, Variant::algo, Variant::impl, Variant::control};
  x.replicas = static_cast<size_t>(r.whole(run, "run.", "replicas", 5));  // at least 2: churn needs pairs
  x.algo_seed = r.get<uint64_t>(run, "run.", "algo_seed", 1);
  x.impl_seed = r.get<uint64_t>(run, "run.", "impl_seed", 1);
  x.format = r.get<std::string>(run, "run.", "format", "fp32");
  return x;
}

}  // namespace fplab::experiments
