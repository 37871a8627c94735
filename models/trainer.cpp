#include "models/trainer.hpp"

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "models/checkpoint_io.hpp"
#include "util/sha256.hpp"
#include "models/softmax_cross_entropy.hpp"

namespace fplab::models {
namespace {

std::vector<float> gather(const std::vector<Tensor<float>*>& tensors) {
  std::vector<float> all;
  for (const auto* t : tensors) all.insert(all.end(), t->data.begin(), t->data.end());
  return all;
}
std::vector<Tensor<float>*> values(Model<float>& model) {
  std::vector<Tensor<float>*> v;
  for (auto* p : model.parameters()) v.push_back(&p->value);
  return v;
}
void scatter(std::span<const float> from, const std::vector<Tensor<float>*>& tensors, const std::string& path,
             const std::string& what) {
  size_t at = 0;
  for (auto* t : tensors) {
    if (at + t->size() > from.size()) throw DataError(path, what + " have the wrong size for this model");
    std::copy_n(from.begin() + static_cast<long>(at), t->size(), t->data.begin());
    at += t->size();
  }
  if (at != from.size()) throw DataError(path, what + " have the wrong size for this model");
}

struct Position {
  uint64_t epoch = 0, batch = 0, step = 0;
  double loss_sum = 0;  // of the current epoch's batches so far
};

void save(const TrainConfig& config, Model<float>& model, Optimizer<float>& optimizer, const Position& at,
          const std::vector<EpochReport>& history) {
  CheckpointWriter w;
  const std::string fingerprint = util::sha256_hex(config.fingerprint());
  std::vector<uint64_t> fp_words(4);
  for (size_t i = 0; i < 4; ++i) fp_words[i] = std::stoull(fingerprint.substr(16 * i, 16), nullptr, 16);
  w.add("fingerprint", std::span<const uint64_t>(fp_words));
  w.add_scalar("epoch", at.epoch).add_scalar("batch", at.batch).add_scalar("step", at.step);
  w.add("loss_sum", std::span<const double>(&at.loss_sum, 1));
  const auto params = gather(values(model)), buffers = gather(model.buffers());
  w.add("parameters", std::span<const float>(params));
  w.add("buffers", std::span<const float>(buffers));
  w.add_scalar("optimizer_steps", optimizer.steps());
  for (size_t i = 0; i < optimizer.state().size(); ++i)
    w.add("optimizer_state_" + std::to_string(i), std::span<const float>(optimizer.state()[i]));
  std::vector<double> log;
  for (const auto& e : history)
    log.insert(log.end(), {double(e.epoch), e.train_loss, e.test_accuracy, e.seconds, e.examples_per_second});
  w.add("history", std::span<const double>(log));
  w.write(config.checkpoint);
}

Position load(const TrainConfig& config, Model<float>& model, Optimizer<float>& optimizer,
              std::vector<EpochReport>& history) {
  const auto r = CheckpointReader::read(config.checkpoint);
  const std::string fingerprint = util::sha256_hex(config.fingerprint());
  const auto words = r.u64("fingerprint");
  for (size_t i = 0; i < 4; ++i)
    if (words.size() != 4 || words[i] != std::stoull(fingerprint.substr(16 * i, 16), nullptr, 16))
      throw DataError(config.checkpoint, "checkpoint of a different run (other model, data, seeds or schedules)");
  Position at{r.scalar("epoch"), r.scalar("batch"), r.scalar("step"), r.f64("loss_sum")[0]};
  scatter(r.f32("parameters"), values(model), config.checkpoint, "parameters");
  scatter(r.f32("buffers"), model.buffers(), config.checkpoint, "buffers");
  optimizer.steps() = r.scalar("optimizer_steps");
  optimizer.state().clear();
  for (size_t i = 0; r.has("optimizer_state_" + std::to_string(i)); ++i) {
    const auto s = r.f32("optimizer_state_" + std::to_string(i));
    optimizer.state().emplace_back(s.begin(), s.end());
  }
  const auto log = r.f64("history");
  for (size_t i = 0; i + 5 <= log.size(); i += 5)
    history.push_back({static_cast<size_t>(log[i]), log[i + 1], log[i + 2], log[i + 3], log[i + 4]});
  return at;
}

}  // namespace

namespace {

// A double exactly (hexadecimal significand, "%a"): two values that differ in any bit differ
// here, which std::to_string's six decimals did not (lr 0.0010004 printed as 0.001000).
std::string exact_text(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%a", value);
  return buffer;
}

}  // namespace

std::string TrainConfig::fingerprint() const {
  std::string s = "model=" + model.name + " hidden=";
  for (size_t h : model.hidden) s += std::to_string(h) + ",";
  s += " kernel=" + std::to_string(model.kernel) + " dropout=" + exact_text(model.dropout);
  s += " opt=" + optimizer.kind + " lr=" + exact_text(optimizer.lr) + " momentum=" + exact_text(optimizer.momentum) +
       " wd=" + exact_text(optimizer.weight_decay) + " decay=" + std::to_string(optimizer.decay_every) + "/" +
       exact_text(optimizer.decay_factor);
  s += " epochs=" + std::to_string(epochs) + " batch=" + std::to_string(batch);
  s += " subset=" + std::to_string(selection.subset) + " imbalance=" + std::to_string(selection.imbalance_class) + "/" +
       exact_text(selection.imbalance_percent);
  s += " augment=" + std::to_string(augmentation.pad) + "/" + std::to_string(augmentation.flip);
  s += " ops=" + ops.describe() + " algo=" + std::to_string(algo_seed) + " impl=" + std::to_string(impl_seed);
  s += " order=" + std::to_string(order_seed) + " flip=" + std::to_string(flip_weight);
  s += " eval_every_epoch=" + std::to_string(evaluate_every_epoch);
  return s;
}

std::vector<uint8_t> predict(Model<float>& model, const ImageSet& set, const profiles::OpTable& ops, uint64_t impl_seed,
                             uint64_t call, size_t batch, ComputeBackend* backend, const EvaluationFn& on_evaluation) {
  std::vector<uint8_t> out;
  out.reserve(set.size());
  Context ctx;
  ctx.ops = &ops;
  ctx.backend = backend;
  ctx.impl_seed = impl_seed;
  ctx.training = false;
  for (size_t start = 0; start < set.size(); start += batch) {
    const size_t n = std::min(batch, set.size() - start);
    std::vector<size_t> shape = {n, static_cast<size_t>(set.channels), static_cast<size_t>(set.rows),
                                 static_cast<size_t>(set.cols)};
    Tensor<float> x(shape);
    std::copy_n(set.image(start), n * set.image_size(), x.data.begin());
    ctx.call = call + start / batch;
    const auto p = predictions(model.forward(x, ctx));
    out.insert(out.end(), p.begin(), p.end());
    if (on_evaluation) on_evaluation(out.size(), set.size());
  }
  return out;
}

Model<float> initial_model(const TrainConfig& config, const ImageSet& set) {
  Model<float> model = build_model<float>(
      config.model, {static_cast<size_t>(set.channels), static_cast<size_t>(set.rows), static_cast<size_t>(set.cols)},
      set.classes);
  Context ctx;  // only the algorithmic seed and the layer index reach initialize()
  ctx.ops = &config.ops;
  ctx.impl_seed = config.impl_seed;
  ctx.algo_seed = config.algo_seed;
  model.initialize(ctx);
  if (config.flip_weight >= 0) {  // the lowest mantissa bit of one initial weight
    const auto params = model.parameters();
    size_t total = 0;
    for (auto* p : params) total += p->value.size();
    size_t at = static_cast<size_t>(config.flip_weight) % total;
    for (auto* p : params) {
      if (at < p->value.size()) {
        p->value.data[at] = std::bit_cast<float>(std::bit_cast<uint32_t>(p->value.data[at]) ^ 1u);
        break;
      }
      at -= p->value.size();
    }
  }
  return model;
}

TrainResult train(const TrainConfig& config, const Dataset& data, const ProgressFn& progress, const BatchFn& on_batch,
                  const StepFn& on_step, const EvaluationFn& on_evaluation) {
  using clock = std::chrono::steady_clock;
  const ImageSet& set = data.train;
  const std::vector<size_t> examples = select_training_examples(set.labels, config.selection, config.algo_seed);
  const size_t batch = config.batch == 0 ? examples.size() : std::min(config.batch, examples.size());
  const size_t batches = (examples.size() + batch - 1) / batch;
  if (examples.empty()) throw DataError("training data", "empty after the subset/imbalance selection");

  Model<float> model = initial_model(config, set);
  Optimizer<float> optimizer(config.optimizer);
  Context ctx;
  ctx.ops = &config.ops;
  ctx.backend = config.backend;
  ctx.impl_seed = config.impl_seed;
  ctx.algo_seed = config.algo_seed;
  const uint64_t order_seed = config.order_seed ? config.order_seed : config.algo_seed;

  TrainResult result;
  Position at;
  if (config.resume && !config.checkpoint.empty() && std::filesystem::exists(config.checkpoint)) {
    at = load(config, model, optimizer, result.history);
    result.resumed = true;
  }
  if (on_step && at.step == 0) on_step(0, model);
  SoftmaxCrossEntropy<float> loss_fn;
  std::vector<size_t> batch_examples;
  std::vector<uint8_t> labels;
  for (; at.epoch < config.epochs; ++at.epoch, at.batch = 0, at.loss_sum = 0) {
    const auto started = clock::now();
    const size_t first_batch = at.batch;
    const auto order = epoch_order(examples.size(), order_seed, at.epoch);
    for (; at.batch < batches; ++at.batch) {
      const size_t begin = at.batch * batch, n = std::min(batch, examples.size() - begin);
      batch_examples.resize(n);
      for (size_t i = 0; i < n; ++i) batch_examples[i] = examples[order[begin + i]];
      Tensor<float> x(
          {n, static_cast<size_t>(set.channels), static_cast<size_t>(set.rows), static_cast<size_t>(set.cols)});
      labels.resize(n);
      make_batch(set, batch_examples, config.augmentation, config.algo_seed, at.epoch, data.background(), x.ptr(),
                 labels.data());
      ctx.call = at.step;
      ctx.training = true;
      const float loss = loss_fn.forward(model.forward(x, ctx), labels, ctx);
      model.backward(loss_fn.backward(), ctx);
      optimizer.step(model.parameters(), at.epoch);
      at.loss_sum += loss;
      ++at.step;
      if (on_step) on_step(at.step, model);
      if (on_batch) on_batch(at.epoch, at.batch, batches);
      if (!config.checkpoint.empty() && (at.batch + 1) % config.checkpoint_every == 0 && at.batch + 1 < batches) {
        Position next = at;
        ++next.batch;
        save(config, model, optimizer, next, result.history);
      }
    }
    const double seconds = std::chrono::duration<double>(clock::now() - started).count();
    double accuracy = NAN;
    if (config.evaluate_every_epoch || at.epoch + 1 == config.epochs) {
      result.predictions = predict(model, data.test, config.ops, config.impl_seed, kEvaluationCalls + (at.epoch << 24),
                                   200, config.backend, on_evaluation);
      size_t correct = 0;
      for (size_t i = 0; i < result.predictions.size(); ++i) correct += result.predictions[i] == data.test.labels[i];
      accuracy = static_cast<double>(correct) / static_cast<double>(result.predictions.size());
    }
    EpochReport report{at.epoch + 1, at.loss_sum / static_cast<double>(batches), accuracy, seconds,
                       static_cast<double>(examples.size() - std::min(examples.size(), first_batch * batch)) / seconds};
    result.history.push_back(report);
    if (progress) progress(report);
    if (!config.checkpoint.empty()) {
      Position next{at.epoch + 1, 0, at.step, 0};
      save(config, model, optimizer, next, result.history);
    }
  }
  if (result.history.empty()) throw DataError(config.checkpoint, "already covers all epochs: nothing to train");
  if (result.predictions.empty())  // resumed at the very end: evaluate the final model
    result.predictions = predict(model, data.test, config.ops, config.impl_seed,
                                 kEvaluationCalls + ((config.epochs - 1) << 24), 200, config.backend, on_evaluation);
  result.epochs = config.epochs;
  result.steps = at.step;
  result.test_accuracy = result.history.back().test_accuracy;
  result.train_loss = result.history.back().train_loss;
  result.weights = gather(values(model));
  result.buffers = gather(model.buffers());
  util::Sha256 h;
  h.update(result.weights.data(), result.weights.size() * sizeof(float));
  // A model without buffers (an MLP) has an empty vector, data() null: Sha256::update would
  // memcpy from null, undefined even for 0 bytes (found by scripts/test --sanitize).
  if (!result.buffers.empty()) h.update(result.buffers.data(), result.buffers.size() * sizeof(float));
  result.weights_sha256 = h.hex_digest();
  result.predictions_sha256 = util::sha256_hex(result.predictions.data(), result.predictions.size());
  return result;
}

}  // namespace fplab::models
