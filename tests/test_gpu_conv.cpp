// A convolution's lowering on the device (sim/cuda/gpu_conv.hpp) against the CPU's
// (models/conv2d.cpp), bit for bit: im2col against Conv2d::im2col, col2im against the col2im of
// Conv2d::backward, on awkward shapes and inputs with -0, subnormals and mixed magnitudes; a
// whole Conv2d layer, forward and backward, with the GPU backend against the CPU path; and the
// direct input gradient's chains that read their taps from the output gradient against the
// gathered taps (models/conv_dgrad_taps.hpp) in FMA chains on the CPU; the forward's chains that
// read their columns from x, and the input gradient's col2im pass, against straightforward loops
// (FMA chains, col2im's sums) on the CPU. Without a device the GPU cases say "SKIPPED: no CUDA
// device" and pass.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "models/compute.hpp"
#include "models/conv2d.hpp"
#include "models/conv_dgrad_taps.hpp"
#include "models/gpu_backend.hpp"
#include "profiles/hw_profile.hpp"
#include "sim/conv_geometry.hpp"
#include "sim/cuda/gpu_conv.hpp"
#include "sim/cuda/gpu_device.hpp"
#include "tests/gpu_device_or_skip.hpp"

using namespace fplab;
using namespace fplab::models;
using sim::ConvGeometry;

using test::have_device;

namespace {

// Signed zeros, subnormals, tiny and large normals, ordinary values. Magnitudes stay below 2^40
// so that no product or sum overflows (NaN payloads are not what is being compared).
float mixed_value(std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  switch (rng() % 8) {
    case 0:
      return -0.0f;
    case 1:
      return 0.0f;
    case 2: {
      const auto bits = static_cast<uint32_t>(((rng() & 0x7fffffu) | 1u) | (rng() % 2 ? 0x80000000u : 0u));
      return std::bit_cast<float>(bits);  // a subnormal of either sign
    }
    case 3:
      return std::ldexp(normal(rng), -120 + static_cast<int>(rng() % 10));
    case 4:
      return std::ldexp(normal(rng), 20 + static_cast<int>(rng() % 20));
    default:
      return std::ldexp(normal(rng), -10 + static_cast<int>(rng() % 20));
  }
}

Tensor<float> mixed_tensor(std::vector<size_t> shape, std::mt19937_64& rng) {
  Tensor<float> t(std::move(shape));
  for (float& v : t.data) v = mixed_value(rng);
  return t;
}

// The first index where the bits differ, or -1; `nan_alike`: any NaN matches any NaN (the CPU's
// and the GPU's invalid operations make NaNs of other signs and payloads).
long first_difference(const std::vector<float>& a, const std::vector<float>& b, bool nan_alike = false) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (nan_alike && std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return static_cast<long>(i);
  }
  return -1;
}

// Rows (b, position) x channels as the layer's tensor (batch, channels, positions), bias[c] added
// as a float32 sum where given: what a planar RowsOut stores.
std::vector<float> planar_of(const std::vector<float>& rows, size_t positions, size_t channels,
                             const std::vector<float>* bias = nullptr) {
  std::vector<float> out(rows.size());
  for (size_t r = 0; r < rows.size() / channels; ++r)
    for (size_t c = 0; c < channels; ++c) {
      const float v = rows[r * channels + c];
      out[(r / positions * channels + c) * positions + r % positions] = bias ? v + (*bias)[c] : v;
    }
  return out;
}

// Kernel 1, 3, 5, 7 x stride 1, 2, 3 x padding 0..3 x two H != W inputs of odd and even sizes x
// batch 1, 3 x channels 1, 5: every combination where the kernel fits the padded input.
std::vector<ConvGeometry> awkward_geometries() {
  std::vector<ConvGeometry> out;
  for (size_t kernel : {1, 3, 5, 7})
    for (size_t stride : {1, 2, 3})
      for (size_t padding : {0, 1, 2, 3})
        for (auto [h, w] : {std::pair<size_t, size_t>{9, 6}, {5, 13}})
          for (size_t batch : {1, 3})
            for (size_t channels : {1, 5})
              if (kernel <= std::min(h, w) + 2 * padding)
                out.push_back({batch, channels, h, w, kernel, stride, padding});
  return out;
}

std::string describe(const ConvGeometry& g) {
  return "batch " + std::to_string(g.batch) + ", channels " + std::to_string(g.channels) + ", " +
         std::to_string(g.height) + " x " + std::to_string(g.width) + ", kernel " + std::to_string(g.kernel) +
         ", stride " + std::to_string(g.stride) + ", padding " + std::to_string(g.padding);
}

}  // namespace

TEST_CASE("gpu conv: im2col == Conv2d::im2col bit for bit on awkward shapes") {
  if (!have_device()) return;
  sim::gpu::GpuConv conv;
  std::mt19937_64 rng(20240611);
  for (const ConvGeometry& g : awkward_geometries()) {
    INFO(describe(g));
    const Conv2d<float> layer(g.channels, 2, g.kernel, g.stride, g.padding);
    const auto x = mixed_tensor({g.batch, g.channels, g.height, g.width}, rng);
    Tensor<float> cpu;
    layer.im2col(x, cpu);
    REQUIRE(cpu.size() == g.rows() * g.taps());
    std::vector<float> gpu(cpu.size(), 1.0f);  // not 0: the kernel must write the padding's +0
    conv.im2col(g, x.ptr(), gpu.data());
    CHECK(first_difference(cpu.data, gpu) == -1);
  }
}

TEST_CASE("gpu conv: col2im == the col2im of Conv2d::backward bit for bit on awkward shapes") {
  if (!have_device()) return;
  // One output channel: dcols[r, t] = dy[r] * w[t] is one rounded product (g is dy itself and W^T
  // is W), so the columns' gradient carries dy's -0s and subnormals into col2im.
  const profiles::OpTable ops = profiles::op_table_preset("seq");
  sim::gpu::GpuConv conv;
  std::mt19937_64 rng(77);
  size_t negative_zeros = 0, subnormals = 0;
  for (const ConvGeometry& g : awkward_geometries()) {
    INFO(describe(g));
    Conv2d<float> layer(g.channels, 1, g.kernel, g.stride, g.padding);
    Tensor<float>& w = layer.parameters()[0]->value;
    for (float& v : w.data) v = rng() % 2 ? mixed_value(rng) : (rng() % 2 ? 1.0f : -0.125f);
    Context ctx;
    ctx.ops = &ops;
    const auto x = mixed_tensor({g.batch, g.channels, g.height, g.width}, rng);
    const auto y = layer.forward(x, ctx);
    const auto dy = mixed_tensor(y.shape, rng);
    const Tensor<float> cpu = layer.backward(dy, ctx);  // the CPU's GEMM and col2im
    std::vector<float> dcols(g.rows() * g.taps());
    matmul(ctx, profiles::OpKind::dgrad, dy.ptr(), w.ptr(), dcols.data(), g.rows(), g.taps(), 1);  // Conv2d's dgrad GEMM
    for (float v : dcols) {
      negative_zeros += v == 0.0f && std::signbit(v);
      subnormals += std::fpclassify(v) == FP_SUBNORMAL;
    }
    std::vector<float> gpu(cpu.size(), 1.0f);
    conv.col2im(g, dcols.data(), gpu.data());
    CHECK(first_difference(cpu.data, gpu) == -1);
  }
  CHECK(negative_zeros > 0);  // the inputs did reach col2im
  CHECK(subnormals > 0);
}

TEST_CASE("gpu conv: a Conv2d layer's forward and backward with the GPU backend == the CPU path") {
  if (!have_device()) return;
  struct Shape {
    size_t batch, cin, cout, h, w, kernel, stride, padding;
  };
  for (const char* table_name : {"seq", "h100"}) {
    const profiles::OpTable ops =
        std::string(table_name) == "seq" ? profiles::op_table_preset("seq") : profiles::find_hw_profile("h100").deterministic_ops;
    const auto backend = make_gpu_backend(ops);
    for (const Shape s :
         {Shape{3, 3, 4, 11, 8, 3, 2, 1}, Shape{2, 5, 2, 7, 9, 5, 1, 2}, Shape{1, 1, 6, 28, 28, 3, 1, 1}}) {
      INFO(table_name << ": " << s.batch << " x " << s.cin << " x " << s.h << " x " << s.w << " -> " << s.cout
                      << ", kernel " << s.kernel << ", stride " << s.stride << ", padding " << s.padding);
      Context cpu_ctx;
      cpu_ctx.ops = &ops;
      cpu_ctx.algo_seed = 5;
      Context gpu_ctx = cpu_ctx;
      gpu_ctx.backend = backend.get();
      Conv2d<float> cpu(s.cin, s.cout, s.kernel, s.stride, s.padding),
          gpu(s.cin, s.cout, s.kernel, s.stride, s.padding);
      cpu.initialize(cpu_ctx);
      gpu.initialize(gpu_ctx);
      std::mt19937_64 rng(s.h * 100 + s.cout);
      const auto x = mixed_tensor({s.batch, s.cin, s.h, s.w}, rng);
      const auto y_cpu = cpu.forward(x, cpu_ctx), y_gpu = gpu.forward(x, gpu_ctx);
      CHECK(first_difference(y_cpu.data, y_gpu.data) == -1);
      const auto dy = mixed_tensor(y_cpu.shape, rng);
      const auto dx_cpu = cpu.backward(dy, cpu_ctx), dx_gpu = gpu.backward(dy, gpu_ctx);
      CHECK(first_difference(dx_cpu.data, dx_gpu.data) == -1);
      for (size_t p = 0; p < 2; ++p)
        CHECK(first_difference(cpu.parameters()[p]->grad.data, gpu.parameters()[p]->grad.data) == -1);
      cpu_ctx.training = gpu_ctx.training = false;  // evaluation: no columns kept
      CHECK(first_difference(cpu.forward(x, cpu_ctx).data, gpu.forward(x, gpu_ctx).data) == -1);
    }
  }
}

TEST_CASE("gpu conv: the direct input gradient's chains over taps read from gy == gathered taps, CPU FMA chains") {
  if (!have_device()) return;
  struct Shape {
    size_t batch, cin, cout, h, w, kernel, stride, padding;
  };
  // Rows not a multiple of the 128-row tile, K not a multiple of the 8-term K tile, stride 2, a
  // 1 x 1 kernel, padding beyond kernel - 1; each shape large enough for the wide tiles.
  for (const Shape s : {Shape{3, 48, 36, 75, 75, 3, 1, 2}, Shape{3, 64, 20, 64, 64, 3, 2, 1},
                        Shape{3, 52, 8, 60, 60, 1, 2, 0}, Shape{2, 48, 12, 80, 80, 3, 1, 3}}) {
    INFO(s.batch << " x " << s.cin << " x " << s.h << " x " << s.w << " -> " << s.cout << ", kernel " << s.kernel
                 << ", stride " << s.stride << ", padding " << s.padding);
    const ConvGeometry g{s.batch, s.cin, s.h, s.w, s.kernel, s.stride, s.padding};
    std::mt19937_64 rng(s.h * 1000 + s.cout);
    const auto gy = mixed_tensor({s.batch, s.cout, g.out_h(), g.out_w()}, rng);
    const size_t k = s.cout * s.kernel * s.kernel, m = s.batch * s.h * s.w;
    const auto w_taps = mixed_tensor({k, s.cin}, rng);
    std::vector<float> taps(m * k);
    const long kk = static_cast<long>(s.kernel), st = static_cast<long>(s.stride), pad = static_cast<long>(s.padding);
    dgrad_taps(gy.ptr(), ConvTaps{s.batch, s.cout, 0, s.cout, s.h, s.w, g.out_h(), g.out_w(), kk, kk, st, st, pad, pad,
                                  1, 1},
               taps.data());
    std::vector<float> want(m * s.cin);
    for (size_t r = 0; r < m; ++r)
      for (size_t c = 0; c < s.cin; ++c) {
        float chain = -0.0f;  // the chains' start, as every FMA-chain kernel's
        for (size_t t = 0; t < k; ++t) chain = std::fma(taps[r * k + t], w_taps.data[t * s.cin + c], chain);
        want[r * s.cin + c] = chain;
      }
    std::vector<float> have(want.size(), 1.0f);
    REQUIRE(sim::gpu::GpuConv::direct_dgrad(g, s.cout, gy.ptr(), w_taps.ptr(), have.data()));
    CHECK(first_difference(want, have) == -1);
    if ((s.h * s.w) % 4 == 0) {  // stored as dx itself
      std::vector<float> planar(want.size(), 1.0f);
      REQUIRE(sim::gpu::GpuConv::direct_dgrad(g, s.cout, gy.ptr(), w_taps.ptr(), planar.data(), true));
      CHECK(first_difference(planar_of(want, s.h * s.w, s.cin), planar) == -1);
    }
  }
}

namespace {

struct WideShape {
  size_t batch, cin, cout, h, w, kernel, stride, padding;
};

std::string describe(const WideShape& s) {
  return std::to_string(s.batch) + " x " + std::to_string(s.cin) + " x " + std::to_string(s.h) + " x " +
         std::to_string(s.w) + " -> " + std::to_string(s.cout) + ", kernel " + std::to_string(s.kernel) +
         ", stride " + std::to_string(s.stride) + ", padding " + std::to_string(s.padding);
}

// The output tiles the passes that read their operand as they go are run in, each forced in turn
// (the medium 32 x 64 one: where the pass takes it; a tile a shape does not take runs as chosen),
// then chosen by shape again.
struct EveryTile {
  std::vector<std::optional<sim::gpu::detail::ChainTile>> tiles{std::nullopt, sim::gpu::detail::ChainTile::t128x64,
                                                                sim::gpu::detail::ChainTile::t128x128,
                                                                sim::gpu::detail::ChainTile::t32x64};
  ~EveryTile() { sim::gpu::GpuConv::force_tile(std::nullopt); }
};

std::string tile_name(const std::optional<sim::gpu::detail::ChainTile>& tile) {
  return tile ? sim::gpu::detail::chain_tile_name(*tile) : "chosen by shape";
}

}  // namespace

TEST_CASE("gpu conv: the forward's chains over columns read from x == im2col, CPU FMA chains") {
  if (!have_device()) return;
  // Output rows not a multiple of the 128-row tile, stride 2, a 1 x 1 kernel, padding beyond
  // kernel - 1, output channels not a multiple of the tile's 64; each shape large enough for the
  // wide tiles.
  // The last shape's grid is four waves and more of 128 x 128 blocks on an H100 or H200 (the tile
  // with one A load a thread); the others take 128 x 64.
  size_t ran = 0, planar_ran = 0;  // shapes the device's wide tiles took; of them, stored planar
  for (const WideShape s : {WideShape{3, 12, 52, 75, 75, 3, 1, 2}, WideShape{3, 16, 64, 128, 128, 3, 2, 1},
                            WideShape{3, 64, 128, 130, 130, 1, 2, 0}, WideShape{2, 4, 100, 80, 80, 3, 1, 3},
                            WideShape{4, 4, 128, 192, 192, 3, 1, 1}}) {
    INFO(describe(s));
    const ConvGeometry g{s.batch, s.cin, s.h, s.w, s.kernel, s.stride, s.padding};
    std::mt19937_64 rng(s.h * 1000 + s.cout);
    const auto x = mixed_tensor({s.batch, s.cin, s.h, s.w}, rng);
    const size_t k = g.taps(), m = g.rows();
    const auto w_t = mixed_tensor({k, s.cout}, rng);
    const long kk = static_cast<long>(s.kernel), h = static_cast<long>(s.h), w = static_cast<long>(s.w);
    std::vector<float> want(m * s.cout);
    for (size_t r = 0; r < m; ++r) {
      const size_t b = r / (g.out_h() * g.out_w()), p = r % (g.out_h() * g.out_w());
      const long y0 = static_cast<long>(p / g.out_w() * s.stride) - static_cast<long>(s.padding);
      const long x0 = static_cast<long>(p % g.out_w() * s.stride) - static_cast<long>(s.padding);
      for (size_t o = 0; o < s.cout; ++o) {
        float chain = -0.0f;  // the chains' start, as every FMA-chain kernel's
        for (size_t c = 0; c < s.cin; ++c)
          for (long i = 0; i < kk; ++i)
            for (long j = 0; j < kk; ++j) {
              const long y = y0 + i, xx = x0 + j;
              const bool inside = y >= 0 && y < h && xx >= 0 && xx < w;
              const float v = inside ? x.data[((b * s.cin + c) * s.h + y) * s.w + xx] : 0.0f;
              chain = std::fma(v, w_t.data[((c * kk + i) * kk + j) * s.cout + o], chain);
            }
        want[r * s.cout + o] = chain;
      }
    }
    std::vector<float> bias(s.cout);
    for (float& v : bias) v = mixed_value(rng);
    const EveryTile every;
    for (const auto& tile : every.tiles) {
      INFO("tile " << tile_name(tile));
      sim::gpu::GpuConv::force_tile(tile);
      std::vector<float> have(want.size(), 1.0f);
      if (!sim::gpu::GpuConv::forward(g, s.cout, x.ptr(), w_t.ptr(), have.data())) {
        WARN("not the tiled kernels on this device (its SM count): nothing run for this shape");
        continue;
      }
      ++ran;
      CHECK(first_difference(want, have) == -1);
      const size_t positions = g.out_h() * g.out_w();
      if (positions % 4 == 0) {  // stored as y itself, with and without a bias
        std::vector<float> planar(want.size(), 1.0f);
        REQUIRE(sim::gpu::GpuConv::forward(g, s.cout, x.ptr(), w_t.ptr(), planar.data(), true));
        CHECK(first_difference(planar_of(want, positions, s.cout), planar) == -1);
        REQUIRE(sim::gpu::GpuConv::forward(g, s.cout, x.ptr(), w_t.ptr(), planar.data(), true, bias.data()));
        CHECK(first_difference(planar_of(want, positions, s.cout, &bias), planar) == -1);
        ++planar_ran;
      }
    }
  }
  CHECK(ran > 0);  // the largest shape takes them on any device: else nothing was checked
  CHECK(planar_ran > 0);
}

TEST_CASE("gpu conv: the input gradient's col2im pass == the columns' CPU FMA chains, then col2im") {
  if (!have_device()) return;
  // Input rows not a multiple of the 128-row tile, stride 2, a 1 x 1 kernel, padding beyond
  // kernel - 1, input channels not a multiple of the tile's 64; a weight with an infinity, whose
  // products with the zeros of offsets that miss the output col2im never adds.
  // (The infinity reaches offsets that miss the output in the second and third shapes: in the
  // others every offset meets every pixel.) Images not square, with 7 x 7 and 16 x 16 kernels (the
  // largest the pass takes: its offsets' masks have 16 bits a side). The 192 x 192 shape takes 128
  // x 128 tiles, as above; the last two have output channels a multiple of 32, which the medium
  // tile takes (its segments of K end with its stages), stride 1 and 2, a part-empty column tile.
  size_t ran = 0;  // shapes the device's wide tiles took
  for (const WideShape s : {WideShape{3, 52, 16, 75, 75, 3, 1, 2}, WideShape{3, 64, 24, 64, 64, 3, 2, 1},
                            WideShape{3, 128, 64, 60, 60, 1, 2, 0}, WideShape{2, 100, 8, 80, 80, 3, 1, 3},
                            WideShape{2, 64, 16, 72, 96, 7, 2, 3}, WideShape{1, 48, 8, 100, 124, 16, 3, 8},
                            WideShape{4, 128, 8, 192, 192, 3, 1, 1}, WideShape{2, 40, 32, 36, 36, 3, 1, 1},
                            WideShape{2, 24, 96, 30, 22, 3, 2, 1}}) {
    INFO(describe(s));
    const ConvGeometry g{s.batch, s.cin, s.h, s.w, s.kernel, s.stride, s.padding};
    std::mt19937_64 rng(s.h * 1000 + s.cin);
    const auto gy = mixed_tensor({s.batch, s.cout, g.out_h(), g.out_w()}, rng);
    auto weight = mixed_tensor({s.cout, s.cin, s.kernel, s.kernel}, rng);
    weight.data[weight.data.size() / 2] = INFINITY;
    const size_t kk = s.kernel;
    std::vector<float> want(g.input_size());  // rows (b, y, x) x cin
    for (size_t b = 0; b < s.batch; ++b)
      for (size_t y = 0; y < s.h; ++y)
        for (size_t xx = 0; xx < s.w; ++xx)
          for (size_t c = 0; c < s.cin; ++c) {
            float total = 0.0f;  // col2im's start: dx's fill
            // the output positions whose window holds the pixel, ascending
            const size_t py = y + s.padding, px = xx + s.padding;
            const size_t oy_lo = py >= kk ? (py - kk) / s.stride + 1 : 0;
            const size_t ox_lo = px >= kk ? (px - kk) / s.stride + 1 : 0;
            for (size_t oy = oy_lo; oy <= std::min(g.out_h() - 1, py / s.stride); ++oy)
              for (size_t ox = ox_lo; ox <= std::min(g.out_w() - 1, px / s.stride); ++ox) {
                const size_t tap = (py - oy * s.stride) * kk + (px - ox * s.stride);
                float chain = -0.0f;  // the column's entry: its FMA chain over the output channels
                for (size_t o = 0; o < s.cout; ++o)
                  chain = std::fma(gy.data[((b * s.cout + o) * g.out_h() + oy) * g.out_w() + ox],
                                   weight.data[(o * s.cin + c) * kk * kk + tap], chain);
                total += chain;
              }
            want[((b * s.h + y) * s.w + xx) * s.cin + c] = total;
          }
    const auto finite = std::count_if(want.begin(), want.end(), [](float v) { return std::isfinite(v); });
    CHECK(static_cast<size_t>(finite) > want.size() / 2);  // the infinity reaches one input channel
    const EveryTile every;
    for (const auto& tile : every.tiles) {
      INFO("tile " << tile_name(tile));
      sim::gpu::GpuConv::force_tile(tile);
      std::vector<float> have(want.size(), 1.0f);
      if (!sim::gpu::GpuConv::col2im_dgrad(g, s.cout, gy.ptr(), weight.ptr(), have.data())) {
        WARN("not the tiled kernels on this device (its SM count): nothing run for this shape");
        continue;
      }
      ++ran;
      CHECK(first_difference(want, have, true) == -1);
      // The offsets' chains apart, then folded (the form of grids short of blocks; not the medium tile's)
      std::vector<float> apart(want.size(), 1.0f);
      REQUIRE(sim::gpu::GpuConv::col2im_dgrad(g, s.cout, gy.ptr(), weight.ptr(), apart.data(), false, true));
      CHECK(first_difference(want, apart, true) == -1);
      if ((s.h * s.w) % 4 == 0) {  // stored as dx itself
        std::vector<float> planar(want.size(), 1.0f);
        REQUIRE(sim::gpu::GpuConv::col2im_dgrad(g, s.cout, gy.ptr(), weight.ptr(), planar.data(), true));
        CHECK(first_difference(planar_of(want, s.h * s.w, s.cin), planar, true) == -1);
        std::vector<float> planar_apart(want.size(), 1.0f);
        REQUIRE(sim::gpu::GpuConv::col2im_dgrad(g, s.cout, gy.ptr(), weight.ptr(), planar_apart.data(), true, true));
        CHECK(first_difference(planar_of(want, s.h * s.w, s.cin), planar_apart, true) == -1);
      }
    }
  }
  CHECK(ran > 0);  // the largest shape takes them on any device: else nothing was checked
}
