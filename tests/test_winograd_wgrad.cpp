// The Winograd weight gradient (sim/winograd_wgrad.hpp, profiles::ConvWgrad::winograd):
// - in double, with the 36 sums in double, it is the convolution's weight gradient: against the
//   direct sum over (image, output position) to 1e-12 of the gradient's norm, for tile counts that
//   divide the output and that do not, padding 0 and 1, one to four channels;
// - each fp32 stage has the bits of cuDNN's kernels on an H200, on the chip's own sample of
//   every stage (tests/data/cudnn_winograd_h200.bin): input and output-gradient tiles, the 36
//   GEMMs' orders, the sums' transform; the whole-tensor transforms place every tile where the
//   GEMMs read it;
// - in fp32 through a layer (Conv2d under a profile whose rule says conv_wgrad = "winograd"), the
//   weight gradient is within 1e-5 of the GEMM form's (normwise) and not equal to it, while the
//   output, input gradient and bias gradient keep their bits; the rule's wgrad schedule orders the
//   36 sums (atomics: another impl seed, other bits).
#include <catch2/catch.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <random>
#include <vector>

#include "models/context.hpp"
#include "models/conv2d.hpp"
#include "profiles/hw_profile.hpp"
#include "sim/reference_evaluator.hpp"
#include "sim/schedule.hpp"
#include "sim/winograd_wgrad.hpp"

using namespace fplab;
using sim::WinogradWgradShape;

namespace {

template <class T>
std::vector<T> normal(size_t count, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0, 1);
  std::vector<T> out(count);
  for (auto& v : out) v = static_cast<T>(d(g));
  return out;
}

// dW in fplab's layout ((c, i, j) rows x K) as the direct sum over (b, oy, ox), in double.
std::vector<double> direct_weight_gradient(const std::vector<double>& x, const std::vector<double>& dy,
                                           const WinogradWgradShape& s) {
  std::vector<double> dw(s.in_channels * 9 * s.out_channels, 0.0);
  const long h = static_cast<long>(s.height), w = static_cast<long>(s.width), p = static_cast<long>(s.padding);
  for (size_t b = 0; b < s.batch; ++b)
    for (size_t k = 0; k < s.out_channels; ++k)
      for (size_t c = 0; c < s.in_channels; ++c)
        for (long i = 0; i < 3; ++i)
          for (long j = 0; j < 3; ++j)
            for (size_t oy = 0; oy < s.out_h(); ++oy)
              for (size_t ox = 0; ox < s.out_w(); ++ox) {
                const long y = static_cast<long>(oy) + i - p, xx = static_cast<long>(ox) + j - p;
                if (y < 0 || y >= h || xx < 0 || xx >= w) continue;
                dw[(c * 9 + i * 3 + j) * s.out_channels + k] +=
                    dy[((b * s.out_channels + k) * s.out_h() + oy) * s.out_w() + ox] *
                    x[((b * s.in_channels + c) * s.height + y) * s.width + xx];
              }
  return dw;
}

template <class T>
std::vector<T> winograd_weight_gradient(const std::vector<T>& x, const std::vector<T>& dy, const WinogradWgradShape& s) {
  const size_t n = s.terms(), c_count = s.in_channels, k_count = s.out_channels;
  std::vector<T> v(36 * n * c_count), u(36 * k_count * n), m(36 * k_count * c_count, T(0)),
      dw(c_count * 9 * k_count);
  sim::winograd_data_transform(x.data(), s, v.data());
  sim::winograd_delta_transform(dy.data(), s, u.data());
  for (size_t p = 0; p < 36; ++p)
    for (size_t k = 0; k < k_count; ++k)
      for (size_t c = 0; c < c_count; ++c)
        for (size_t t = 0; t < n; ++t)
          m[(p * k_count + k) * c_count + c] += u[(p * k_count + k) * n + t] * v[(p * n + t) * c_count + c];
  sim::winograd_output_transform(m.data(), k_count, c_count, dw.data());
  return dw;
}

double norm(const std::vector<double>& a) {
  double s = 0;
  for (double v : a) s += v * v;
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("winograd weight gradient: in double, the convolution's weight gradient") {
  const WinogradWgradShape shapes[] = {
      {1, 1, 1, 4, 4, 1}, {2, 3, 2, 7, 7, 1}, {1, 2, 3, 5, 9, 1}, {2, 1, 4, 28, 28, 1},
      {1, 2, 2, 6, 6, 0}, {3, 2, 2, 8, 8, 1}, {1, 4, 1, 14, 14, 1}, {2, 2, 3, 3, 3, 1},
  };
  uint32_t seed = 1;
  for (const auto& s : shapes) {
    INFO("batch " << s.batch << " C " << s.in_channels << " K " << s.out_channels << " " << s.height << "x"
                  << s.width << " padding " << s.padding);
    const auto x = normal<double>(s.batch * s.in_channels * s.height * s.width, seed++);
    const auto dy = normal<double>(s.batch * s.out_channels * s.out_h() * s.out_w(), seed++);
    const auto want = direct_weight_gradient(x, dy, s), got = winograd_weight_gradient(x, dy, s);
    std::vector<double> diff(want.size());
    for (size_t i = 0; i < want.size(); ++i) diff[i] = got[i] - want[i];
    CHECK(norm(diff) <= 1e-12 * norm(want));
  }
}

namespace {

// tests/data/cudnn_winograd_h200.bin (experiments/winograd_fit.py fixture, from the workspace of
// cuDNN 9.19's winograd_nonfused kernels on an H200: experiments/winograd_workspace_torch.py):
// 128 input tiles and 128 output-gradient tiles with their transforms, 128 sums with their weight
// gradients, GEMM outputs with their terms (one FMA chain; the gemv of a one-channel input).
struct ChipSample {
  uint32_t data_tiles = 0, delta_tiles = 0, sums = 0, chains = 0, chain_terms = 0, gemvs = 0, gemv_terms = 0;
  std::vector<float> data_in, data_out, delta_in, delta_out, output_in, output_out, chain_u, chain_v, chain_m, gemv_u,
      gemv_v, gemv_m;
};

ChipSample read_chip_sample() {
  std::ifstream file(FPLAB_SOURCE_DIR "/tests/data/cudnn_winograd_h200.bin", std::ios::binary);
  REQUIRE(file);
  char magic[8];
  file.read(magic, 8);
  REQUIRE(std::string(magic, 7) == "FPWINO1");
  ChipSample s;
  for (uint32_t* count : {&s.data_tiles, &s.delta_tiles, &s.sums, &s.chains, &s.chain_terms, &s.gemvs, &s.gemv_terms})
    file.read(reinterpret_cast<char*>(count), 4);
  REQUIRE(file);
  const auto read = [&](std::vector<float>& into, size_t count) {
    into.resize(count);
    file.read(reinterpret_cast<char*>(into.data()), static_cast<std::streamsize>(count * 4));
    REQUIRE(file.gcount() == static_cast<std::streamsize>(count * 4));
  };
  read(s.data_in, s.data_tiles * 36);
  read(s.data_out, s.data_tiles * 36);
  read(s.delta_in, s.delta_tiles * 16);
  read(s.delta_out, s.delta_tiles * 36);
  read(s.output_in, s.sums * 36);
  read(s.output_out, s.sums * 9);
  read(s.chain_u, s.chains * s.chain_terms);
  read(s.chain_v, s.chains * s.chain_terms);
  read(s.chain_m, s.chains);
  read(s.gemv_u, s.gemvs * s.gemv_terms);
  read(s.gemv_v, s.gemvs * s.gemv_terms);
  read(s.gemv_m, s.gemvs);
  file.peek();
  CHECK(file.eof());
  return s;
}

template <size_t N>
sim::WinogradTile<float, N> tile_at(const std::vector<float>& values, size_t index) {
  sim::WinogradTile<float, N> t{};
  for (size_t r = 0; r < N; ++r)
    for (size_t q = 0; q < N; ++q) t[r][q] = values[(index * N + r) * N + q];
  return t;
}

// Elements of `got` whose bits differ from values[index * N * N ...].
template <size_t N>
size_t differing(const sim::WinogradTile<float, N>& got, const std::vector<float>& values, size_t index) {
  size_t count = 0;
  for (size_t r = 0; r < N; ++r)
    for (size_t q = 0; q < N; ++q)
      count += std::bit_cast<uint32_t>(got[r][q]) != std::bit_cast<uint32_t>(values[(index * N + r) * N + q]);
  return count;
}

size_t differing_sums(const sim::Schedule& schedule, const std::vector<float>& u, const std::vector<float>& v,
                      const std::vector<float>& chip, size_t terms) {
  size_t count = 0;
  for (size_t i = 0; i < chip.size(); ++i) {
    const std::vector<double> a(u.begin() + i * terms, u.begin() + (i + 1) * terms),
        b(v.begin() + i * terms, v.begin() + (i + 1) * terms);
    const auto sum = static_cast<float>(sim::dot_reference(schedule, a, b, sim::Arithmetic{}, sim::NoiseKey{0}));
    count += std::bit_cast<uint32_t>(sum) != std::bit_cast<uint32_t>(chip[i]);
  }
  return count;
}

}  // namespace

TEST_CASE("winograd weight gradient: every stage has the bits of cuDNN's kernels on an H200") {
  const ChipSample chip = read_chip_sample();
  size_t data = 0, delta = 0, output = 0;
  for (size_t i = 0; i < chip.data_tiles; ++i)
    data += differing(sim::winograd_data_tile(tile_at<6>(chip.data_in, i)), chip.data_out, i);
  for (size_t i = 0; i < chip.delta_tiles; ++i)
    delta += differing(sim::winograd_delta_tile(tile_at<4>(chip.delta_in, i)), chip.delta_out, i);
  for (size_t i = 0; i < chip.sums; ++i)
    output += differing(sim::winograd_output_tile(tile_at<6>(chip.output_in, i)), chip.output_out, i);
  CHECK(chip.data_tiles == 128);
  CHECK(data == 0);
  CHECK(delta == 0);
  CHECK(output == 0);
  // The 36 GEMMs: one FMA chain from +0 over (image, tile) in order; cuBLAS's gemv where the input
  // has one channel. Either order on the other's sums differs: the sample tells them apart.
  const sim::Schedule chain = sim::parse_schedule("all:seq"),
                      gemv = sim::parse_schedule("strided(32):seq | all:shfl_down");
  CHECK(differing_sums(chain, chip.chain_u, chip.chain_v, chip.chain_m, chip.chain_terms) == 0);
  CHECK(differing_sums(gemv, chip.gemv_u, chip.gemv_v, chip.gemv_m, chip.gemv_terms) == 0);
  CHECK(differing_sums(chain, chip.gemv_u, chip.gemv_v, chip.gemv_m, chip.gemv_terms) > 0);
  CHECK(differing_sums(gemv, chip.chain_u, chip.chain_v, chip.chain_m, chip.chain_terms) > 0);
}

TEST_CASE("winograd weight gradient: the whole-tensor transforms place every tile's transform") {
  // Two images, 2 input and 3 output channels, 9x7 (tiles of 4 that overrun both edges), padding 1
  // and 0; each tile gathered here and transformed alone must land where the GEMMs read it.
  const size_t padding = GENERATE(1, 0);
  const WinogradWgradShape s{2, 2, 3, 9, 7, padding};
  const long pad = static_cast<long>(padding);
  const size_t n = s.terms();
  auto x = normal<float>(s.batch * s.in_channels * s.height * s.width, 11);
  auto dy = normal<float>(s.batch * s.out_channels * s.out_h() * s.out_w(), 12);
  x[5] = -0.0f;  // signed zeros and values far apart go through the same arithmetic
  dy[3] = 1e-30f;
  dy[4] = 3e20f;
  std::vector<float> v(36 * n * s.in_channels), u(36 * s.out_channels * n);
  sim::winograd_data_transform(x.data(), s, v.data());
  sim::winograd_delta_transform(dy.data(), s, u.data());
  const long h = static_cast<long>(s.height), w = static_cast<long>(s.width);
  size_t t = 0, mismatches = 0;
  for (size_t b = 0; b < s.batch; ++b)
    for (size_t ty = 0; ty < s.tiles_y(); ++ty)
      for (size_t tx = 0; tx < s.tiles_x(); ++tx, ++t) {
        for (size_t c = 0; c < s.in_channels; ++c) {
          sim::WinogradTile<float, 6> tile{};
          for (long r = 0; r < 6; ++r)
            for (long q = 0; q < 6; ++q) {
              const long y = static_cast<long>(4 * ty) + r - pad, xx = static_cast<long>(4 * tx) + q - pad;
              tile[r][q] = y >= 0 && y < h && xx >= 0 && xx < w ? x[((b * s.in_channels + c) * s.height + y) * s.width + xx] : 0.0f;
            }
          const auto want = sim::winograd_data_tile(tile);
          for (size_t p = 0; p < 36; ++p) {
            const float got = v[(p * n + t) * s.in_channels + c];
            if (std::memcmp(&got, &want[p / 6][p % 6], sizeof got) != 0) ++mismatches;
          }
        }
        for (size_t k = 0; k < s.out_channels; ++k) {
          sim::WinogradTile<float, 4> tile{};
          for (size_t r = 0; r < 4; ++r)
            for (size_t q = 0; q < 4; ++q) {
              const size_t y = 4 * ty + r, xx = 4 * tx + q;
              tile[r][q] = y < s.out_h() && xx < s.out_w() ? dy[((b * s.out_channels + k) * s.out_h() + y) * s.out_w() + xx] : 0.0f;
            }
          const auto want = sim::winograd_delta_tile(tile);
          for (size_t p = 0; p < 36; ++p) {
            const float got = u[(p * s.out_channels + k) * n + t];
            if (std::memcmp(&got, &want[p / 6][p % 6], sizeof got) != 0) ++mismatches;
          }
        }
      }
  CHECK(t == n);
  CHECK(mismatches == 0);

  // The output transform, on sums of every size, into fplab's weight layout.
  const size_t kc = s.out_channels * s.in_channels;
  auto m = normal<float>(36 * kc, 13);
  m[7] = 1e25f;
  m[8] = -0.0f;
  std::vector<float> dw(s.in_channels * 9 * s.out_channels);
  sim::winograd_output_transform(m.data(), s.out_channels, s.in_channels, dw.data());
  for (size_t k = 0; k < s.out_channels; ++k)
    for (size_t c = 0; c < s.in_channels; ++c) {
      sim::WinogradTile<float, 6> tile{};
      for (size_t p = 0; p < 36; ++p) tile[p / 6][p % 6] = m[p * kc + k * s.in_channels + c];
      const auto want = sim::winograd_output_tile(tile);
      for (size_t i = 0; i < 3; ++i)
        for (size_t j = 0; j < 3; ++j) {
          const float got = dw[(c * 9 + i * 3 + j) * s.out_channels + k];
          CHECK(std::memcmp(&got, &want[i][j], sizeof got) == 0);
        }
    }
}

namespace {

std::string table(const std::string& mode) {
  std::string s = "[" + mode + "]\n";
  for (profiles::OpKind k : profiles::all_op_kinds) s += std::string(profiles::op_kind_name(k)) + " = \"all:seq\"\n";
  return s;
}

const std::string kProfile = "name = \"toy\"\ndescription = \"a toy\"\n" + table("default") + R"(
[[default.layers]]
match = { layer = "conv", kernel = 3, stride = 1, height = 7 }
conv_wgrad = "winograd"
[[default.layers]]
match = { layer = "conv", kernel = 3, stride = 1, height = 9 }
conv_wgrad = "winograd"
wgrad = "split(4):seq | all:atomic"
)" + table("deterministic");

struct Pass {
  std::vector<float> y, dx, dw, db;
};

// The weight gradient of one pass of a double-precision layer (the fp64 finite-difference path).
std::vector<double> double_weight_gradient(const profiles::OpTable& table) {
  models::Context ctx;
  ctx.ops = &table;
  ctx.algo_seed = 3;
  ctx.impl_seed = 1;
  ctx.call = 1;
  ctx.training = true;
  models::Conv2d<double> conv(3, 4, 3, 1, 1);
  conv.initialize(ctx);
  models::Tensor<double> x({2, 3, 7, 7});
  x.data = normal<double>(x.data.size(), 31);
  const auto y = conv.forward(x, ctx);
  models::Tensor<double> dy(y.shape);
  dy.data = normal<double>(dy.data.size(), 32);
  conv.backward(dy, ctx);
  return conv.parameters()[0]->grad.data;
}

Pass pass(const profiles::OpTable& table, uint64_t seed, size_t height) {
  models::Context ctx;
  ctx.ops = &table;
  ctx.algo_seed = 3;
  ctx.impl_seed = seed;
  ctx.call = 1;
  ctx.training = true;
  models::Conv2d<float> conv(5, 6, 3, 1, 1);
  conv.initialize(ctx);
  models::Tensor<float> x({8, 5, height, height});
  x.data = normal<float>(x.data.size(), 21);
  const auto y = conv.forward(x, ctx);
  models::Tensor<float> dy(y.shape);
  dy.data = normal<float>(dy.data.size(), 22);
  const auto dx = conv.backward(dy, ctx);
  return {y.data, dx.data, conv.parameters()[0]->grad.data, conv.parameters()[1]->grad.data};
}

}  // namespace

TEST_CASE("winograd weight gradient: a layer whose rule says so computes it, nothing else changes") {
  const profiles::HardwareProfile p = profiles::parse_hw_profile(kProfile, "toy.toml");
  const profiles::OpTable &rules = p.default_ops, &plain = p.deterministic_ops;
  CHECK(rules.conv_wgrad({profiles::LayerShape::Kind::conv, 5, 6, 3, 1, 7}) == profiles::ConvWgrad::winograd);
  CHECK(rules.conv_wgrad({profiles::LayerShape::Kind::conv, 5, 6, 3, 1, 8}) == profiles::ConvWgrad::gemm);
  CHECK(profiles::describe_rule(rules.layer_rules[0]).find("conv_wgrad=winograd") != std::string::npos);

  const Pass winograd = pass(rules, 1, 7), gemm = pass(plain, 1, 7);
  CHECK(winograd.y == gemm.y);
  CHECK(winograd.dx == gemm.dx);
  CHECK(winograd.db == gemm.db);
  REQUIRE(winograd.dw.size() == gemm.dw.size());
  CHECK(winograd.dw != gemm.dw);
  double diff = 0, size = 0;
  for (size_t i = 0; i < gemm.dw.size(); ++i) {
    diff += std::pow(double(winograd.dw[i]) - gemm.dw[i], 2);
    size += std::pow(double(gemm.dw[i]), 2);
  }
  CHECK(std::sqrt(diff) <= 1e-5 * std::sqrt(size));
  CHECK(pass(rules, 2, 7).dw == winograd.dw);  // all:seq sums: no noise

  // A double layer (transforms in double, the sums in the table's arithmetic: fp32 here) gives the
  // same gradient to the sums' precision.
  const auto dw_winograd = double_weight_gradient(rules), dw_gemm = double_weight_gradient(plain);
  std::vector<double> apart(dw_gemm.size());
  for (size_t i = 0; i < apart.size(); ++i) apart[i] = dw_winograd[i] - dw_gemm[i];
  CHECK(norm(apart) <= 1e-5 * norm(dw_gemm));
  CHECK(dw_winograd != dw_gemm);

  // At 9 pixels the rule's own wgrad schedule orders the 36 sums: atomics, another seed, other bits.
  const Pass a = pass(rules, 1, 9), b = pass(rules, 2, 9), c = pass(plain, 1, 9);
  CHECK(a.dw != b.dw);
  CHECK(a.dx == b.dx);
  CHECK(a.dw != c.dw);
}
