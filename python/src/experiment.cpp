// fplab._core.Experiment, ReplicaRecord and OutputFolder: what fplab.torch.experiment() needs to
// run the noise variants of a user's own PyTorch model and leave the same files as `fplab run`.
// Python trains the replicas (python/fplab/torch/experiment.py); everything else is the C++ of
// `fplab run`, so that the two cannot drift apart:
//
// - the recipe's numbers checked by models/recipe_limits (the TOML files' rule), the variants,
//   profiles and replica count checked before anything is written;
// - each replica's seeds and schedule mode from Experiment::replica_config (which seed varies in
//   which variant, the order seed, the flipped weight);
// - the replica files (experiments/replica_file.hpp: the same .ckpt files, resumable), the output
//   folder's lock and marker (experiments/output_folder.hpp);
// - the statistics (experiments::summarize) and every result file (experiments::write_results).
#include <pybind11/stl.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "experiments/group_summary.hpp"
#include "experiments/output_folder.hpp"
#include "experiments/recipe.hpp"
#include "experiments/replica_file.hpp"
#include "experiments/report.hpp"
#include "models/recipe_limits.hpp"
#include "profiles/hw_profile.hpp"
#include "python/src/bindings.hpp"
#include "util/file_name.hpp"
#include "util/sha256.hpp"
#include "util/version.hpp"

namespace fplab::python {
namespace {

using experiments::Variant;

// An experiment whose recipe Python describes, with its profiles' tables resolved once.
struct PythonExperiment {
  experiments::Experiment spec;
  std::vector<std::pair<profiles::OpTable, profiles::OpTable>> tables;  // per profile: default, deterministic
};

// A claimed output folder that Python can release when it is done, not when it is collected.
struct ClaimedFolder {
  std::unique_ptr<experiments::OutputFolder> folder;
};

// One replica to train: where it sits and what it trains with.
struct ReplicaJob {
  std::string profile;
  Variant variant;
  size_t replica;
  models::TrainConfig config;  // the seeds, the schedules' mode, the order seed, the flipped weight
};

// The profile name of replicas trained by PyTorch's own kernels, not emulated (fplab.torch.experiment).
constexpr const char* kNativeProfile = "native";

[[noreturn]] void refuse(const std::string& key, const std::string& problem) {
  throw std::invalid_argument("fplab.torch.experiment: " + key + " " + problem);
}

double number(const char* key, double value) {
  try {
    models::check_recipe_number(key, value);
  } catch (const std::invalid_argument& e) {
    refuse(std::string("recipe '") + key + "'", e.what());
  }
  return value;
}

int64_t whole(const char* key, int64_t value, const char* where = "recipe") {
  try {
    models::check_recipe_integer(key, value);
  } catch (const std::invalid_argument& e) {
    refuse(std::string(where) + " '" + key + "'", e.what());
  }
  return value;
}

std::shared_ptr<PythonExperiment> make_experiment(const std::string& name, const std::string& description,
                                                  const std::string& source, const std::string& model, int64_t epochs,
                                                  int64_t batch, const std::string& optimizer, double lr,
                                                  double momentum, double weight_decay, int64_t lr_decay_every,
                                                  double lr_decay_factor, const std::vector<std::string>& profile_names,
                                                  const std::vector<std::string>& variants, int64_t replicas,
                                                  uint64_t algo_seed, uint64_t impl_seed,
                                                  const std::vector<std::string>& profiles_dir) {
  auto x = std::make_shared<PythonExperiment>();
  auto& e = x->spec;
  if (name.empty()) refuse("name", "must not be empty");
  e.name = name;
  e.description = description;
  e.path = source;
  auto& c = e.recipe;
  c.evaluate_every_epoch = false;  // as fplab run: the metrics use the final model only
  c.model.name = model;
  c.model.hidden.clear();
  c.epochs = static_cast<size_t>(whole("epochs", epochs));
  c.batch = static_cast<size_t>(whole("batch", batch));
  if (optimizer != "adam" && optimizer != "sgd")
    refuse("recipe 'optimizer'", "must be 'adam' or 'sgd', not '" + optimizer + "'");
  c.optimizer.kind = optimizer;
  c.optimizer.lr = number("lr", lr);
  c.optimizer.momentum = number("momentum", momentum);
  c.optimizer.weight_decay = number("weight_decay", weight_decay);
  c.optimizer.decay_every = static_cast<size_t>(whole("lr_decay_every", lr_decay_every));
  c.optimizer.decay_factor = number("lr_decay_factor", lr_decay_factor);
  if (variants.empty()) refuse("variants", "must name at least one variant");
  std::set<std::string> seen;
  for (const auto& v : variants) {
    try {
      e.variants.push_back(experiments::parse_variant(v));
    } catch (const std::invalid_argument& error) {
      refuse("variants:", error.what());
    }
    if (!seen.insert(v).second) refuse("variants", "name '" + v + "' twice");
  }
  e.replicas = static_cast<size_t>(whole("replicas", replicas, "argument"));
  e.algo_seed = algo_seed;
  e.impl_seed = impl_seed;
  if (profile_names.empty()) refuse("profiles", "must name at least one profile");
  std::set<std::string> named;
  for (const auto& p : profile_names) {
    if (!named.insert(p).second) refuse("profiles", "name '" + p + "' twice");
    if (p == kNativeProfile) {  // PyTorch's own kernels: Python trains it without fplab's tables
      x->tables.emplace_back();
      continue;
    }
    const auto profile = profiles::find_hw_profile(p, profiles_dir);  // an unknown one: its one-line error
    x->tables.emplace_back(profile.default_ops, profile.deterministic_ops);
  }
  e.profiles = profile_names;
  return x;
}

std::vector<ReplicaJob> jobs(const PythonExperiment& x) {
  std::vector<ReplicaJob> out;
  const auto& e = x.spec;
  for (size_t p = 0; p < e.profiles.size(); ++p)
    for (Variant v : e.variants)
      for (size_t i = 0; i < e.replicas; ++i)
        out.push_back({e.profiles[p], v, i, e.replica_config(x.tables[p].first, x.tables[p].second, v, i)});
  return out;
}

// The output folder's refusals name fplab run's flags; from Python they are arguments.
std::string as_arguments(std::string message) {
  for (const auto& [flag, argument] :
       {std::pair<std::string, std::string>{"--resume", "resume=True"}, {"--force", "force=True"}, {"--out", "out"}}) {
    for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at + argument.size()))
      message.replace(at, flag.size(), argument);
  }
  return message;
}

template <class T>
std::vector<T> to_vector(const py::array_t<T, py::array::c_style | py::array::forcecast>& a) {
  return std::vector<T>(a.data(), a.data() + a.size());
}

template <class T>
py::array_t<T> to_array(const std::vector<T>& v) {
  py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

experiments::ReplicaRecord make_record(
    const std::string& profile, const std::string& variant, size_t replica, uint64_t algo_seed, uint64_t impl_seed,
    double test_accuracy, double train_loss, double seconds,
    const py::array_t<uint8_t, py::array::c_style | py::array::forcecast>& predictions,
    const py::array_t<float, py::array::c_style | py::array::forcecast>& weights,
    const py::array_t<float, py::array::c_style | py::array::forcecast>& buffers) {
  experiments::ReplicaRecord r;
  r.profile = profile;
  r.variant = experiments::parse_variant(variant);
  r.replica = replica;
  r.algo_seed = algo_seed;
  r.impl_seed = impl_seed;
  r.test_accuracy = test_accuracy;
  r.train_loss = train_loss;
  r.seconds = seconds;
  r.predictions = to_vector(predictions);
  r.weights = to_vector(weights);
  r.buffers = to_vector(buffers);
  r.weights_sha256 = experiments::weights_sha256(r.weights, r.buffers);
  r.predictions_sha256 = util::sha256_hex(r.predictions.data(), r.predictions.size());
  return r;
}

const ReplicaJob& job_at(const std::vector<ReplicaJob>& all, size_t index) {
  if (index >= all.size())
    throw std::invalid_argument("Experiment: replica job " + std::to_string(index) + " does not exist (" +
                                std::to_string(all.size()) + " jobs)");
  return all[index];
}

// summarize() and write_results(), as fplab run calls them; returns summary.json's text and the
// terminal table.
py::dict write_results(const PythonExperiment& x, const std::vector<experiments::ReplicaRecord>& records,
                       const py::array_t<uint8_t, py::array::c_style | py::array::forcecast>& test_labels,
                       const std::vector<std::string>& class_names, const std::string& out_dir,
                       const std::string& command) {
  const std::vector<uint8_t> labels = to_vector(test_labels);
  for (const auto& r : records)
    if (r.predictions.size() != labels.size())
      throw std::invalid_argument("Experiment.write_results: a replica has " + std::to_string(r.predictions.size()) +
                                  " predictions for " + std::to_string(labels.size()) + " test labels");
  const experiments::Provenance provenance{command, util::version()};
  std::vector<experiments::GroupSummary> groups;
  {
    py::gil_scoped_release unlocked;
    groups = experiments::summarize(x.spec, records, labels, class_names.size());
    experiments::write_results(x.spec, records, groups, class_names, out_dir, provenance);
  }
  return py::dict(py::arg("summary") = experiments::summary_json(x.spec, groups, provenance).dump(),
                  py::arg("table") = experiments::summary_table(groups));
}

}  // namespace

void bind_experiment(py::module_& m) {
  using experiments::ReplicaRecord;
  m.def(
      "load_experiment_file",
      [](const std::string& path) {
        const experiments::Experiment x = experiments::load_experiment(path);
        nlohmann::json recipe = experiments::recipe_json(x);
        recipe["name"] = x.name;
        recipe["description"] = x.description;
        return recipe.dump();
      },
      py::arg("path"),
      "An experiment TOML file read and checked as fplab run reads it (errors: one line naming the file, line "
      "and key), as JSON text: name, description and its sections data, model, training and run with every "
      "default filled in.");
  py::class_<ReplicaRecord>(m, "ReplicaRecord",
                            "One trained replica's results (experiments::ReplicaRecord); the SHA-256s are computed "
                            "from the arrays as fplab run computes them.")
      .def(py::init(&make_record), py::arg("profile"), py::arg("variant"), py::arg("replica"), py::arg("algo_seed"),
           py::arg("impl_seed"), py::arg("test_accuracy"), py::arg("train_loss"), py::arg("seconds"),
           py::arg("predictions"), py::arg("weights"), py::arg("buffers"))
      .def_readonly("profile", &ReplicaRecord::profile)
      .def_property_readonly("variant", [](const ReplicaRecord& r) { return experiments::variant_name(r.variant); })
      .def_readonly("replica", &ReplicaRecord::replica)
      .def_readonly("algo_seed", &ReplicaRecord::algo_seed)
      .def_readonly("impl_seed", &ReplicaRecord::impl_seed)
      .def_readonly("test_accuracy", &ReplicaRecord::test_accuracy)
      .def_readonly("train_loss", &ReplicaRecord::train_loss)
      .def_readonly("seconds", &ReplicaRecord::seconds)
      .def_readonly("weights_sha256", &ReplicaRecord::weights_sha256)
      .def_readonly("predictions_sha256", &ReplicaRecord::predictions_sha256)
      .def_property_readonly("predictions", [](const ReplicaRecord& r) { return to_array(r.predictions); })
      .def_property_readonly("weights", [](const ReplicaRecord& r) { return to_array(r.weights); })
      .def_property_readonly("buffers", [](const ReplicaRecord& r) { return to_array(r.buffers); });

  m.attr("NATIVE_PROFILE") = kNativeProfile;
  py::class_<PythonExperiment, std::shared_ptr<PythonExperiment>>(
      m, "Experiment",
      "An experiment of fplab.torch.experiment(): the recipe checked as fplab run checks a TOML file, and its "
      "replica jobs.")
      .def(py::init(&make_experiment), py::arg("name"), py::kw_only(), py::arg("description") = "",
           py::arg("source") = "", py::arg("model") = "", py::arg("epochs") = 1, py::arg("batch") = 64,
           py::arg("optimizer") = "adam", py::arg("lr") = 1e-3, py::arg("momentum") = 0.9,
           py::arg("weight_decay") = 0.0, py::arg("lr_decay_every") = 0, py::arg("lr_decay_factor") = 0.1,
           py::arg("profiles"), py::arg("variants"), py::arg("replicas") = 5, py::arg("algo_seed") = 1,
           py::arg("impl_seed") = 1, py::arg("profiles_dir") = std::vector<std::string>{})
      .def_property_readonly("name", [](const PythonExperiment& x) { return x.spec.name; })
      .def_property_readonly("default_out",
                             [](const PythonExperiment& x) { return "results/" + util::safe_file_stem(x.spec.name); })
      .def(
          "jobs",
          [](const PythonExperiment& x) {
            py::list out;
            for (const auto& j : jobs(x)) {
              const auto& c = j.config;
              out.append(py::dict(py::arg("profile") = j.profile,
                                  py::arg("variant") = experiments::variant_name(j.variant),
                                  py::arg("replica") = j.replica, py::arg("algo_seed") = c.algo_seed,
                                  py::arg("impl_seed") = c.impl_seed, py::arg("order_seed") = c.order_seed,
                                  py::arg("flip_weight") = c.flip_weight,
                                  py::arg("deterministic") = !experiments::uses_default_schedules(j.variant)));
            }
            return out;
          },
          "Every replica in fplab run's order (profile, variant, replica): {'profile', 'variant', 'replica', "
          "'algo_seed', 'impl_seed', 'order_seed' (0: the algo seed orders the data), 'flip_weight' (-1: none), "
          "'deterministic' (the profile's deterministic-mode table)}.")
      .def(
          "load_replica",
          [](const PythonExperiment& x, const std::string& out_dir, size_t index,
             const std::string& source) -> std::optional<ReplicaRecord> {
            const auto all = jobs(x);
            const ReplicaJob& j = job_at(all, index);
            ReplicaRecord r;
            if (!experiments::load_replica(experiments::replica_path(out_dir, j.profile, j.variant, j.replica),
                                           experiments::replica_fingerprint(j.config, source), r))
              return std::nullopt;
            r.profile = j.profile;
            r.variant = j.variant;
            r.replica = j.replica;
            return r;
          },
          py::arg("out_dir"), py::arg("job"), py::arg("source"),
          "Job `job`'s record from out_dir/replicas/ if an earlier run finished it with the same recipe and the same "
          "`source` (what identifies the model and data); None otherwise.")
      .def(
          "save_replica",
          [](const PythonExperiment& x, const std::string& out_dir, size_t index, const ReplicaRecord& record,
             const std::string& source) {
            const auto all = jobs(x);
            const ReplicaJob& j = job_at(all, index);
            if (record.profile != j.profile || record.variant != j.variant || record.replica != j.replica)
              throw std::invalid_argument("Experiment.save_replica: the record is not job " + std::to_string(index) +
                                          "'s");
            std::filesystem::create_directories(out_dir + "/replicas");
            experiments::save_replica(experiments::replica_path(out_dir, j.profile, j.variant, j.replica), record,
                                      experiments::replica_fingerprint(j.config, source));
          },
          py::arg("out_dir"), py::arg("job"), py::arg("record"), py::arg("source"),
          "Writes job `job`'s record atomically into out_dir/replicas/ (what resume reuses).")
      .def("write_results", &write_results, py::arg("records"), py::arg("test_labels"), py::arg("class_names"),
           py::arg("out_dir"), py::arg("command"),
           "experiments::summarize and write_results, as fplab run: summary.json, replicas.csv, per_class.csv, "
           "pairs.csv, report.md, report.html, figures/. Returns {'summary': summary.json's text, 'table': the "
           "terminal table}.");

  py::class_<ClaimedFolder>(m, "OutputFolder",
                            "The output folder claimed for one run (experiments::OutputFolder): a lock held until "
                            "release(), and a marker naming the experiment.")
      .def(py::init([](const std::string& path, const std::string& name, bool resume, bool force) {
             try {
               return ClaimedFolder{std::make_unique<experiments::OutputFolder>(
                   path, name, experiments::ClaimOptions{resume, force, 0, 1})};
             } catch (const std::runtime_error& e) {
               throw std::runtime_error(as_arguments(e.what()));
             }
           }),
           py::arg("path"), py::arg("name"), py::kw_only(), py::arg("resume") = false, py::arg("force") = false)
      .def_property_readonly("leftovers_removed",
                             [](const ClaimedFolder& f) { return f.folder ? f.folder->leftovers_removed() : 0; })
      .def(
          "release", [](ClaimedFolder& f) { f.folder.reset(); },
          "Releases the lock (also when the object is collected); the marker stays.");
}

}  // namespace fplab::python
