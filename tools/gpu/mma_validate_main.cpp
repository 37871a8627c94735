// gpu_mma_validate's options and main (what it does: mma_validate.hpp).
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp/round.hpp"
#include "tools/gpu/mma_validate.hpp"
#include "tools/gpu/tool_cli.hpp"

using namespace fplab;
using namespace fplab::tools::gpu::mma;

namespace {

template <typename T>
std::vector<T> parse_list(const std::string& text, const std::vector<T>& all) {
  std::vector<T> chosen;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    auto it = std::find_if(all.begin(), all.end(), [&](T x) { return item == to_string(x); });
    if (it == all.end()) throw std::invalid_argument("unknown item '" + item + "'");
    chosen.push_back(*it);
    start = end + 1;
  }
  return chosen;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string inputs, paths;
  CLI::App app(
      "Real tensor-core MMAs (mma.sync and wgmma, one instruction at a time) against fplab's\n"
      "model of them, bit for bit, for tf32, fp16, bf16, e4m3 and e5m2 inputs with fp32\n"
      "accumulation. Exit status 1 when a self-check fails or an output differs from the model\n"
      "in a way the chip rules do not explain. Needs a GPU, except with --replay or --cpu-model.",
      "gpu_mma_validate");
  app.add_option("--json", o.json_path, "where to write the JSON results");
  app.add_option("--samples", o.samples_path, "write the GPU results of the first tiles of every set here");
  app.add_option("--replay", o.replay_path, "redo the comparison on a --samples file (no GPU needed)");
  app.add_option("--scale", o.scale, "fraction of the default number of tiles")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "checking threads (0: all cores)")->check(CLI::NonNegativeNumber);
  app.add_flag("--cpu-model", o.cpu_model, "the model plays the chip: a dry run without a GPU");
  app.add_option("--inputs", inputs, "comma list of tf32, fp16, bf16, e4m3, e5m2 (default: all)");
  app.add_option("--paths", paths, "comma list of mma.sync, wgmma (default: both)");
  app.footer(
      "Examples:\n  gpu_mma_validate --json out/gpu_mma_validate.json\n"
      "  gpu_mma_validate --inputs fp16,e4m3 --paths wgmma --scale 0.1\n"
      "  gpu_mma_validate --cpu-model --scale 0.01 --inputs bf16\n"
      "  gpu_mma_validate --replay gpu_mma_samples.bin --json replay.json\n");
  if (const int status = tools::gpu::parse_options(app, argc, argv); status >= 0) return status;
  try {
    if (!inputs.empty()) o.inputs = parse_list(inputs, kInputs);
    if (!paths.empty()) o.paths = parse_list(paths, kPaths);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "gpu_mma_validate: error: %s (see gpu_mma_validate --help)\n", e.what());
    return 2;
  }
  try {
    if (!o.replay_path.empty()) return replay(o);
    return device_run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_mma_validate: %s\n", e.what());
    return 2;
  }
}
