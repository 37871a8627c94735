// gpu_gemm_bench: our GEMM kernel (fp32 FMA chains on CUDA cores, sim/cuda/gpu_gemm.cu) against
// cuBLAS's SGEMM on the same shapes, and the cost of determinism for our split-K and weight-gradient
// kernels: ordered (split(S):seq | all:seq) vs atomic (split(S):seq | all:atomic) time. Each time
// is the median of --reps event-timed runs after a warm-up; inputs uniform in [-1, 1), never zeros.
// cuBLAS is loaded at run time (dlopen libcublas.so.13): where it is missing its columns say so.
// cuBLAS runs in CUBLAS_DEFAULT_MATH (no TF32: fp32 FMAs, its own order) — for the record, our
// kernels are written for exactness first.
//
//   gpu_gemm_bench [--json FILE] [--reps N] [--serial-waits | --tiles]      (--help)
//
// --tiles: a ResNet-18 step's GEMMs in every output tile against cuBLAS, then its 3x3 convolutions'
// passes that gather their operand (forward, col2im) in every tile they take.
// --serial-waits: only where the serial split-K form's time goes (GpuGemmProbe::serial_timeline) on the
// two short-part shapes where determinism costs most and on a long-part one: per block, the
// chains, the wait for the part before, the tail, as medians, 90th percentiles and shares.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cuda/cuda_check.cuh"
#include "sim/conv_geometry.hpp"
#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/gpu_conv.hpp"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_gemm.hpp"
#include "sim/cuda/gpu_gemm_probe.hpp"
#include "tools/gpu/tool_cli.hpp"
#include "tools/gpu/tool_device.hpp"
#include "tools/gpu/tool_rng.hpp"
#include "sim/cuda/gpu_timing.cuh"

using namespace fplab;
using namespace fplab::sim;
using namespace fplab::sim::gpu;
using nlohmann::json;

namespace {

// The few cuBLAS entry points we call, resolved at run time (ABI of cublas_api.h, v2).
struct CuBlas {
  using Create = int (*)(void**);
  using Destroy = int (*)(void*);
  using SetMathMode = int (*)(void*, int);
  using Sgemm = int (*)(void*, int, int, int, int, int, const float*, const float*, int, const float*, int,
                        const float*, float*, int);
  void* library = nullptr;
  void* handle = nullptr;
  Sgemm sgemm = nullptr;
  std::string why;

  CuBlas() {
    for (const char* name : {"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"})
      if ((library = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!library) {
      why = std::string("cuBLAS not loadable: ") + dlerror();
      return;
    }
    const auto create = reinterpret_cast<Create>(dlsym(library, "cublasCreate_v2"));
    const auto math = reinterpret_cast<SetMathMode>(dlsym(library, "cublasSetMathMode"));
    sgemm = reinterpret_cast<Sgemm>(dlsym(library, "cublasSgemm_v2"));
    if (!create || !math || !sgemm || create(&handle) != 0 || math(handle, 0 /* CUBLAS_DEFAULT_MATH */) != 0) {
      why = "cuBLAS found but not usable (symbols or handle)";
      sgemm = nullptr;
    }
  }
  ~CuBlas() {
    if (handle) reinterpret_cast<Destroy>(dlsym(library, "cublasDestroy_v2"))(handle);
  }
  // Row-major C (m x n) = A (m x k) B (k x n): column-major C^T = B^T A^T.
  void gemm(const float* a, const float* b, float* c, int m, int n, int k) const {
    const float one = 1, zero = 0;
    if (sgemm(handle, 0, 0, n, m, k, &one, b, n, a, k, &zero, c, n) != 0) throw CudaError("cublasSgemm failed");
  }
};

using fplab::sim::gpu::detail::median_ms;

struct Inputs {
  GemmShape shape;
  std::vector<float> a, b;
  Inputs(GemmShape s, uint32_t seed) : shape(s), a(s.m * s.k), b(s.k * s.n) {
    tools::gpu::ToolRng rng(seed);
    for (auto& v : a) v = rng.signed_unit();
    for (auto& v : b) v = rng.signed_unit();
  }
  std::string name() const {
    return std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" + std::to_string(shape.k);
  }
  double flop() const { return 2.0 * static_cast<double>(shape.m) * shape.n * shape.k; }
};

// cuBLAS's median time on the inputs; with `c`, its result too (C poisoned with NaN first, so
// that an output it did not write shows).
double cublas_ms(const CuBlas& cublas, const Inputs& in, int reps, std::vector<float>* c) {
  const size_t outputs = in.shape.m * in.shape.n;
  float *a, *b, *out;
  FPLAB_CUDA(cudaMalloc(&a, in.a.size() * 4));
  FPLAB_CUDA(cudaMalloc(&b, in.b.size() * 4));
  FPLAB_CUDA(cudaMalloc(&out, outputs * 4));
  FPLAB_CUDA(cudaMemcpy(a, in.a.data(), in.a.size() * 4, cudaMemcpyHostToDevice));
  FPLAB_CUDA(cudaMemcpy(b, in.b.data(), in.b.size() * 4, cudaMemcpyHostToDevice));
  FPLAB_CUDA(cudaMemset(out, 0xff, outputs * 4));
  const int m = static_cast<int>(in.shape.m), n = static_cast<int>(in.shape.n), k = static_cast<int>(in.shape.k);
  const double ms = median_ms([&] { cublas.gemm(a, b, out, m, n, k); }, reps, 1);
  if (c) FPLAB_CUDA(cudaMemcpy(c->data(), out, outputs * 4, cudaMemcpyDeviceToHost));
  cudaFree(a), cudaFree(b), cudaFree(out);
  return ms;
}

double tflops(double flop, double ms) { return flop / (ms * 1e-3) / 1e12; }

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// Where the serial form's time goes: one timed run per shape (after a warm-up), printed and as JSON.
json serial_waits() {
  struct Case {
    GemmShape shape;
    int parts;
  };
  const Case cases[] = {{{4608, 512, 1024}, 16}, {{1024, 1024, 4096}, 64}, {{2048, 2048, 8192}, 16}};
  json out = json::array();
  std::printf("\n%-18s %6s %7s %9s %8s | %-23s | %-23s | %-23s | %6s %6s\n", "m x n x k", "parts", "blocks", "span us",
              "GHz", "chains us (med, p90)", "wait us (med, p90)", "tail us (med, p90)", "wait%", "tail%");
  for (const Case& c : cases) {
    const Inputs in(c.shape, 7);
    GpuGemm gemm(in.a.data(), in.b.data(), in.shape);
    const GemmPlan plan = plan_gemm(parse_schedule("split(" + std::to_string(c.parts) + "):seq | all:seq"));
    const auto blocks = GpuGemmProbe::serial_timeline(gemm, plan);
    unsigned long long first = ~0ull, last = 0;
    std::vector<double> ghz, chains, wait, tail;
    double wait_sum = 0, tail_sum = 0, all_sum = 0;
    for (const auto& b : blocks) {
      first = std::min(first, b.start_ns), last = std::max(last, b.end_ns);
      const double cycles = static_cast<double>(b.chains_cycles + b.wait_cycles + b.tail_cycles);
      if (b.end_ns > b.start_ns + 2000) ghz.push_back(cycles / static_cast<double>(b.end_ns - b.start_ns));
    }
    const double clock = quantile(ghz, 0.5);  // cycles per ns, from blocks long enough for the timer
    for (const auto& b : blocks) {
      chains.push_back(b.chains_cycles / clock * 1e-3), wait.push_back(b.wait_cycles / clock * 1e-3);
      tail.push_back(b.tail_cycles / clock * 1e-3);
      wait_sum += b.wait_cycles, tail_sum += b.tail_cycles;
      all_sum += b.chains_cycles + b.wait_cycles + b.tail_cycles;
    }
    const double span_us = (last - first) * 1e-3;
    std::printf("%-18s %6d %7zu %9.1f %8.3f | %10.3f %10.3f  | %10.3f %10.3f  | %10.3f %10.3f  | %6.1f %6.1f\n",
                in.name().c_str(), c.parts, blocks.size(), span_us, clock, quantile(chains, 0.5), quantile(chains, 0.9),
                quantile(wait, 0.5), quantile(wait, 0.9), quantile(tail, 0.5), quantile(tail, 0.9),
                100 * wait_sum / all_sum, 100 * tail_sum / all_sum);
    out.push_back({{"m", c.shape.m},
                   {"n", c.shape.n},
                   {"k", c.shape.k},
                   {"parts", c.parts},
                   {"blocks", blocks.size()},
                   {"span_us", span_us},
                   {"clock_ghz", clock},
                   {"chains_us", {{"median", quantile(chains, 0.5)}, {"p90", quantile(chains, 0.9)}}},
                   {"wait_us", {{"median", quantile(wait, 0.5)}, {"p90", quantile(wait, 0.9)}}},
                   {"tail_us", {{"median", quantile(tail, 0.5)}, {"p90", quantile(tail, 0.9)}}},
                   {"wait_share", wait_sum / all_sum},
                   {"tail_share", tail_sum / all_sum}});
  }
  std::printf(
      "(per block, thread 0: chains = start to the flag wait, wait = until the part before released"
      " its tile, tail = read C, add, write, up to the release; shares of all blocks' summed time)\n");
  return out;
}

// --tiles: a ResNet-18 training step's GEMMs (CIFAR-style, batch 128: the first, a 3x3 of each
// stage, as fplab.torch's convolutions call them: forward (positions x taps) x (taps x out),
// input gradient (positions x out) x (out x taps), weight gradient (taps x positions) x (positions
// x out)) in h100's orders, each output tile forced, against cuBLAS on the same shape; every
// tile's bits must equal the 64 x 64 kernel's.
json tile_times(const CuBlas& cublas, int reps, bool& ok) {
  using detail::ChainTile;
  struct Case {
    const char* what;
    GemmShape shape;
    const char* schedule;
  };
  const char* wgrad = "split(16):seq | all:seq";
  const std::vector<Case> cases = {
      {"fwd stem", {131072, 64, 27}, "seq"},           {"fwd stage 1", {131072, 64, 576}, "seq"},
      {"fwd stage 2", {32768, 128, 1152}, "seq"},      {"fwd stage 3", {8192, 256, 2304}, "seq"},
      {"fwd stage 4", {2048, 512, 4608}, "seq"},       {"dgrad stage 1", {131072, 576, 64}, "seq"},
      {"dgrad stage 2", {32768, 1152, 128}, "seq"},    {"dgrad stage 4", {2048, 4608, 512}, "seq"},
      {"wgrad stage 1", {576, 64, 131072}, wgrad},     {"wgrad stage 2", {1152, 128, 32768}, wgrad},
      {"wgrad stage 3", {2304, 256, 8192}, wgrad},     {"wgrad stage 4", {4608, 512, 2048}, wgrad},
      {"wgrad stem", {27, 64, 131072}, wgrad},         {"wgrad 1x1 st 2", {64, 128, 32768}, wgrad},
      {"wgrad 1x1 st 3", {128, 256, 8192}, wgrad},     {"wgrad 1x1 st 4", {256, 512, 2048}, wgrad},
      // numpy's and h100-torch's weight gradients: one chain over the whole batch
      {"wgrad1 stem", {28, 64, 131072}, "seq"},        {"wgrad1 stage 1", {576, 64, 131072}, "seq"},
      {"wgrad1 stage 2", {1152, 128, 32768}, "seq"},   {"wgrad1 stage 3", {2304, 256, 8192}, "seq"},
      {"wgrad1 stage 4", {4608, 512, 2048}, "seq"}};
  const ChainTile tiles[] = {ChainTile::none, ChainTile::t128x128, ChainTile::t128x64, ChainTile::t16x32,
                             ChainTile::t32x64};
  constexpr int kTiles = std::size(tiles);
  json out = json::array();
  std::printf("\n%-14s %-20s %-24s %9s %9s %9s %9s %9s %9s %9s %8s %6s\n", "GEMM", "m x n x k", "schedule", "64x64",
              "128x128", "128x64", "16x32", "32x64", "chosen", "cuBLAS", "chosen/cuBLAS", "bits");
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Inputs in(c.shape, static_cast<uint32_t>(300 + i));
    GpuGemm gemm(in.a.data(), in.b.data(), in.shape);
    const GemmPlan plan = plan_gemm(parse_schedule(c.schedule));
    std::vector<float> first(in.shape.m * in.shape.n), other(first.size());
    double ms[kTiles];
    bool same = true;
    for (int t = 0; t < kTiles; ++t) {
      GpuGemmProbe::force_tile(gemm, tiles[t]);
      ms[t] = GpuGemmProbe::time_ms(gemm, plan, reps);
      gemm.run(plan, t == 0 ? first.data() : other.data());
      if (t > 0) same = same && std::memcmp(first.data(), other.data(), first.size() * sizeof(float)) == 0;
    }
    GpuGemmProbe::force_tile(gemm, std::nullopt);
    const double chosen = GpuGemmProbe::time_ms(gemm, plan, reps);
    const double blas = cublas.sgemm ? cublas_ms(cublas, in, reps, nullptr) : NAN;
    ok = ok && same;
    std::printf("%-14s %-20s %-24s %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %8.2f %6s\n", c.what, in.name().c_str(),
                c.schedule, ms[0], ms[1], ms[2], ms[3], ms[4], chosen, blas, chosen / blas, same ? "same" : "DIFFER");
    out.push_back(
        {{"gemm", c.what},
         {"m", in.shape.m},
         {"n", in.shape.n},
         {"k", in.shape.k},
         {"schedule", c.schedule},
         {"ms_by_tile", {{"64x64", ms[0]}, {"128x128", ms[1]}, {"128x64", ms[2]}, {"16x32", ms[3]}, {"32x64", ms[4]}}},
         {"chosen_tile", detail::chain_tile_name(GpuGemmProbe::tile(gemm, plan))},
         {"chosen_ms", chosen},
         {"cublas_ms", cublas.sgemm ? json(blas) : json(nullptr)},
         {"same_bits", same}});
  }
  std::printf("(ms: median of %d runs; a tile the operands do not allow runs as 64x64)\n", reps);
  return out;
}

// The convolutions' passes that read their operand as they go (GpuConv: the forward's chains over
// x, the input gradient's col2im pass over gy), a ResNet-18's 3x3 layers at batch 128, each in
// the tiles it takes (forced), on device memory; every tile's bits must equal the others'.
json conv_tile_times(int reps, bool& ok) {
  using detail::ChainTile;
  struct Case {
    const char* what;
    size_t channels, size;
  };
  const Case cases[] = {{"stage 1", 64, 32}, {"stage 2", 128, 16}, {"stage 3", 256, 8}, {"stage 4", 512, 4}};
  const std::optional<ChainTile> tiles[] = {ChainTile::t128x128, ChainTile::t128x64, ChainTile::t32x64, std::nullopt};
  json out = json::array();
  std::printf("\n%-22s %9s %9s %9s %9s %6s\n", "convolution (batch 128)", "128x128", "128x64", "32x64", "chosen",
              "bits");
  for (const Case& c : cases) {
    const ConvGeometry g{128, c.channels, c.size, c.size, 3, 1, 1};
    const size_t x_floats = g.input_size(), w_floats = g.taps() * c.channels, rows = g.rows() * c.channels;
    tools::gpu::ToolRng rng(static_cast<uint32_t>(c.channels));
    std::vector<float> host(std::max(x_floats, w_floats));
    DeviceBuffer x, w, w_scratch, y;
    float* const dx = x.reserve<float>(x_floats);
    float* const dw = w.reserve<float>(w_floats);
    float* const dws = w_scratch.reserve<float>(w_floats);
    float* const dy = y.reserve<float>(std::max(rows, x_floats));
    for (auto& v : host) v = rng.signed_unit();
    FPLAB_CUDA(cudaMemcpy(dx, host.data(), x_floats * 4, cudaMemcpyHostToDevice));
    FPLAB_CUDA(cudaMemcpy(dw, host.data(), w_floats * 4, cudaMemcpyHostToDevice));
    for (const bool forward : {true, false}) {
      double ms[std::size(tiles)];
      std::vector<float> first(forward ? rows : x_floats), other(first.size());
      bool same = true;
      for (size_t t = 0; t < std::size(tiles); ++t) {
        GpuConv::force_tile(tiles[t]);
        // x stands in for gy (the same shape at stride 1): the pass's time, not its meaning
        const auto run = [&] {
          const bool took = forward ? GpuConv::forward_on_device(g, c.channels, dx, dw, dy, {true, nullptr})
                                    : GpuConv::col2im_dgrad_on_device(g, c.channels, dx, dw, dws, dy, {true, nullptr});
          if (!took) throw std::runtime_error("conv_tile_times: the pass did not take the shape");
        };
        ms[t] = detail::median_ms(run, reps);
        FPLAB_CUDA(cudaMemcpy(t == 0 ? first.data() : other.data(), dy, first.size() * 4, cudaMemcpyDeviceToHost));
        if (t > 0) same = same && std::memcmp(first.data(), other.data(), first.size() * 4) == 0;
      }
      GpuConv::force_tile(std::nullopt);
      ok = ok && same;
      const std::string what = std::string(forward ? "fwd " : "dgrad ") + c.what;
      std::printf("%-22s %9.4f %9.4f %9.4f %9.4f %6s\n", what.c_str(), ms[0], ms[1], ms[2], ms[3],
                  same ? "same" : "DIFFER");
      out.push_back({{"pass", what},
                     {"channels", c.channels},
                     {"size", c.size},
                     {"ms_by_tile", {{"128x128", ms[0]}, {"128x64", ms[1]}, {"32x64", ms[2]}}},
                     {"chosen_ms", ms[3]},
                     {"same_bits", same}});
    }
  }
  std::printf("(ms: median of %d runs; a tile a pass does not take runs as chosen)\n", reps);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "gpu_gemm_bench.json";
  int reps = 20;
  bool waits_only = false;
  CLI::App app(
      "Our fp32 GEMM against cuBLAS's SGEMM, and the cost of determinism: ordered vs atomic\n"
      "split-K and weight-gradient times. Needs a GPU (prints SKIPPED without one); the table\n"
      "comes last.",
      "gpu_gemm_bench");
  app.add_option("--json", json_path, "where to write the JSON results")->capture_default_str();
  app.add_option("--reps", reps, "event-timed runs per median")->check(CLI::Range(3, 1 << 20))->capture_default_str();
  app.add_flag("--serial-waits", waits_only,
               "only where the serial split-K form's time goes (chains, wait, tail per block) on three shapes");
  bool tiles_only = false;
  app.add_flag("--tiles", tiles_only,
               "only a ResNet-18 step's GEMMs (batch 128, h100's orders): each output tile forced, vs cuBLAS; "
               "then its 3x3 convolutions' forward and col2im passes in each tile they take");
  app.footer(
      "Examples:\n  gpu_gemm_bench\n  gpu_gemm_bench --json out/gpu_gemm_bench.json --reps 20\n"
      "  gpu_gemm_bench --serial-waits --json out/gpu_gemm_waits.json\n"
      "  gpu_gemm_bench --tiles --json out/gpu_gemm_tiles.json\n");
  if (const int status = tools::gpu::parse_options(app, argc, argv); status >= 0) return status;
  const std::string date = tools::gpu::utc_now();
  const auto device = tools::gpu::device_or_skip(&date);
  if (!device) return 0;
  const DeviceInfo& info = *device;
  if (waits_only) {
    const json doc = {{"device", info.describe()}, {"date", date}, {"serial_waits", serial_waits()}};
    std::ofstream(json_path) << doc.dump(1) << '\n';
    return 0;
  }
  const CuBlas cublas;
  if (!cublas.sgemm) std::printf("%s\n", cublas.why.c_str());
  bool ok = true;
  if (tiles_only) {
    const json doc = {{"device", info.describe()},
                      {"date", date},
                      {"reps", reps},
                      {"tiles", tile_times(cublas, reps, ok)},
                      {"conv_tiles", conv_tile_times(reps, ok)}};
    std::ofstream(json_path) << doc.dump(1) << '\n';
    std::printf("every tile's bits equal the 64x64 kernel's: %s\n", ok ? "yes" : "NO");
    return ok ? 0 : 1;
  }

  // 1. Our kernel vs cuBLAS: large squares, and the shapes training runs (mlp 784-128-10 at batch
  // 64: fwd, dgrad, wgrad; small_cnn's first convolution as im2col GEMM, forward and wgrad).
  const std::vector<GemmShape> shapes = {{4096, 4096, 4096}, {2048, 2048, 8192}, {8192, 8192, 1024},
                                         {64, 128, 784},     {64, 784, 128},     {784, 128, 64},
                                         {50176, 16, 9},     {9, 16, 50176},     {144, 32, 12544}};
  json vs_cublas = json::array();
  std::printf("\n%-18s %12s %12s %12s %12s %10s %12s\n", "m x n x k", "ours seq ms", "TFLOP/s", "cuBLAS ms", "TFLOP/s",
              "ours/cuBLAS", "rel. diff");
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Inputs in(shapes[i], static_cast<uint32_t>(i + 1));
    GpuGemm ours(in.a.data(), in.b.data(), in.shape);
    const GemmPlan plan = plan_gemm(parse_schedule("seq"));
    const double ours_ms = GpuGemmProbe::time_ms(ours, plan, reps);
    std::vector<float> c_ours(in.shape.m * in.shape.n), c_blas(c_ours.size(), NAN);
    ours.run(plan, c_ours.data());
    double blas_ms = NAN, rel = NAN;
    if (cublas.sgemm) {
      blas_ms = cublas_ms(cublas, in, reps, &c_blas);
      double diff = 0, norm = 0;
      for (size_t j = 0; j < c_ours.size(); ++j) {
        diff += (double(c_ours[j]) - c_blas[j]) * (double(c_ours[j]) - c_blas[j]);
        norm += double(c_blas[j]) * c_blas[j];
      }
      rel = std::sqrt(diff / norm);
      ok = ok && rel < 1e-5;  // two fp32 orders of the same sums; NaN (an unwritten output) fails
    }
    std::printf("%-18s %12.3f %12.2f %12.3f %12.2f %10.2f %12.2e\n", in.name().c_str(), ours_ms,
                tflops(in.flop(), ours_ms), blas_ms, tflops(in.flop(), blas_ms), ours_ms / blas_ms, rel);
    vs_cublas.push_back({{"m", in.shape.m},
                         {"n", in.shape.n},
                         {"k", in.shape.k},
                         {"ours_ms", ours_ms},
                         {"ours_tflops", tflops(in.flop(), ours_ms)},
                         {"cublas_ms", cublas.sgemm ? json(blas_ms) : json(nullptr)},
                         {"cublas_tflops", cublas.sgemm ? json(tflops(in.flop(), blas_ms)) : json(nullptr)},
                         {"relative_difference", cublas.sgemm ? json(rel) : json(nullptr)}});
  }

  // 2. The cost of determinism: split-K parts added in order (a workspace and a second kernel) vs
  // atomicAdd-ed into C, on a large GEMM and on weight-gradient shapes (small m x n, long K over
  // batch x positions: mlp full batch, small_cnn's three convolutions, a medium_cnn layer).
  struct Pair {
    GemmShape shape;
    int parts;
  };
  const std::vector<Pair> pairs = {{{2048, 2048, 8192}, 4}, {{2048, 2048, 8192}, 16}, {{784, 128, 60000}, 16},
                                   {{784, 128, 60000}, 64}, {{9, 16, 50176}, 16},     {{9, 16, 50176}, 128},
                                   {{144, 32, 12544}, 16},  {{288, 32, 3136}, 16},    {{4608, 512, 1024}, 16},
                                   {{256, 256, 2048}, 16},  {{1024, 1024, 4096}, 64}};
  json determinism = json::array();
  using Form = GpuGemm::OrderedForm;
  const Form forms[] = {Form::last_folds, Form::two_passes, Form::serial};
  constexpr int kForms = std::size(forms);
  std::printf("\n%-18s %6s %11s %12s %12s %12s %12s %12s %9s\n", "m x n x k", "parts", "form", "last folds",
              "two passes", "serial", "ordered ms", "atomic ms", "ord/atom");
  double worst = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const Inputs in(pairs[i].shape, static_cast<uint32_t>(100 + i));
    GpuGemm gemm(in.a.data(), in.b.data(), in.shape);
    const std::string s = std::to_string(pairs[i].parts);
    const GemmPlan ordered = plan_gemm(parse_schedule("split(" + s + "):seq | all:seq"));
    const GemmPlan atomic = plan_gemm(parse_schedule("split(" + s + "):seq | all:atomic"));
    const Form chosen = gemm.ordered_form(ordered);
    // Every form, forced, and the atomic combine, alternating; the best median of two rounds each.
    double form_ms[kForms], atomic_ms = 1e30;
    std::fill(std::begin(form_ms), std::end(form_ms), 1e30);
    for (int round = 0; round < 2; ++round) {
      for (int f = 0; f < kForms; ++f) {
        GpuGemmProbe::force_ordered_form(gemm, forms[f]);
        form_ms[f] = std::min(form_ms[f], GpuGemmProbe::time_ms(gemm, ordered, reps));
      }
      GpuGemmProbe::force_ordered_form(gemm, Form::by_shape);
      atomic_ms = std::min(atomic_ms, GpuGemmProbe::time_ms(gemm, atomic, reps));
    }
    const double ordered_ms = form_ms[std::find(std::begin(forms), std::end(forms), chosen) - std::begin(forms)];
    const double ratio = ordered_ms / atomic_ms;
    worst = std::max(worst, ratio);
    std::printf("%-18s %6d %11s %12.4f %12.4f %12.4f %12.4f %12.4f %9.3f\n", in.name().c_str(), pairs[i].parts,
                GpuGemm::form_name(chosen), form_ms[0], form_ms[1], form_ms[2], ordered_ms, atomic_ms, ratio);
    json by_form = json::object();
    for (int f = 0; f < kForms; ++f) by_form[GpuGemm::form_name(forms[f])] = form_ms[f];
    determinism.push_back({{"m", in.shape.m},
                           {"n", in.shape.n},
                           {"k", in.shape.k},
                           {"parts", pairs[i].parts},
                           {"form", GpuGemm::form_name(chosen)},
                           {"form_ms", by_form},
                           {"ordered_ms", ordered_ms},
                           {"atomic_ms", atomic_ms},
                           {"ordered_over_atomic", ratio}});
  }
  std::printf("\nworst ordered / atomic time: %.3f (target <= 1.05) %s\n", worst, worst <= 1.05 ? "ok" : "MISSED");
  std::printf("our seq results vs cuBLAS within 1e-5 relative (and every output written): %s\n",
              !cublas.sgemm ? "not checked (no cuBLAS)"
              : ok          ? "yes"
                            : "NO");
  const json doc = {{"device", info.describe()},
                    {"date", date},
                    {"reps", reps},
                    {"cublas", cublas.sgemm ? "CUBLAS_DEFAULT_MATH (fp32, no TF32)" : cublas.why},
                    {"vs_cublas", vs_cublas},
                    {"determinism", determinism},
                    {"worst_ordered_over_atomic", worst}};
  std::ofstream(json_path) << doc.dump(1) << '\n';
  return ok ? 0 : 1;
}
