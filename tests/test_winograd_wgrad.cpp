// The Winograd weight gradient (sim/winograd_wgrad.hpp, profiles::ConvWgrad::winograd):
// - in double, with the 36 sums in double, it is the convolution's weight gradient: against the
//   direct sum over (image, output position) to 1e-12 of the gradient's norm, for tile counts that
//   divide the output and that do not, padding 0 and 1, one to four channels;
// - each fp32 transform has the bits of a straightforward evaluator written here from the three
//   matrices (rows of coefficients, products rounded, terms left to right, columns then rows);
// - in fp32 through a layer (Conv2d under a profile whose rule says conv_wgrad = "winograd"), the
//   weight gradient is within 1e-5 of the GEMM form's (normwise) and not equal to it, while the
//   output, input gradient and bias gradient keep their bits; the rule's wgrad schedule orders the
//   36 sums (atomics: another impl seed, other bits).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "models/context.hpp"
#include "models/conv2d.hpp"
#include "profiles/hw_profile.hpp"
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

// A transform as its matrix: out[r] = sum over t of coef[r][t] * in[t], evaluated as the
// implementation promises: terms with a zero coefficient skipped, +-1 a sign only, other products
// rounded, added left to right.
template <size_t Rows, size_t Cols>
using Matrix = std::array<std::array<float, Cols>, Rows>;

template <size_t Rows, size_t Cols>
std::array<float, Rows> evaluate(const Matrix<Rows, Cols>& coef, const std::array<float, Cols>& in) {
  std::array<float, Rows> out{};
  for (size_t r = 0; r < Rows; ++r) {
    bool first = true;
    float acc = 0;
    for (size_t t = 0; t < Cols; ++t) {
      const float c = coef[r][t];
      if (c == 0) continue;
      const float term = c == 1 ? in[t] : c == -1 ? -in[t] : c * in[t];
      acc = first ? term : acc + term;
      first = false;
    }
    out[r] = acc;
  }
  return out;
}

const float kSixth = 1.0f / 6.0f, kTwelfth = 1.0f / 12.0f, kTwentyFourth = 1.0f / 24.0f;
const Matrix<6, 6> kBt = {{{4, 0, -5, 0, 1, 0},
                           {0, -4, -4, 1, 1, 0},
                           {0, 4, -4, -1, 1, 0},
                           {0, -2, -1, 2, 1, 0},
                           {0, 2, -1, -2, 1, 0},
                           {0, 4, 0, -5, 0, 1}}};
const Matrix<6, 4> kA = {{{1, 0, 0, 0}, {1, 1, 1, 1}, {1, -1, 1, -1}, {1, 2, 4, 8}, {1, -2, 4, -8}, {0, 0, 0, 1}}};
const Matrix<3, 6> kGt = {{{0.25f, -kSixth, -kSixth, kTwentyFourth, kTwentyFourth, 0},
                           {0, -kSixth, kSixth, kTwelfth, -kTwelfth, 0},
                           {0, -kSixth, -kSixth, kSixth, kSixth, 1}}};

// out = L X R^T for a tile X (In x In): columns first (L), then rows (R).
template <size_t Out, size_t In>
std::array<std::array<float, Out>, Out> both_ways(const Matrix<Out, In>& l, const std::array<std::array<float, In>, In>& x) {
  std::array<std::array<float, In>, Out> cols{};
  for (size_t q = 0; q < In; ++q) {
    std::array<float, In> column{};
    for (size_t r = 0; r < In; ++r) column[r] = x[r][q];
    const auto t = evaluate(l, column);
    for (size_t r = 0; r < Out; ++r) cols[r][q] = t[r];
  }
  std::array<std::array<float, Out>, Out> out{};
  for (size_t r = 0; r < Out; ++r) out[r] = evaluate(l, cols[r]);
  return out;
}

}  // namespace

TEST_CASE("winograd weight gradient: each fp32 transform has the matrices' bits") {
  // Two images, 2 input and 3 output channels, 9x7 (tiles of 4 that overrun both edges), padding 1
  // and 0.
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
          std::array<std::array<float, 6>, 6> tile{};
          for (long r = 0; r < 6; ++r)
            for (long q = 0; q < 6; ++q) {
              const long y = static_cast<long>(4 * ty) + r - pad, xx = static_cast<long>(4 * tx) + q - pad;
              tile[r][q] = y >= 0 && y < h && xx >= 0 && xx < w ? x[((b * s.in_channels + c) * s.height + y) * s.width + xx] : 0.0f;
            }
          const auto want = both_ways(kBt, tile);
          for (size_t p = 0; p < 36; ++p) {
            const float got = v[(p * n + t) * s.in_channels + c];
            if (std::memcmp(&got, &want[p / 6][p % 6], sizeof got) != 0) ++mismatches;
          }
        }
        for (size_t k = 0; k < s.out_channels; ++k) {
          std::array<std::array<float, 4>, 4> tile{};
          for (size_t r = 0; r < 4; ++r)
            for (size_t q = 0; q < 4; ++q) {
              const size_t y = 4 * ty + r, xx = 4 * tx + q;
              tile[r][q] = y < s.out_h() && xx < s.out_w() ? dy[((b * s.out_channels + k) * s.out_h() + y) * s.out_w() + xx] : 0.0f;
            }
          const auto want = both_ways(kA, tile);
          for (size_t p = 0; p < 36; ++p) {
            const float got = u[(p * s.out_channels + k) * n + t];
            if (std::memcmp(&got, &want[p / 6][p % 6], sizeof got) != 0) ++mismatches;
          }
        }
      }
  CHECK(t == n);
  CHECK(mismatches == 0);

  // The output transform, on sums of every size.
  const size_t kc = s.out_channels * s.in_channels;
  auto m = normal<float>(36 * kc, 13);
  m[7] = 1e25f;
  m[8] = -0.0f;
  std::vector<float> dw(s.in_channels * 9 * s.out_channels);
  sim::winograd_output_transform(m.data(), s.out_channels, s.in_channels, dw.data());
  for (size_t k = 0; k < s.out_channels; ++k)
    for (size_t c = 0; c < s.in_channels; ++c) {
      std::array<std::array<float, 6>, 6> tile{};
      for (size_t p = 0; p < 36; ++p) tile[p / 6][p % 6] = m[p * kc + k * s.in_channels + c];
      const auto want = both_ways(kGt, tile);
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
