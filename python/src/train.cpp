// fplab._core.train: the C++ training loop of `fplab train` (models/trainer.hpp train()) from
// Python, with a callback after every optimiser step. It is the reference a PyTorch reproduction
// is held to step by step (python/tests/test_torch_crosscheck.py: where two runs part, the first
// step and tensor that differ), without a file per step.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "models/trainer.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

// {op kind: OpChoice} (a Profile's default or deterministic, or fplab.torch's Table.choices) and
// its layer rules as an OpTable; every kind must be there.
profiles::OpTable op_table(const py::dict& ops, const std::vector<profiles::LayerRule>& layer_rules,
                           const std::string& conv_dgrad) {
  profiles::OpTable table;
  table.layer_rules = layer_rules;
  if (conv_dgrad != "col2im" && conv_dgrad != "direct")
    throw std::invalid_argument("train: conv_dgrad must be 'col2im' or 'direct' (got '" + conv_dgrad + "')");
  table.conv_dgrad = conv_dgrad == "direct" ? profiles::ConvDgrad::direct : profiles::ConvDgrad::col2im;
  for (const profiles::OpKind kind : profiles::all_op_kinds) {
    const py::str name(std::string(profiles::op_kind_name(kind)));
    if (!ops.contains(name))
      throw std::invalid_argument("train: ops has no '" + std::string(profiles::op_kind_name(kind)) + "' entry");
    table[kind] = ops[name].cast<profiles::OpChoice>();
  }
  return table;
}

template <class T>
py::array_t<T> copy_out(const std::vector<T>& v) {
  py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

py::dict train(const std::shared_ptr<models::Dataset>& data, const py::dict& ops, const std::string& model,
               const std::vector<size_t>& hidden, size_t kernel, double dropout, const std::string& optimizer,
               double lr, double momentum, double weight_decay, size_t decay_every, double decay_factor, size_t epochs,
               size_t batch, size_t subset, int imbalance_class, double imbalance_percent, int augment_pad, bool flip,
               uint64_t algo_seed, uint64_t impl_seed, const std::function<void(uint64_t, py::array_t<float>)>& on_step,
               const std::vector<profiles::LayerRule>& layer_rules, const std::string& conv_dgrad) {
  if (!data) throw std::invalid_argument("train: data must be a Dataset (fplab._core.load_fashion_mnist())");
  models::TrainConfig config;
  config.model = {model, hidden, kernel, dropout};
  config.optimizer.kind = optimizer;
  config.optimizer.lr = lr;
  config.optimizer.momentum = momentum;
  config.optimizer.weight_decay = weight_decay;
  config.optimizer.decay_every = decay_every;
  config.optimizer.decay_factor = decay_factor;
  config.epochs = epochs;
  config.batch = batch;
  config.selection = {subset, imbalance_class, imbalance_percent};
  config.augmentation = {augment_pad, flip};
  config.ops = op_table(ops, layer_rules, conv_dgrad);
  config.algo_seed = algo_seed;
  config.impl_seed = impl_seed;
  models::StepFn step_fn;
  if (on_step)
    step_fn = [&](uint64_t step, models::Model<float>& m) {
      std::vector<float> weights;
      for (auto* p : m.parameters()) weights.insert(weights.end(), p->value.data.begin(), p->value.data.end());
      py::gil_scoped_acquire locked;
      on_step(step, copy_out(weights));
    };
  models::TrainResult r;
  {
    py::gil_scoped_release unlocked;
    r = models::train(config, *data, {}, {}, step_fn);
  }
  std::vector<uint8_t> predictions(r.predictions.begin(), r.predictions.end());
  return py::dict(py::arg("weights") = copy_out(r.weights), py::arg("buffers") = copy_out(r.buffers),
                  py::arg("predictions") = copy_out(predictions), py::arg("train_loss") = r.train_loss,
                  py::arg("test_accuracy") = r.test_accuracy, py::arg("steps") = r.steps,
                  py::arg("weights_sha256") = r.weights_sha256, py::arg("predictions_sha256") = r.predictions_sha256);
}

}  // namespace

void bind_train(py::module_& m) {
  // The defaults are fplab train's (apps/cmd_train.cpp).
  m.def("train", &train, py::arg("data"), py::arg("ops"), py::kw_only(), py::arg("model") = "mlp",
        py::arg("hidden") = std::vector<size_t>{128}, py::arg("kernel") = 3, py::arg("dropout") = 0.0,
        py::arg("optimizer") = "adam", py::arg("lr") = 0.001, py::arg("momentum") = 0.9, py::arg("weight_decay") = 0.0,
        py::arg("decay_every") = 0, py::arg("decay_factor") = 0.1, py::arg("epochs") = 1, py::arg("batch") = 64,
        py::arg("subset") = 0, py::arg("imbalance_class") = -1, py::arg("imbalance_percent") = 100.0,
        py::arg("augment_pad") = 0, py::arg("flip") = false, py::arg("algo_seed") = 1, py::arg("impl_seed") = 1,
        py::arg("on_step") = nullptr, py::arg("layer_rules") = std::vector<profiles::LayerRule>{},
        py::arg("conv_dgrad") = "col2im",
        "Train as fplab train does (models::train) on a Dataset with ops {op kind: OpChoice} (a Profile's default or "
        "deterministic), its layer_rules (a Profile's layer_rules[mode]) and conv_dgrad (its conv_dgrad[mode]); on_step(step, weights) with the initial "
        "weights (step 0) and after every optimiser step "
        "(weights: every "
        "parameter in model order, float32). Returns {'weights', 'buffers', 'predictions', 'train_loss', "
        "'test_accuracy', 'steps', "
        "'weights_sha256', 'predictions_sha256'}.");
}

}  // namespace fplab::python
