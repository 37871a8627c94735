// gpu_mma_validate: the device run: self-checks, probes and the test sets of every instruction
// (or the model standing in for the chip with --cpu-model), and the samples file.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>

#include "sim/cuda/gpu_device.hpp"

#include "fp/round.hpp"
#include "tools/gpu/mma_validate.hpp"

using nlohmann::json;

namespace fplab::tools::gpu::mma {

struct ProbeResult {
  std::string line;
  bool ok = true;
  json j;
};

std::vector<float> execute(const Options& o, MmaInput in, MmaPath path, const MmaTiles& t, MmaOptions options);

// ---- the device run

// Integer data, exact for any tensor core: does the kernel put every value where it belongs?
int64_t self_check(MmaInput in, MmaPath path, MmaOptions options, std::string& first_error) {
  const fp::Format& f = code_format(in);
  MmaTiles t;
  t.tiles = 16, t.k = 2 * mma_k(in), t.rows = mma_rows(path);
  Rng rng(1234 + static_cast<uint64_t>(in));
  for (size_t i = 0; i < t.tiles * t.rows * t.k; ++i) t.a.push_back(code_of(f, static_cast<double>(rng.below(9)) - 4));
  for (size_t i = 0; i < t.tiles * t.k * 8; ++i) t.b.push_back(code_of(f, static_cast<double>(rng.below(9)) - 4));
  for (size_t i = 0; i < t.tiles * t.rows * 8; ++i) t.c.push_back(static_cast<float>(rng.below(129)) - 64);
  const std::vector<float> d = run_mma(in, path, t, options);
  int64_t wrong = 0;
  for (size_t tile = 0; tile < t.tiles; ++tile)
    for (int i = 0; i < t.rows; ++i)
      for (int j = 0; j < 8; ++j) {
        double sum = t.c[(tile * t.rows + i) * 8 + j];
        for (size_t kk = 0; kk < t.k; ++kk)
          sum += value(in, t.a[(tile * t.rows + i) * t.k + kk]) * value(in, t.b[(tile * t.k + kk) * 8 + j]);
        const float got = d[(tile * t.rows + i) * 8 + j];
        if (got != static_cast<float>(sum) && wrong++ == 0)
          first_error = "tile " + std::to_string(tile) + " D[" + std::to_string(i) + "][" + std::to_string(j) +
                        "] = " + show(got) + ", exact " + show(sum);
      }
  return wrong;
}

ProbeResult run_probe(MmaInput in, MmaPath path, const Probe& p, MmaOptions options, const Options& o) {
  const fp::Format& f = code_format(in);
  MmaTiles t;
  t.tiles = 1, t.k = p.a.size(), t.rows = mma_rows(path);
  for (int i = 0; i < t.rows; ++i)
    for (double x : p.a) t.a.push_back(static_cast<uint32_t>(std::isnan(x) ? f.quiet_nan_bits(false) : f.encode(x)));
  for (size_t kk = 0; kk < t.k; ++kk)
    for (int j = 0; j < 8; ++j)
      t.b.push_back(static_cast<uint32_t>(std::isnan(p.b[kk]) ? f.quiet_nan_bits(false) : f.encode(p.b[kk])));
  t.c.assign(t.rows * 8, static_cast<float>(p.acc));
  const std::vector<float> d = execute(o, in, path, t, options);
  std::vector<double> a, b;
  for (size_t kk = 0; kk < t.k; ++kk) a.push_back(value(in, t.a[kk])), b.push_back(value(in, t.b[kk * 8]));
  const Candidate model = candidates(in, path)[0];
  const auto want = static_cast<float>(evaluate(model, p.acc, a, b));
  const auto ruled = static_cast<float>(evaluate(model, p.acc, a, b, true));
  const bool uniform = std::all_of(d.begin(), d.end(), [&](float x) { return stats::same_bits(x, d[0]); });
  ProbeResult r;
  r.ok = uniform && stats::same_bits(d[0], want);
  const bool by_rules = uniform && !r.ok && stats::same_bits(d[0], ruled);
  char line[512];
  std::snprintf(line, sizeof line, "  %-50s GPU %-16s model %-16s %s%s%s", p.name.c_str(), show(d[0]).c_str(),
                show(want).c_str(),
                r.ok       ? "ok"
                : by_rules ? "differs: a chip rule"
                           : "DIFFERS",
                uniform ? "" : " (outputs of the tile differ!)",
                p.published.empty() ? "" : ("; published " + p.published).c_str());
  r.line = line;
  r.j = {{"probe", p.name},           {"gpu", show(d[0])},        {"model", show(want)},         {"identical", r.ok},
         {"by_chip_rules", by_rules}, {"published", p.published}, {"all_outputs_equal", uniform}};
  return r;
}

// The chip, or with --cpu-model the model standing in for it (a dry run of everything but the
// kernels, for machines without a GPU).
std::vector<float> execute(const Options& o, MmaInput in, MmaPath path, const MmaTiles& t, MmaOptions options) {
  if (!o.cpu_model) return run_mma(in, path, t, options);
  std::vector<float> d(t.tiles * t.rows * 8);
  std::vector<double> a(t.k), b(t.k);
  const Candidate model = candidates(in, path)[0];
  for (size_t tile = 0; tile < t.tiles; ++tile)
    for (int i = 0; i < t.rows; ++i)
      for (int j = 0; j < 8; ++j) {
        for (size_t kk = 0; kk < t.k; ++kk)
          a[kk] = value(in, t.a[(tile * t.rows + i) * t.k + kk]), b[kk] = value(in, t.b[(tile * t.k + kk) * 8 + j]);
        const size_t at = (tile * t.rows + i) * 8 + j;
        d[at] = static_cast<float>(evaluate(model, t.c[at], a, b, true));
      }
  return d;
}

// Self-check, probes and random sets of one instruction; false when the self-check fails.
bool run_instruction(const Options& o, MmaInput in, MmaPath path, int threads, json& out, std::ofstream& samples,
                     std::vector<Row>& rows) {
  const std::vector<Candidate> cands = candidates(in, path);
  // (1) exact self-check; for wgmma it picks the descriptor convention.
  MmaOptions options;
  std::string error;
  int64_t wrong = o.cpu_model ? 0 : self_check(in, path, options, error);
  if (wrong && path == MmaPath::wgmma) {
    std::string error2;
    options.swap_descriptor_offsets = true;
    if (self_check(in, path, options, error2) == 0)
      wrong = 0;
    else
      options.swap_descriptor_offsets = false;
  }
  std::printf("\n== %s: %s\nself-check (integer data, exact): %s%s\n", mma_instruction(in, path).c_str(),
              model_name(in, path).c_str(),
              wrong ? ("FAILED, " + std::to_string(wrong) + " wrong; first: " + error).c_str() : "pass",
              options.swap_descriptor_offsets ? " (descriptor offsets swapped)" : "");
  out["self_check"].push_back({{"instruction", mma_instruction(in, path)},
                               {"wrong", wrong},
                               {"first", error},
                               {"swapped_descriptor_offsets", options.swap_descriptor_offsets}});
  if (wrong) return false;
  // (2) probes.
  std::map<std::string, std::pair<std::string, std::string>> scans;  // positions fused with 0: GPU, model
  for (const Probe& p : probes(in, path)) {
    const ProbeResult r = run_probe(in, path, p, options, o);
    json j = r.j;
    j["instruction"] = mma_instruction(in, path);
    out["probes"].push_back(j);
    if (p.scan.empty()) {
      std::printf("%s\n", r.line.c_str());
      continue;
    }
    // acc 1: fused when the result is not 1; acc 0: fused when it is 1 (see probes()).
    auto& [gpu, model] = scans[p.scan];
    const std::string pos = p.name.substr(p.name.rfind(' ') + 1);
    if ((p.acc != 0) != (r.j["gpu"] == show(1.0))) gpu += (gpu.empty() ? "" : ",") + pos;
    if ((p.acc != 0) != (r.j["model"] == show(1.0))) model += (model.empty() ? "" : ",") + pos;
  }
  for (const auto& [name, s] : scans)
    std::printf("  %s scan, positions in the fused step of position 0: GPU {%s}; model {%s} %s\n", name.c_str(),
                s.first.c_str(), s.second.c_str(), s.first == s.second ? "ok" : "DIFFERS");
  // (3) random sets.
  const size_t chunk = path == MmaPath::mma_sync ? 1 << 15 : 1 << 10;
  for (size_t si = 0; si < kSets.size(); ++si) {
    const TestSet& set = kSets[si];
    Row row{path, in, si, set_k(set, in), 0, {}};
    const size_t full = path == MmaPath::mma_sync ? set.sync_tiles : set.wgmma_tiles;
    row.tiles = std::max<size_t>(1, static_cast<size_t>(static_cast<double>(full) * o.scale));
    // Chains cost K / k steps an output: fewer sampled tiles.
    const size_t sample_tiles = std::min(row.tiles, kSampleTiles[static_cast<int>(path)] / (set.k ? 4 : 1));
    for (size_t first = 0; first < row.tiles; first += chunk) {
      const size_t count = std::min(chunk, row.tiles - first);
      const MmaTiles t = make_tiles(path, in, si, first, count, threads);
      const std::vector<float> d = execute(o, in, path, t, options);
      if (first == 0 && samples.is_open()) {
        const int32_t head[4] = {static_cast<int32_t>(path), static_cast<int32_t>(in), static_cast<int32_t>(si),
                                 static_cast<int32_t>(sample_tiles)};
        samples.write(reinterpret_cast<const char*>(head), sizeof head);
        samples.write(reinterpret_cast<const char*>(d.data()), sample_tiles * t.rows * 8 * sizeof(float));
      }
      row.tally.merge(check(in, t, d, first, sample_tiles, cands, threads));
    }
    std::printf("  %-26s K=%-4zu %8zu tiles %11lld outputs  bit-identical %s (with the chip rules %s)  max %lld ulps\n",
                set.name.c_str(), row.k, row.tiles, static_cast<long long>(row.tally.outputs),
                percent(row.tally.identical, row.tally.outputs).c_str(),
                percent(row.tally.identical + row.tally.by_rules, row.tally.outputs).c_str(),
                static_cast<long long>(row.tally.max_ulps));
    print_classes(row, cands);
    out["rows"].push_back(row_json(row, cands));
    rows.push_back(std::move(row));
    std::fflush(stdout);
  }
  print_variants(rows, path, in, cands);
  return true;
}

int device_run(const Options& o) {
  std::string why;
  if (!o.cpu_model && !device_available(&why)) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 0;
  }
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  const std::string device =
      o.cpu_model ? "no GPU: the model stands in for the chip (--cpu-model)" : device_info().describe();
  std::printf("%s; %d host threads\n", device.c_str(), threads);
  json out = {{"device", device}, {"self_check", json::array()}, {"probes", json::array()}, {"rows", json::array()}};
  std::ofstream samples;
  if (!o.samples_path.empty()) {
    samples.open(o.samples_path, std::ios::binary);
    samples.write(kSamplesMagic, 10);
  }
  bool failed = false;
  std::vector<Row> rows;
  // mma.sync first: a CUDA error (sticky for the process) in the wgmma kernels loses only those.
  for (MmaPath path : o.paths)
    for (MmaInput in : o.inputs) {
      try {
        failed |= !run_instruction(o, in, path, threads, out, samples, rows);
      } catch (const CudaError& e) {
        std::printf("\n%s: CUDA error: %s\n", mma_instruction(in, path).c_str(), e.what());
        out["errors"].push_back(mma_instruction(in, path) + ": " + e.what());
        failed = true;
      }
    }
  for (const Row& r : rows) failed |= r.tally.identical + r.tally.by_rules != r.tally.outputs;
  print_table(rows);
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(1) << "\n";
  return failed ? 1 : 0;
}

}  // namespace fplab::tools::gpu::mma
