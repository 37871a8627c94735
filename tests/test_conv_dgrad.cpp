// A convolution's input gradient in its two forms (profiles::ConvDgrad): `col2im`, a GEMM over the
// output channels per (pixel, tap) and the taps added afterwards, and `direct`, one reduction per
// input pixel over (output channel, kernel row, kernel column), as cuDNN adds. The direct form is
// held to a straightforward FMA chain written here, at several strides, paddings and kernels.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <random>

#include "models/context.hpp"
#include "models/conv2d.hpp"
#include "profiles/hw_profile.hpp"

using namespace fplab;
using namespace fplab::profiles;

namespace {

std::string profile_text(const std::string& conv_dgrad_line) {
  std::string s = "name = \"toy\"\ndescription = \"a toy\"\n";
  for (const char* mode : {"default", "deterministic"}) {
    s += std::string("[") + mode + "]\n";
    for (OpKind k : all_op_kinds) s += std::string(op_kind_name(k)) + " = \"all:seq\"\n";
    s += conv_dgrad_line;
  }
  return s;
}

struct Pass {
  std::vector<float> x, w, dy, dx;
};

// One forward and backward pass of a Conv2d(cin, cout, kernel, stride, padding) on random data
// under `table`; the layer's input gradient is asked for.
Pass pass(const OpTable& table, size_t batch, size_t cin, size_t cout, size_t kernel, size_t stride, size_t padding,
          size_t h) {
  models::Context ctx;
  ctx.ops = &table;
  ctx.algo_seed = 3;
  ctx.call = 1;
  models::Conv2d<float> layer(cin, cout, kernel, stride, padding);
  layer.initialize(ctx);
  models::Tensor<float> x({batch, cin, h, h});
  std::mt19937 g(11);
  std::normal_distribution<float> d(0, 1);
  for (auto& v : x.data) v = d(g);
  const models::Tensor<float> y = layer.forward(x, ctx);
  models::Tensor<float> dy(y.shape);
  for (auto& v : dy.data) v = d(g);
  const models::Tensor<float> dx = layer.backward(dy, ctx);
  return {x.data, layer.parameters()[0]->value.data, dy.data, dx.data};
}

// dx[b, c, y, x] as one FMA chain over (co, i, j), the taps that land on an output in that order;
// the weight as Conv2d stores it, (c, i, j) x C_out.
std::vector<float> direct_reference(const Pass& p, size_t batch, size_t cin, size_t cout, size_t kernel, size_t stride,
                                    size_t padding, size_t h) {
  const long ho = static_cast<long>((h + 2 * padding - kernel) / stride + 1);
  std::vector<float> dx(batch * cin * h * h);
  for (size_t b = 0; b < batch; ++b)
    for (size_t c = 0; c < cin; ++c)
      for (size_t y = 0; y < h; ++y)
        for (size_t x = 0; x < h; ++x) {
          float acc = 0;
          bool first = true;
          for (size_t co = 0; co < cout; ++co)
            for (size_t i = 0; i < kernel; ++i)
              for (size_t j = 0; j < kernel; ++j) {
                const long oy = static_cast<long>(y + padding) - static_cast<long>(i);
                const long ox = static_cast<long>(x + padding) - static_cast<long>(j);
                if (oy < 0 || ox < 0 || oy % static_cast<long>(stride) || ox % static_cast<long>(stride)) continue;
                if (oy / static_cast<long>(stride) >= ho || ox / static_cast<long>(stride) >= ho) continue;
                const float gv = p.dy[((b * cout + co) * ho + oy / stride) * ho + ox / stride];
                const float wv = p.w[((c * kernel + i) * kernel + j) * cout + co];
                acc = first ? gv * wv : std::fma(gv, wv, acc);
                first = false;
              }
          dx[((b * cin + c) * h + y) * h + x] = acc;
        }
  return dx;
}

}  // namespace

TEST_CASE("conv dgrad: conv_dgrad is parsed, described and refused when malformed") {
  const HardwareProfile plain = parse_hw_profile(profile_text(""), "toy.toml");
  CHECK(plain.default_ops.conv_dgrad == ConvDgrad::col2im);
  CHECK(plain.default_ops.describe().find("conv_dgrad") == std::string::npos);
  const HardwareProfile direct = parse_hw_profile(profile_text("conv_dgrad = \"direct\"\n"), "toy.toml");
  CHECK(direct.default_ops.conv_dgrad == ConvDgrad::direct);
  CHECK(direct.deterministic_ops.conv_dgrad == ConvDgrad::direct);
  CHECK(direct.default_ops.describe().ends_with("; conv_dgrad=direct"));
  CHECK_THROWS_WITH(parse_hw_profile(profile_text("conv_dgrad = \"im2col\"\n"), "toy.toml"),
                    Catch::Contains("toy.toml:") && Catch::Contains("default.conv_dgrad") &&
                        Catch::Contains("must be \"col2im\" or \"direct\""));
  CHECK_THROWS_WITH(parse_hw_profile(profile_text("conv_dgrad = 1\n"), "toy.toml"), Catch::Contains("must be a string"));
}

TEST_CASE("conv dgrad: the direct form is one FMA chain per input pixel over (channel, tap)") {
  const OpTable direct = parse_hw_profile(profile_text("conv_dgrad = \"direct\"\n"), "toy.toml").default_ops;
  const OpTable col2im = parse_hw_profile(profile_text(""), "toy.toml").default_ops;
  struct Shape {
    size_t batch, cin, cout, kernel, stride, padding, h;
  };
  for (const Shape s : {Shape{2, 3, 8, 3, 1, 1, 7}, Shape{2, 2, 5, 3, 2, 1, 9}, Shape{1, 2, 4, 5, 1, 2, 6},
                        Shape{3, 4, 6, 1, 1, 0, 4}, Shape{1, 1, 3, 3, 2, 0, 8}}) {
    CAPTURE(s.cin, s.cout, s.kernel, s.stride, s.padding, s.h);
    const Pass got = pass(direct, s.batch, s.cin, s.cout, s.kernel, s.stride, s.padding, s.h);
    const std::vector<float> want = direct_reference(got, s.batch, s.cin, s.cout, s.kernel, s.stride, s.padding, s.h);
    REQUIRE(got.dx.size() == want.size());
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += std::bit_cast<uint32_t>(got.dx[i]) != std::bit_cast<uint32_t>(want[i]);
    CHECK(differ == 0);
  }
  // The two forms add in different orders: somewhere they round differently.
  const Pass a = pass(direct, 4, 8, 16, 3, 1, 1, 8), b = pass(col2im, 4, 8, 16, 3, 1, 1, 8);
  CHECK(a.dx != b.dx);
}

TEST_CASE("conv dgrad: h100-torch adds input gradients as cuDNN does, h100 in col2im's order") {
  CHECK(find_hw_profile("h100-torch").default_ops.conv_dgrad == ConvDgrad::direct);
  CHECK(find_hw_profile("h100-torch").deterministic_ops.conv_dgrad == ConvDgrad::direct);
  CHECK(find_hw_profile("h100-torch-tf32").deterministic_ops.conv_dgrad == ConvDgrad::direct);
  CHECK(find_hw_profile("h100").default_ops.conv_dgrad == ConvDgrad::col2im);
}
