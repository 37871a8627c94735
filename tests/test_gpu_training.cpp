// Training with the GPU compute backend (models/gpu_backend.hpp): which op tables our CUDA kernels
// can run (checked everywhere), and, where a CUDA device is, whole training runs whose every
// reduction ran on the GPU ending with the CPU replay's weights bit for bit under deterministic
// schedules and under atomic steps in the impl seed's order. Without a device the GPU cases say "SKIPPED: no CUDA device" and pass.
#include <catch2/catch.hpp>

#include <string>

#include "models/gpu_backend.hpp"
#include "profiles/hw_profile.hpp"
#include "models/trainer.hpp"
#include "sim/cuda/gpu_device.hpp"
#include "tests/gpu_device_or_skip.hpp"

using namespace fplab;
using namespace fplab::models;

using test::have_device;

namespace {

const Dataset& data() {
  static const Dataset d = load_fashion_mnist();
  return d;
}

TrainConfig run_config(const std::string& model, const profiles::OpTable& ops, size_t subset) {
  TrainConfig c;
  c.model.name = model;
  c.model.hidden = {128};
  c.optimizer.kind = "adam";
  c.optimizer.lr = 1e-3;
  c.batch = 64;
  c.selection.subset = subset;
  c.ops = ops;
  return c;
}

}  // namespace

TEST_CASE("gpu backend: the h100 profile's deterministic schedules and the seq preset run on our kernels") {
  CHECK(gpu_unsupported_ops(profiles::find_hw_profile("h100").deterministic_ops).empty());
  // Its default table too: the bias gradients' `strided(132):atomic | all:atomic` on the seeded kernel.
  CHECK(gpu_unsupported_ops(profiles::find_hw_profile("h100").default_ops).empty());
  CHECK(gpu_unsupported_ops(profiles::op_table_preset("seq")).empty());
  // Which shipped profiles' deterministic tables run, for the log (docs/gpu.md lists them).
  for (const auto& name : profiles::hw_profile_names()) {
    const auto problems = gpu_unsupported_ops(profiles::find_hw_profile(name).deterministic_ops);
    WARN(name << ":deterministic: " << (problems.empty() ? "runs on the GPU" : problems.front()));
  }
}

TEST_CASE("gpu backend: a layer rule's schedules are checked as the table's, before training") {
  profiles::OpTable table = profiles::op_table_preset("seq");
  profiles::LayerRule rule;
  rule.match.kind = profiles::LayerShape::Kind::conv;
  rule.match.height = 14;
  profiles::OpChoice tree = table[profiles::OpKind::wgrad];
  tree.schedule = sim::parse_schedule("all:tree");
  rule.ops[static_cast<size_t>(profiles::OpKind::wgrad)] = tree;
  table.layer_rules.push_back(rule);
  const auto problems = gpu_unsupported_ops(table);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].rfind("wgrad in layer rule 1 (" + rule.match.describe() + "): schedule 'all:tree'", 0) == 0);
  // a batch norm in cuDNN's form sums on the CPU engine: its kinds are not the GPU backend's
  profiles::LayerRule bn;
  bn.match.kind = profiles::LayerShape::Kind::batch_norm;
  bn.batch_norm = profiles::BatchNormForm::cudnn;
  profiles::OpChoice trees = table[profiles::OpKind::bias_grad];
  trees.schedule = sim::parse_schedule("strided(512):seq | contig(32):tree | all:tree");
  bn.ops[static_cast<size_t>(profiles::OpKind::bias_grad)] = trees;
  table.layer_rules = {bn};
  CHECK(gpu_unsupported_ops(table).empty());
  bn.batch_norm = profiles::BatchNormForm::fplab;
  table.layer_rules = {bn};
  CHECK(gpu_unsupported_ops(table).size() == 1);
}

TEST_CASE("gpu backend: tables it cannot run are refused one line per op kind, naming it") {
  const auto pairwise = gpu_unsupported_ops(profiles::op_table_preset("pairwise"));  // all:tree everywhere
  REQUIRE(pairwise.size() == 7);
  CHECK(pairwise[0].rfind("fwd: schedule 'all:tree' is not realisable by the GPU GEMM kernel", 0) == 0);
  CHECK(pairwise[3].rfind("bias_grad: schedule 'all:tree' is not realisable by the GPU reduction kernel", 0) == 0);
  for (const auto& line : pairwise) CHECK(line.find('\n') == std::string::npos);
  const auto bf16 = gpu_unsupported_ops(profiles::op_table_preset("seq", "bf16"));
  REQUIRE(bf16.size() == 7);
  CHECK(bf16[0].find("bf16") != std::string::npos);
  profiles::OpTable unfused = profiles::op_table_preset("seq");
  unfused[profiles::OpKind::wgrad].arithmetic.products = sim::Products::exact;
  const auto products = gpu_unsupported_ops(unfused);
  REQUIRE(products.size() == 1);
  CHECK(products[0].rfind("wgrad: products", 0) == 0);
  // rtx5000-tc's weight gradients add tensor-core split-K parts by atomics: keyed in the impl seed's
  // order by fplab.torch only
  const auto tc = gpu_unsupported_ops(profiles::find_hw_profile("rtx5000-tc").default_ops);
  REQUIRE(tc.size() == 1);
  CHECK(tc[0].rfind("wgrad: schedule 'split(48):fused(4,23) | all:atomic': an atomic combine", 0) == 0);
  if (!have_device()) CHECK_THROWS(make_gpu_backend(profiles::op_table_preset("seq")));
}

TEST_CASE("gpu training: mlp, h100 deterministic schedules: the GPU run's weights equal the CPU replay's") {
  if (!have_device()) return;
  const auto backend = make_gpu_backend(profiles::find_hw_profile("h100").deterministic_ops);
  INFO(backend->name());
  TrainConfig cpu = run_config("mlp", profiles::find_hw_profile("h100").deterministic_ops, 3000);
  TrainConfig gpu = cpu;
  gpu.backend = backend.get();
  const auto a = train(cpu, data()), b = train(gpu, data());
  CHECK(a.weights_sha256 == b.weights_sha256);
  CHECK(a.predictions_sha256 == b.predictions_sha256);
  CHECK(a.train_loss == b.train_loss);
  CHECK(b.test_accuracy > 0.7);  // it did learn: not a run where nothing moved
}

TEST_CASE("gpu training: mlp, h100's default table: atomic bias gradients in the impl seed's order, the CPU's bits") {
  if (!have_device()) return;
  const profiles::OpTable ops = profiles::find_hw_profile("h100").default_ops;
  const auto backend = make_gpu_backend(ops);
  TrainConfig cpu = run_config("mlp", ops, 2000);
  cpu.impl_seed = 5;
  TrainConfig gpu = cpu;
  gpu.backend = backend.get();
  TrainConfig other_seed = gpu;
  other_seed.impl_seed = 6;
  const auto a = train(cpu, data()), b = train(gpu, data()), c = train(other_seed, data());
  CHECK(a.weights_sha256 == b.weights_sha256);
  CHECK(a.predictions_sha256 == b.predictions_sha256);
  CHECK(c.weights_sha256 != b.weights_sha256);  // the order is the seed's, not fixed
  CHECK(b.test_accuracy > 0.6);
}

TEST_CASE("gpu training: small_cnn (conv as im2col GEMMs), seq schedules: the GPU run's weights equal the CPU's") {
  if (!have_device()) return;
  const auto backend = make_gpu_backend(profiles::op_table_preset("seq"));
  TrainConfig cpu = run_config("small_cnn", profiles::op_table_preset("seq"), 500);
  TrainConfig gpu = cpu;
  gpu.backend = backend.get();
  const auto a = train(cpu, data()), b = train(gpu, data());
  CHECK(a.weights_sha256 == b.weights_sha256);
  CHECK(a.predictions_sha256 == b.predictions_sha256);
}

TEST_CASE("gpu training: an atomic weight gradient on the GPU still trains, and its bits are the hardware's") {
  if (!have_device()) return;
  profiles::OpTable ops = profiles::find_hw_profile("h100").deterministic_ops;
  ops[profiles::OpKind::wgrad].schedule = sim::parse_schedule("split(16):seq | all:atomic");
  const auto backend = make_gpu_backend(ops);
  TrainConfig c = run_config("mlp", ops, 2000);
  c.backend = backend.get();
  const auto a = train(c, data());
  CHECK(a.test_accuracy > 0.6);
  // Not asserted equal or different: atomicAdd's arrival order decides (docs/results/gpu.md).
  WARN("atomic wgrad on the GPU: test accuracy " << a.test_accuracy << ", weights " << a.weights_sha256);
}
