// gpu_atomic_order: in what order do a grid's blocks reach the atomicAdd of an `all:atomic`
// combine? Each block takes a ticket (a counter atomic) right before its float atomicAdd; the
// float chain itself is recovered from the values atomicAdd returned. Over many runs of each
// launch shape this measures how far the order is from block order, and how many distinct sums
// it gives, next to what the emulation's noise model (a uniform random permutation of the same
// block partials) gives. Prints the table last and writes JSON.
//
//   gpu_atomic_order [--json FILE] [--runs N]     (default 200 runs of each shape; --help)
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_reduce.hpp"
#include "sim/cuda/gpu_stats.hpp"
#include "sim/generate.hpp"
#include "tools/gpu/tool_cli.hpp"
#include "tools/gpu/tool_device.hpp"
#include "tools/gpu/tool_rng.hpp"

using namespace fplab;
using namespace fplab::sim;
using namespace fplab::sim::gpu;
using nlohmann::json;

namespace {

struct Shape {
  int threads;
  int64_t blocks, n;
};

double quantile(std::vector<int64_t> v, double q) {  // v by value: sorted here
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "gpu_atomic_order.json";
  int runs = 200;
  CLI::App app(
      "In what order do a grid's blocks reach the atomicAdd of an all:atomic combine? Measured\n"
      "over many runs of eight launch shapes, next to the emulation's noise model. Needs a GPU\n"
      "(prints SKIPPED without one); the table comes last.",
      "gpu_atomic_order");
  app.add_option("--json", json_path, "where to write the JSON results")->capture_default_str();
  app.add_option("--runs", runs, "runs of each launch shape")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  app.footer("Examples:\n  gpu_atomic_order\n  gpu_atomic_order --runs 200 --json out/gpu_atomic_order.json\n");
  if (const int status = tools::gpu::parse_options(app, argc, argv); status >= 0) return status;
  const auto device = tools::gpu::device_or_skip();
  if (!device) return 0;
  const DeviceInfo& info = *device;
  const int64_t sms = info.sm_count;
  const std::vector<Shape> shapes = {
      {256, sms, 1 << 24},  {256, 8 * sms, 1 << 24}, {256, 32 * sms, 1 << 24}, {256, 1024, 1 << 24},
      {256, 1024, 1000000}, {32, 4096, 1 << 20},     {1024, sms / 2, 1 << 24}, {256, 1024, 1000},
  };

  json doc = {{"device", info.describe()}, {"runs", runs}};
  json results = json::array();
  struct Accumulated {  // sums over runs of one order's statistics
    int runs = 0;
    double identity = 0, mean_disp = 0, inversions = 0, wave_inversions = 0, same_wave = 0;
    std::vector<int64_t> magnitudes;
    void add(const std::vector<int32_t>& order, int64_t wave) {
      const stats::OrderStats st = stats::order_stats(order, wave);
      ++runs;
      identity += st.identity, mean_disp += st.mean_displacement, inversions += st.inversions;
      wave_inversions += st.wave_inversions, same_wave += st.same_wave;
      for (size_t p = 0; p < order.size(); ++p) magnitudes.push_back(std::llabs(static_cast<int64_t>(p) - order[p]));
    }
    json summary() const {
      const double r = runs > 0 ? runs : 1;
      return {{"runs", runs},
              {"identity_fraction", identity / r},
              {"mean_displacement", mean_disp / r},
              {"abs_displacement_p50", quantile(magnitudes, 0.5)},
              {"abs_displacement_p99", quantile(magnitudes, 0.99)},
              {"abs_displacement_max", quantile(magnitudes, 1.0)},
              {"inversion_fraction", inversions / r},
              {"wave_inversion_fraction", wave_inversions / r},
              {"same_wave_fraction", same_wave / r}};
    }
  };
  struct Line {
    std::string shape;
    int64_t wave;
    json ticket, fold;
    double uniform, ticket_vs_fold;
    size_t orders, gpu_distinct, model_distinct;
    int64_t gpu_spread, model_spread;
  };
  std::vector<Line> lines;
  tools::gpu::ToolRng model_rng(12345);
  for (const auto& s : shapes) {
    const int64_t t = s.threads, b = s.blocks;
    const std::string text = "strided(" + std::to_string(t * b) + "):seq | contig(32):shfl_down | contig(" +
                             std::to_string(t / 32) + "):seq | all:atomic";
    const ReductionPlan plan = plan_reduction(parse_schedule(text));
    const int64_t wave = GpuReduction::resident_blocks(plan);
    const auto data = generate("normal:" + std::to_string(s.n), 99);
    const std::vector<float> x(data.begin(), data.end());
    GpuReduction gpu(x);
    gpu.run(plan);  // warm-up
    Accumulated ticket, fold;
    std::set<std::vector<int32_t>> orders;
    std::set<uint32_t> gpu_results, model_results;
    float gpu_lo = 0, gpu_hi = 0, model_lo = 0, model_hi = 0;
    double ticket_vs_fold = 0;
    for (int r = 0; r < runs; ++r) {
      const RecordedRun run = gpu.run_recorded(plan);
      ticket.add(run.ticket_order, wave);
      orders.insert(run.ticket_order);
      if (!run.fold_order.empty()) {
        fold.add(run.fold_order, wave);
        // How far a block's atomicAdd is from its ticket: mean |fold position - ticket position|.
        std::vector<int64_t> at(run.fold_order.size());
        for (size_t p = 0; p < at.size(); ++p) at[static_cast<size_t>(run.fold_order[p])] = static_cast<int64_t>(p);
        double moved = 0;
        for (size_t p = 0; p < at.size(); ++p)
          moved +=
              static_cast<double>(std::llabs(at[static_cast<size_t>(run.ticket_order[p])] - static_cast<int64_t>(p)));
        ticket_vs_fold += moved / static_cast<double>(at.size());
      }
      gpu_results.insert(stats::bits(run.result));
      gpu_lo = r == 0 ? run.result : std::min(gpu_lo, run.result);
      gpu_hi = r == 0 ? run.result : std::max(gpu_hi, run.result);
      // The noise model on the same partials: a uniform random order, folded from -0.
      std::vector<float> parts = run.partials;
      for (size_t i = parts.size(); i > 1; --i) std::swap(parts[i - 1], parts[model_rng.below(i)]);  // Fisher-Yates
      float sum = -0.0f;
      for (float v : parts) sum += v;
      model_results.insert(stats::bits(sum));
      model_lo = r == 0 ? sum : std::min(model_lo, sum);
      model_hi = r == 0 ? sum : std::max(model_hi, sum);
    }
    const double uniform = (static_cast<double>(b) * static_cast<double>(b) - 1) / (3.0 * static_cast<double>(b));
    Line line{std::to_string(t) + "x" + std::to_string(b) + " n=" + std::to_string(s.n),
              wave,
              ticket.summary(),
              fold.summary(),
              uniform,
              fold.runs > 0 ? ticket_vs_fold / fold.runs : -1,
              orders.size(),
              gpu_results.size(),
              model_results.size(),
              stats::ulps(gpu_lo, gpu_hi),
              stats::ulps(model_lo, model_hi)};
    lines.push_back(line);
    results.push_back({{"schedule", text},
                       {"threads", t},
                       {"blocks", b},
                       {"n", s.n},
                       {"resident_blocks", wave},
                       {"uniform_mean_displacement", uniform},
                       {"ticket_order", line.ticket},
                       {"fold_order", line.fold},
                       {"distinct_ticket_orders", line.orders},
                       {"mean_ticket_to_fold_displacement", line.ticket_vs_fold},
                       {"gpu_distinct_results", line.gpu_distinct},
                       {"gpu_spread_ulps", line.gpu_spread},
                       {"model_distinct_results", line.model_distinct},
                       {"model_spread_ulps", line.model_spread}});
    std::fprintf(stderr, ".");
  }
  std::fprintf(stderr, "\n");
  doc["shapes"] = results;
  std::ofstream(json_path) << doc.dump(1) << '\n';

  auto f = [](const json& j, const char* key, int digits) { return stats::fixed(j[key].get<double>(), digits); };
  std::printf(
      "\natomic arrival order, %d runs per shape; T: ticket order (blocks in the order their partial was "
      "ready), F: the atomicAdd chain itself (recovered from atomicAdd's return values)\n",
      runs);
  std::printf("%-22s %6s %5s %8s %9s %9s %7s %7s %7s %7s %7s %7s %7s %7s\n", "shape", "wave", "ident", "uniform",
              "T mean|d|", "F mean|d|", "T p99", "F max", "T inv", "F inv", "F wInv", "F same", "F rec", "T->F");
  for (const auto& l : lines)
    std::printf("%-22s %6lld %5s %8s %9s %9s %7s %7s %7s %7s %7s %7s %7s %7s\n", l.shape.c_str(),
                static_cast<long long>(l.wave), f(l.ticket, "identity_fraction", 2).c_str(),
                stats::fixed(l.uniform, 1).c_str(), f(l.ticket, "mean_displacement", 1).c_str(),
                f(l.fold, "mean_displacement", 1).c_str(), f(l.ticket, "abs_displacement_p99", 0).c_str(),
                f(l.fold, "abs_displacement_max", 0).c_str(), f(l.ticket, "inversion_fraction", 3).c_str(),
                f(l.fold, "inversion_fraction", 3).c_str(), f(l.fold, "wave_inversion_fraction", 3).c_str(),
                f(l.fold, "same_wave_fraction", 3).c_str(),
                stats::fixed(static_cast<double>(l.fold["runs"].get<int>()) / runs, 2).c_str(),
                stats::fixed(l.ticket_vs_fold, 1).c_str());
  std::printf("\n%-22s %8s %16s %18s\n", "shape", "orders", "gpu distinct (u)", "model distinct (u)");
  for (const auto& l : lines)
    std::printf("%-22s %8zu %9zu (%4lld) %11zu (%4lld)\n", l.shape.c_str(), l.orders, l.gpu_distinct,
                static_cast<long long>(l.gpu_spread), l.model_distinct, static_cast<long long>(l.model_spread));
  std::printf(
      "(wave: blocks resident at once; ident: fraction of runs in block order; uniform: mean |d| of a uniform "
      "random permutation; |d|: |arrival position - block index|; inv: fraction of block pairs out of order, "
      "wInv: of pairs within one wave (uniform 0.5); same: blocks arriving within their own wave; rec: runs "
      "whose chain was recovered; T->F: mean |F position - T position|; distinct (u): distinct sums over the "
      "runs and their spread in ulps; model: the same partials folded in uniform random orders)\n");
  return 0;
}
