// The validation matrix of sim/cuda/ (gpu_validation.hpp): every GPU kernel x schedule x shape x
// seeded input against the CPU emulation.
#include "sim/cuda/gpu_validation.hpp"

#include <chrono>
#include <cstdio>
#include <set>

#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_gemm.hpp"
#include "sim/cuda/gpu_reduce.hpp"
#include "sim/cuda/gpu_stats.hpp"
#include "sim/engine.hpp"
#include "sim/generate.hpp"

namespace fplab::sim::gpu {

using nlohmann::json;

namespace {

const std::vector<std::string> kDistributions = {"normal", "lognormal", "cancel"};
const std::vector<uint64_t> kSeeds = {1, 2};

std::vector<float> floats(const std::vector<double>& v) { return {v.begin(), v.end()}; }
std::vector<double> doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

json reduce_case(const std::string& text, size_t k, const std::string& dist, uint64_t seed, int runs,
                 ValidationRow& row) {
  const Schedule schedule = parse_schedule(text);
  const ReductionPlan plan = plan_reduction(schedule);
  const auto x = floats(generate(dist + ":" + std::to_string(k), seed));
  const auto cpu = static_cast<float>(sim::reduce(schedule, doubles(x), Arithmetic{}));
  GpuReduction gpu(x);
  json c = {{"kernel", "reduce"},
            {"schedule", to_string(schedule)},
            {"name", text},
            {"k", k},
            {"inputs", dist},
            {"seed", seed},
            {"plan", plan.describe(static_cast<int64_t>(k))},
            {"cpu", cpu}};
  ++row.inputs;
  if (plan.deterministic()) {
    // Twice: the second run must also repeat the first.
    const float first = gpu.run(plan), second = gpu.run(plan);
    const bool same = stats::same_bits(first, cpu) && stats::same_bits(second, cpu);
    row.outputs += 1;
    row.identical += same ? 1 : 0;
    row.max_ulps = std::max({row.max_ulps, stats::ulps(first, cpu), stats::ulps(second, cpu)});
    c["gpu"] = first;
    c["identical"] = same;
    return c;
  }
  std::set<uint32_t> distinct;
  int64_t recovered = 0, ticket_is_fold = 0, max_ulps = 0;
  for (int r = 0; r < runs; ++r) {
    const RecordedRun run = gpu.run_recorded(plan);
    distinct.insert(stats::bits(run.result));
    max_ulps = std::max(max_ulps, stats::ulps(run.result, cpu));
    if (!run.fold_order.empty()) {
      ++recovered;
      ticket_is_fold += run.fold_order == run.ticket_order ? 1 : 0;
    }
  }
  row.deterministic = false;
  row.runs = runs;
  row.outputs += 1;
  row.identical += distinct.size() == 1 && stats::same_bits(gpu.run(plan), cpu) ? 1 : 0;
  row.max_ulps = std::max(row.max_ulps, max_ulps);
  row.max_distinct = std::max<int64_t>(row.max_distinct, static_cast<int64_t>(distinct.size()));
  row.recovered += recovered;
  row.ticket_is_fold += ticket_is_fold;
  c["runs"] = runs;
  c["distinct"] = distinct.size();
  c["max_ulps_vs_cpu"] = max_ulps;
  c["chain_recovered"] = recovered;
  c["ticket_order_is_fold_order"] = ticket_is_fold;
  return c;
}

// A and B of a GEMM: `cancel` makes each row of A a cancelling sum and B all ones.
void gemm_inputs(const std::string& dist, GemmShape s, uint64_t seed, std::vector<float>& a, std::vector<float>& b) {
  if (dist == "cancel") {
    a.clear();
    for (size_t i = 0; i < s.m; ++i) {
      const auto row = floats(generate("cancel:" + std::to_string(s.k), seed * 1000 + i));
      a.insert(a.end(), row.begin(), row.end());
    }
    b.assign(s.k * s.n, 1.0f);
    return;
  }
  a = floats(generate(dist + ":" + std::to_string(s.m * s.k), seed));
  b = floats(generate(dist + ":" + std::to_string(s.k * s.n), seed + 77));
}

json gemm_case(const std::string& text, GemmShape s, const std::string& dist, uint64_t seed, int runs,
               ValidationRow& row) {
  const Schedule schedule = parse_schedule(text);
  const GemmPlan plan = plan_gemm(schedule);
  std::vector<float> a, b;
  gemm_inputs(dist, s, seed, a, b);
  std::vector<float> cpu(s.m * s.n), out(s.m * s.n);
  sim::gemm(schedule, a.data(), b.data(), cpu.data(), s, Arithmetic{});
  GpuGemm gpu(a.data(), b.data(), s);
  json c = {{"kernel", "gemm"}, {"schedule", to_string(schedule)},
            {"name", text},     {"m", s.m},
            {"n", s.n},         {"k", s.k},
            {"inputs", dist},   {"seed", seed}};
  ++row.inputs;
  int64_t identical = 0, max_ulps = 0, max_distinct = 1;
  if (plan.deterministic()) {
    gpu.run(plan, out.data());
    for (size_t i = 0; i < out.size(); ++i) {
      identical += stats::same_bits(out[i], cpu[i]) ? 1 : 0;
      max_ulps = std::max(max_ulps, stats::ulps(out[i], cpu[i]));
    }
  } else {
    row.deterministic = false;
    row.runs = runs;
    std::vector<std::set<uint32_t>> distinct(out.size());
    for (int r = 0; r < runs; ++r) {
      gpu.run(plan, out.data());
      for (size_t i = 0; i < out.size(); ++i) {
        distinct[i].insert(stats::bits(out[i]));
        max_ulps = std::max(max_ulps, stats::ulps(out[i], cpu[i]));
      }
    }
    for (size_t i = 0; i < out.size(); ++i) {
      max_distinct = std::max<int64_t>(max_distinct, static_cast<int64_t>(distinct[i].size()));
      identical += distinct[i].size() == 1 && stats::same_bits(out[i], cpu[i]) ? 1 : 0;
    }
    c["runs"] = runs;
    c["max_distinct"] = max_distinct;
  }
  row.outputs += static_cast<int64_t>(out.size());
  row.identical += identical;
  row.max_ulps = std::max(row.max_ulps, max_ulps);
  row.max_distinct = std::max(row.max_distinct, max_distinct);
  c["outputs"] = out.size();
  c["identical"] = identical;
  c["max_ulps"] = max_ulps;
  return c;
}

// results[s] of a batched column sum against sim::reduce_batch: what training's sums over the batch
// axis run (models/gpu_backend.hpp).
json sums_case(const std::string& text, size_t rows, size_t cols, const std::string& dist, uint64_t seed, int runs,
               GpuSegmentedReduction& gpu, ValidationRow& row) {
  const Schedule schedule = parse_schedule(text);
  const ReductionPlan plan = plan_reduction(schedule);
  const auto x = floats(generate(dist + ":" + std::to_string(rows * cols), seed));
  const auto terms = doubles(x);
  std::vector<double> cpu(cols);
  reduce_batch(schedule, terms.data(), rows, cols, Arithmetic{}, NoiseKey{}, cpu.data());
  std::vector<float> out(cols);
  ++row.inputs;
  std::vector<std::set<uint32_t>> distinct(cols);
  int64_t max_ulps = 0, identical = 0, max_distinct = 1;
  const int repeats = plan.deterministic() ? 2 : runs;  // deterministic: twice, and both must match
  for (int r = 0; r < repeats; ++r) {
    gpu.run_columns(plan, x.data(), rows, cols, out.data());
    for (size_t j = 0; j < cols; ++j) {
      distinct[j].insert(stats::bits(out[j]));
      max_ulps = std::max(max_ulps, stats::ulps(out[j], static_cast<float>(cpu[j])));
    }
  }
  for (size_t j = 0; j < cols; ++j) {
    max_distinct = std::max<int64_t>(max_distinct, static_cast<int64_t>(distinct[j].size()));
    identical += distinct[j].size() == 1 && stats::same_bits(out[j], static_cast<float>(cpu[j])) ? 1 : 0;
  }
  if (!plan.deterministic()) {
    row.deterministic = false;
    row.runs = runs;
  }
  row.outputs += static_cast<int64_t>(cols);
  row.identical += identical;
  row.max_ulps = std::max(row.max_ulps, max_ulps);
  row.max_distinct = std::max(row.max_distinct, max_distinct);
  return {{"kernel", "sums"},
          {"schedule", to_string(schedule)},
          {"name", text},
          {"rows", rows},
          {"cols", cols},
          {"inputs", dist},
          {"seed", seed},
          {"outputs", cols},
          {"identical", identical},
          {"max_ulps", max_ulps},
          {"max_distinct", max_distinct}};
}

std::string percent(int64_t part, int64_t whole) {
  return whole == 0 ? "-" : stats::fixed(100.0 * static_cast<double>(part) / static_cast<double>(whole), 1) + "%";
}

}  // namespace

const std::vector<std::string>& validated_reductions() {
  static const std::vector<std::string> list = {
      "strided(262144):seq | contig(32):shfl_down | contig(8):seq | all:seq",
      "cuda-naive-sum(256,1024)",
      "cuda-naive-sum(128,8)",
      "strided(8192):seq | contig(32):shfl_up | contig(4):shfl_up | all:seq",
      "strided(33792):seq | contig(32):shfl_xor | contig(32):shfl_xor | all:seq",
      "torch-sum(512,512)",
      "cub-sum(256,64)",
      "strided(1024):seq | contig(32):shfl_down | all:shfl_down",
      "contig(64):seq | contig(32):shfl_down | contig(8):seq | all:seq",
      "strided(4096):seq | contig(32):shfl_down | all:atomic",
      "strided(16384):seq | contig(8):seq | contig(32):shfl_down | contig(2):seq | all:seq",
      "strided(4096):seq | contig(2):seq | contig(32):shfl_up | contig(1):seq | all:seq",
      "strided(1081344):seq | contig(4):seq | contig(32):shfl_down | contig(8):seq | all:seq",
      "strided(1081344):seq | contig(4):seq | contig(32):shfl_down | contig(8):seq | all:atomic",
      // The sums training uses (profiles/shipped/h100.toml, the seq preset): one-block forms.
      "seq",
      "strided(1024):seq | contig(32):seq | all:shfl_up",
      "strided(32):seq | all:shfl_up",
      "cub-sum(256,1)",
      "cub-sum(256,1056)",
  };
  return list;
}

ValidationReport validate_kernels(const ValidationOptions& options) {
  const int runs = std::max(1, options.runs);
  auto tick = [&] {
    if (options.progress) options.progress();
  };
  const auto started = std::chrono::steady_clock::now();
  const DeviceInfo info = device_info();
  const SubnormalProbe probe = probe_subnormals();
  ValidationReport report;
  report.device = info.describe();
  char line[320];
  std::snprintf(line, sizeof line,
                "subnormals kept: add %d, fma %d, mul %d, shuffle %d, atomicAdd input %d, atomicAdd result %d; "
                "atomicAdd(-0, -0) == -0: %d",
                probe.add, probe.fma, probe.mul, probe.shuffle, probe.atomic_input, probe.atomic_result,
                probe.atomic_negative_zero);
  report.probe = line;
  json doc = {{"device", info.describe()},
              {"subnormals_kept",
               {{"add", probe.add},
                {"fma", probe.fma},
                {"mul", probe.mul},
                {"shuffle", probe.shuffle},
                {"atomic_input", probe.atomic_input},
                {"atomic_result", probe.atomic_result},
                {"atomic_negative_zero", probe.atomic_negative_zero}}},
              {"runs", runs}};
  bool ok = probe.add && probe.fma && probe.mul && probe.shuffle;

  const std::vector<size_t> ks = {1, 31, 33, 1000, 4097, 1000000};
  const std::vector<std::string> gemms = {"seq",
                                          "splitk(4)",
                                          "splitk(7)",
                                          "splitk-tree(4)",
                                          "splitk-tree(16)",
                                          "splitk-tree(40)",
                                          "systolic(128)",
                                          "splitk-atomic(4)",
                                          "contig(1000):seq | all:atomic"};
  const std::vector<GemmShape> shapes = {{1, 1, 1},        {1, 1, 31},      {7, 13, 33},    {33, 65, 1000},
                                         {64, 64, 4097},   {100, 70, 1000}, {3, 5, 100000}, {128, 192, 4096},
                                         {520, 1030, 2000}};  // the last: more blocks than the device holds
  // Batched column sums (training's bias gradients, softmax and loss sums): K rows x 7 columns.
  const std::vector<std::string> sums = {"seq",
                                         "strided(1024):seq | contig(32):seq | all:shfl_up",
                                         "strided(32):seq | all:shfl_up",
                                         "cub-sum(256,1)",
                                         "torch-sum(512,512)",
                                         "contig(8):seq | contig(32):shfl_down | all:atomic"};
  const std::vector<std::string> not_realisable = {
      "pairwise",
      "numpy",
      "atomic",
      "kahan",
      "shuffle | all:seq",
      "nccl-ring(8)",
      "all:shfl_down",
      "contig(4):seq | all:seq",
      "strided(100):seq | contig(32):shfl_down | all:seq",
      "strided(256):rev | contig(32):shfl_down | all:seq",
      "strided(256):seq | contig(16):shfl_down | all:seq",
      "strided(4096):seq | contig(3):seq | contig(32):shfl_down | all:seq",
      "strided(262144):seq | contig(32):shfl_down | contig(64):seq | all:seq",
      "strided(65536):seq | contig(32):shfl_down | all:shfl_down",
      "strided(262144):seq | contig(32):shfl_down | contig(8):seq | all:tree"};

  json cases = json::array();
  for (const auto& text : validated_reductions())
    for (size_t k : ks) {
      ValidationRow row{"reduce", text, "K=" + std::to_string(k)};
      for (const auto& dist : kDistributions)
        for (uint64_t seed : kSeeds) cases.push_back(reduce_case(text, k, dist, seed, runs, row));
      report.rows.push_back(row);
      tick();
    }
  GpuSegmentedReduction segmented;
  for (const auto& text : sums)
    for (size_t k : ks) {
      ValidationRow row{"sums", text, std::to_string(k) + "x7"};
      for (const auto& dist : kDistributions) cases.push_back(sums_case(text, k, 7, dist, 1, runs, segmented, row));
      report.rows.push_back(row);
      tick();
    }
  for (const auto& text : gemms)
    for (const auto& s : shapes) {
      ValidationRow row{"gemm", text, std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k)};
      for (const auto& dist : kDistributions) cases.push_back(gemm_case(text, s, dist, 1, runs, row));
      report.rows.push_back(row);
      tick();
    }
  doc["cases"] = cases;

  json rejected = json::array();
  for (const auto& text : not_realisable) {
    std::string message = "(accepted!)";
    try {
      (void)plan_reduction(parse_schedule(text));
      ok = false;
    } catch (const NotRealisable& e) {
      message = e.what();
    }
    report.rejections.push_back(message);
    rejected.push_back({{"schedule", text}, {"message", message}});
  }
  doc["not_realisable"] = rejected;

  json table = json::array();
  for (const auto& r : report.rows) {
    ok = ok && r.pass();
    table.push_back({{"kernel", r.kernel},
                     {"schedule", r.schedule},
                     {"shape", r.shape},
                     {"inputs", r.inputs},
                     {"deterministic", r.deterministic},
                     {"outputs", r.outputs},
                     {"identical", r.identical},
                     {"max_ulps", r.max_ulps},
                     {"runs", r.runs},
                     {"max_distinct", r.max_distinct},
                     {"chain_recovered", r.recovered},
                     {"ticket_order_is_fold_order", r.ticket_is_fold}});
  }
  doc["table"] = table;
  report.ok = ok;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  doc["ok"] = ok;
  doc["seconds"] = report.seconds;
  report.json = std::move(doc);
  return report;
}

std::string validation_table(const ValidationReport& report) {
  std::string out;
  char line[512];
  auto add = [&](const char* format, auto... args) {
    std::snprintf(line, sizeof line, format, args...);
    out += line;
  };
  add("device: %s\n%s\n", report.device.c_str(), report.probe.c_str());
  out += "\nnot realisable (each must be rejected with one line):\n";
  for (const auto& m : report.rejections) out += "  " + m + "\n";
  add("\n%-6s %-88s %-16s %6s %12s %9s %9s %10s %10s\n", "kernel", "schedule", "shape", "inputs", "bit-ident.",
      "max ulps", "distinct", "recovered", "tkt=fold");
  for (const auto& r : report.rows) {
    const std::string distinct = r.deterministic ? "-" : std::to_string(r.max_distinct) + "/" + std::to_string(r.runs);
    const int64_t atomic_runs = r.runs * r.inputs;
    const bool recorded = !r.deterministic && r.kernel == "reduce";
    add("%-6s %-88s %-16s %6d %12s %9lld %9s %10s %10s%s\n", r.kernel.c_str(), r.schedule.c_str(), r.shape.c_str(),
        r.inputs, r.deterministic ? percent(r.identical, r.outputs).c_str() : "-", static_cast<long long>(r.max_ulps),
        distinct.c_str(), recorded ? percent(r.recovered, atomic_runs).c_str() : "-",
        recorded ? percent(r.ticket_is_fold, atomic_runs).c_str() : "-", r.pass() ? "" : "  MISMATCH");
  }
  out +=
      "\n(bit-ident.: outputs equal to the CPU emulation bit for bit (deterministic schedules); max ulps: against "
      "the CPU emulation, for atomic rows against its order drawn with impl seed 0; distinct: most distinct results "
      "of one output over the runs; recovered: runs whose atomicAdd chain was reconstructed exactly as fp32 "
      "additions of the block partials; tkt=fold: runs whose ticket order was that chain)\n";
  int64_t outputs = 0, identical = 0, rows = 0, mismatched = 0;
  for (const auto& r : report.rows)
    if (r.deterministic) {
      outputs += r.outputs, identical += r.identical, ++rows;
      mismatched += r.pass() ? 0 : 1;
    }
  add("summary: %lld deterministic rows, %lld of %lld outputs bit-identical (%s), %lld rows mismatched; %s in %.1f s\n",
      static_cast<long long>(rows), static_cast<long long>(identical), static_cast<long long>(outputs),
      percent(identical, outputs).c_str(), static_cast<long long>(mismatched), report.ok ? "PASS" : "FAIL",
      report.seconds);
  return out;
}

}  // namespace fplab::sim::gpu
