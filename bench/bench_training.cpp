// One training epoch on full Fashion-MNIST (60 000 examples, batch 64, Adam 1e-3, one epoch =
// 938 steps): fplab's trainer under the `seq` and `gpu` schedule presets against the same model,
// initial weights and batches trained with LibTorch on the CPU (models/torch/, torch::optim::Adam,
// 1 thread for LibTorch, its OpenMP pool and OpenBLAS; fplab is single-threaded), all in one run.
//
// Both sides are timed the same way, from their per-batch callbacks: from the end of the first
// step to the end of the last, scaled by steps / (steps - 1), so model building, the first
// step's allocations and the test-set evaluation are not counted. The time reported (and used
// for the ratios) is the process's CPU time: the development machine is shared, and CPU time
// does not count the time spent waiting for a core; wall-clock time is a counter beside it.
// Counters: s_per_epoch (CPU), wall_s_per_epoch, test_acc, and for fplab x_libtorch, the ratio to
// LibTorch's CPU time (the target: <= 2 for the MLP under `gpu`).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>

#include "models/torch/torch_twin.hpp"
#include "models/trainer.hpp"

using namespace fplab;
using namespace fplab::models;

namespace {

const Dataset& data() {
  static const Dataset d = load_fashion_mnist();
  return d;
}

TrainConfig epoch(const std::string& model, const char* schedules) {
  TrainConfig c;
  c.model.name = model;
  c.model.hidden = {128};
  c.optimizer.kind = "adam";
  c.optimizer.lr = 1e-3;
  c.batch = 64;
  c.epochs = 1;
  c.ops = profiles::op_table_preset(schedules);
  return c;
}

// CPU and wall time from the end of the first batch to the end of the last, per epoch.
struct EpochClock {
  double cpu_start = 0, cpu_end = 0, wall_start = 0, wall_end = 0;
  size_t batches = 0;
  static double cpu_now() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  static double wall_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  BatchFn callback() {
    return [this](size_t, size_t batch, size_t count) {
      batches = count;
      if (batch == 0) cpu_start = cpu_now(), wall_start = wall_now();
      if (batch + 1 == count) cpu_end = cpu_now(), wall_end = wall_now();
    };
  }
  double scale() const { return static_cast<double>(batches) / static_cast<double>(batches - 1); }
  double cpu_seconds() const { return (cpu_end - cpu_start) * scale(); }
  double wall_seconds() const { return (wall_end - wall_start) * scale(); }
};

std::map<std::string, double>& libtorch_seconds() {
  static std::map<std::string, double> s;
  return s;
}
std::map<std::string, std::map<std::string, double>>& fplab_seconds() {
  static std::map<std::string, std::map<std::string, double>> s;
  return s;
}

void BM_libtorch_epoch(benchmark::State& state, const std::string& model) {
  data();
  for (auto _ : state) {
    EpochClock clock;
    torch_twin::TwinOptions options;
    options.threads = 1;
    options.update = torch_twin::UpdateRule::libtorch;
    options.on_batch = clock.callback();
    const auto r = torch_twin::train(epoch(model, "seq"), data(), options);
    const double seconds = clock.cpu_seconds();
    state.SetIterationTime(seconds);
    state.counters["s_per_epoch"] = seconds;
    state.counters["wall_s_per_epoch"] = clock.wall_seconds();
    state.counters["test_acc"] = r.test_accuracy;
    state.SetLabel(r.backend);
    libtorch_seconds()[model] = seconds;
  }
}

void BM_fplab_epoch(benchmark::State& state, const std::string& model, const char* schedules) {
  data();
  for (auto _ : state) {
    EpochClock clock;
    const auto r = train(epoch(model, schedules), data(), {}, clock.callback());
    const double seconds = clock.cpu_seconds();
    state.SetIterationTime(seconds);
    state.counters["s_per_epoch"] = seconds;
    state.counters["wall_s_per_epoch"] = clock.wall_seconds();
    state.counters["test_acc"] = r.test_accuracy;
    fplab_seconds()[model][schedules] = seconds;
    if (libtorch_seconds().count(model)) state.counters["x_libtorch"] = seconds / libtorch_seconds()[model];
  }
}

// LibTorch first, so that fplab's rows can show the ratio.
BENCHMARK_CAPTURE(BM_libtorch_epoch, mlp, std::string("mlp"))->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_fplab_epoch, mlp_seq, std::string("mlp"), "seq")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_fplab_epoch, mlp_gpu, std::string("mlp"), "gpu")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_libtorch_epoch, small_cnn, std::string("small_cnn"))
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_fplab_epoch, small_cnn_seq, std::string("small_cnn"), "seq")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_fplab_epoch, small_cnn_gpu, std::string("small_cnn"), "gpu")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // The table for bench/RESULTS.md.
  std::printf(
      "\nCPU seconds per epoch:\n| model | LibTorch | fplab seq | ratio | fplab gpu | ratio "
      "|\n|---|---|---|---|---|---|\n");
  for (const auto& [model, torch_s] : libtorch_seconds()) {
    auto& f = fplab_seconds()[model];
    auto cell = [&](const char* preset) {
      if (!f.count(preset)) return std::string("| - | - ");
      char buf[64];
      std::snprintf(buf, sizeof buf, "| %.2f | %.2f× ", f[preset], f[preset] / torch_s);
      return std::string(buf);
    };
    std::printf("| %s | %.2f %s%s|\n", model.c_str(), torch_s, cell("seq").c_str(), cell("gpu").c_str());
  }
  return 0;
}
