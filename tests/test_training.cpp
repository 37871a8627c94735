// Training replay on real Fashion-MNIST (dataset-fashion-mnist): determinism per seed pair,
// sensitivity to the impl seed exactly where schedules are nondeterministic, order independence
// under exact arithmetic, accuracy, and resuming a killed run to the same bits.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>

#include "models/trainer.hpp"

using namespace fplab;
using namespace fplab::models;

namespace {

const Dataset& data() {
  static const Dataset d = load_fashion_mnist();
  return d;
}

TrainConfig small_run(const char* schedules, uint64_t impl_seed, size_t subset = 2000) {
  TrainConfig c;
  c.model.hidden = {32};
  c.optimizer.kind = "adam";
  c.optimizer.lr = 1e-3;
  c.batch = 64;
  c.selection.subset = subset;
  c.ops = profiles::op_table_preset(schedules);
  c.impl_seed = impl_seed;
  return c;
}

// Every op's schedule is "shuffle | all:exact": a different order of terms in every call.
profiles::OpTable shuffled_exact() {
  profiles::OpTable t = profiles::op_table_preset("exact");
  for (auto& op : t.ops) op.schedule = fplab::sim::parse_schedule("shuffle | all:exact");
  return t;
}

}  // namespace

TEST_CASE("training: the same (algo, impl) seeds replay bit for bit, even with atomics (gpu schedules)") {
  const auto a = train(small_run("gpu", 5), data());
  const auto b = train(small_run("gpu", 5), data());
  CHECK(a.weights_sha256 == b.weights_sha256);
  CHECK(a.predictions_sha256 == b.predictions_sha256);
  CHECK(a.weights == b.weights);
}

TEST_CASE("training: another impl seed changes the weights under atomic schedules, and nothing under seq") {
  CHECK(train(small_run("atomic", 1), data()).weights_sha256 != train(small_run("atomic", 2), data()).weights_sha256);
  CHECK(train(small_run("seq", 1), data()).weights_sha256 == train(small_run("seq", 2), data()).weights_sha256);
}

TEST_CASE("training: exact arithmetic gives the same weights whatever the order of the terms and the impl seed") {
  TrainConfig plain = small_run("exact", 1, 1000);
  TrainConfig shuffled = small_run("exact", 2, 1000);
  shuffled.ops = shuffled_exact();
  TrainConfig shuffled_other_seed = shuffled;
  shuffled_other_seed.impl_seed = 3;
  const auto a = train(plain, data()), b = train(shuffled, data()), c = train(shuffled_other_seed, data());
  CHECK(a.weights_sha256 == b.weights_sha256);
  CHECK(a.weights_sha256 == c.weights_sha256);
  CHECK(a.predictions_sha256 == c.predictions_sha256);
  // ...while a nondeterministic order in fp32 does move the weights.
  CHECK(train(small_run("atomic", 2, 1000), data()).weights_sha256 !=
        train(small_run("atomic", 3, 1000), data()).weights_sha256);
}

TEST_CASE("training: mlp (784-128-10, Adam 1e-3, batch 64) on a 10000-example subset reaches >= 80% in one epoch") {
  TrainConfig c;
  c.selection.subset = 10000;
  c.optimizer.kind = "adam";
  c.optimizer.lr = 1e-3;
  c.batch = 64;
  const auto r = train(c, data());
  INFO("test accuracy " << r.test_accuracy);
  CHECK(r.test_accuracy >= 0.80);
  CHECK(r.predictions.size() == 10000);
}

TEST_CASE("training: a run killed mid-epoch and resumed from its checkpoint ends with the same bits") {
  const std::string path = (std::filesystem::temp_directory_path() / "fplab_test_resume.ckpt").string();
  std::filesystem::remove(path);
  TrainConfig c = small_run("gpu", 4, 1500);
  c.model.name = "small_cnn_bn";
  c.epochs = 2;
  c.checkpoint = path;
  c.checkpoint_every = 5;
  const auto uninterrupted = train(c, data());
  std::filesystem::remove(path);

  struct Killed {};
  c.resume = true;
  try {
    train(c, data(), {}, [](size_t epoch, size_t batch, size_t) {
      if (epoch == 1 && batch == 12) throw Killed{};  // mid-epoch, after a checkpoint at batch 9
    });
    FAIL("the simulated kill did not happen");
  } catch (const Killed&) {
  }
  const auto resumed = train(c, data());
  CHECK(resumed.resumed);
  CHECK(resumed.weights_sha256 == uninterrupted.weights_sha256);
  CHECK(resumed.predictions_sha256 == uninterrupted.predictions_sha256);
  CHECK(resumed.train_loss == uninterrupted.train_loss);
  std::filesystem::remove(path);
}

TEST_CASE("training: a checkpoint of another run is refused with a one-line error") {
  const std::string path = (std::filesystem::temp_directory_path() / "fplab_test_other.ckpt").string();
  TrainConfig c = small_run("seq", 1, 500);
  c.checkpoint = path;
  train(c, data());
  c.impl_seed = 9;
  c.resume = true;
  CHECK_THROWS_WITH(train(c, data()), Catch::Contains("different run"));
  std::filesystem::remove(path);
}
