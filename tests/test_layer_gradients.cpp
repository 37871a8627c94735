// Every layer's hand-written backward pass against central finite differences, in fp64
// arithmetic (T = double, every reduction an fp64 left fold): for L = sum(w * layer(x)) with a
// random w, dL/dx and dL/dparameters must match (L(x + h) - L(x - h)) / 2h.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <functional>
#include <random>

#include "models/batch_norm.hpp"
#include "models/conv2d.hpp"
#include "models/dropout.hpp"
#include "models/global_avg_pool.hpp"
#include "models/linear.hpp"
#include "models/max_pool.hpp"
#include "models/model.hpp"
#include "models/relu.hpp"
#include "models/softmax_cross_entropy.hpp"

using namespace fplab;
using namespace fplab::models;

namespace {

const profiles::OpTable& fp64_table() {
  static const profiles::OpTable table = profiles::op_table_preset("seq", "fp64");
  return table;
}

// The table the checks run under (the fp64 left folds unless a case says otherwise).
const profiles::OpTable* g_table = nullptr;

Context context() {
  Context ctx;
  ctx.ops = g_table ? g_table : &fp64_table();
  ctx.algo_seed = 7;
  ctx.call = 3;
  ctx.training = true;
  return ctx;
}

Tensor<double> random_tensor(std::vector<size_t> shape, std::mt19937_64& g, double scale = 1.0) {
  Tensor<double> t(std::move(shape));
  std::normal_distribution<double> d(0, scale);
  for (auto& x : t.data) x = d(g);
  return t;
}

double weighted_sum(const Tensor<double>& y, const Tensor<double>& w) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y.data[i] * w.data[i];
  return s;
}

// Checks d/dv of `loss` at every (or every `stride`-th) element of v against `analytic`.
void check(const char* what, std::vector<double>& v, const std::vector<double>& analytic,
           const std::function<double()>& loss, size_t stride = 1) {
  constexpr double h = 1e-6;
  for (size_t i = 0; i < v.size(); i += stride) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = loss();
    v[i] = keep - h;
    const double down = loss();
    v[i] = keep;
    const double numeric = (up - down) / (2 * h);
    INFO(what << " element " << i << ": analytic " << analytic[i] << ", numeric " << numeric);
    REQUIRE(std::fabs(numeric - analytic[i]) <= 1e-6 * (1 + std::fabs(numeric)));
  }
}

// The whole check for one layer: input gradient and every parameter's gradient.
void check_layer(Layer<double>& layer, Tensor<double> x, std::mt19937_64& g, size_t stride = 1) {
  Context ctx = context();
  layer.initialize(ctx);
  const auto w = random_tensor(layer.output_shape(x.shape), g);
  auto loss = [&] {
    Context c = context();
    return weighted_sum(layer.forward(x, c), w);
  };
  loss();  // sets the stored activations for backward
  const Tensor<double> dx = layer.backward(w, ctx);
  std::vector<std::vector<double>> param_grads;
  for (auto* p : layer.parameters()) param_grads.push_back(p->grad.data);
  check("input", x.data, dx.data, loss, stride);
  size_t k = 0;
  for (auto* p : layer.parameters()) check(p->name.c_str(), p->value.data, param_grads[k++], loss, stride);
}

}  // namespace

TEST_CASE("fp64 finite differences: linear(7->5) input, weight and bias gradients") {
  std::mt19937_64 g(1);
  Linear<double> layer(7, 5);
  check_layer(layer, random_tensor({4, 7}, g), g);
}

TEST_CASE("fp64 finite differences: conv2d 3x3 stride 1 pad 1 and 3x3 stride 2 pad 0, 5x6 images") {
  std::mt19937_64 g(2);
  Conv2d<double> same(2, 3, 3, 1, 1), strided(2, 3, 3, 2, 0);
  check_layer(same, random_tensor({2, 2, 5, 6}, g), g);
  check_layer(strided, random_tensor({2, 2, 5, 6}, g), g);
}

TEST_CASE("conv2d forward equals the direct convolution formula; 5x5 stride 2 pad 2 gradients by finite differences") {
  std::mt19937_64 g(3);
  for (const auto [kernel, stride, padding] :
       {std::array<size_t, 3>{5, 2, 2}, {3, 1, 1}, {3, 2, 0}, {1, 1, 0}, {5, 3, 4}}) {
    Conv2d<double> conv(2, 3, kernel, stride, padding);
    Context ctx = context();
    conv.initialize(ctx);
    const auto x = random_tensor({2, 2, 7, 9}, g);
    const auto y = conv.forward(x, ctx);
    const auto& wt = conv.parameters()[0]->value;  // (cin * k * k) x cout
    const auto& bias = conv.parameters()[1]->value;
    REQUIRE(y.dim(2) == (7 + 2 * padding - kernel) / stride + 1);
    REQUIRE(y.dim(3) == (9 + 2 * padding - kernel) / stride + 1);
    for (size_t b = 0; b < 2; ++b)
      for (size_t o = 0; o < 3; ++o)
        for (size_t oy = 0; oy < y.dim(2); ++oy)
          for (size_t ox = 0; ox < y.dim(3); ++ox) {
            double direct = bias.data[o];
            for (size_t c = 0; c < 2; ++c)
              for (size_t i = 0; i < kernel; ++i)
                for (size_t j = 0; j < kernel; ++j) {
                  const long yy = static_cast<long>(oy * stride + i) - static_cast<long>(padding);
                  const long xx = static_cast<long>(ox * stride + j) - static_cast<long>(padding);
                  if (yy < 0 || xx < 0 || yy >= 7 || xx >= 9) continue;
                  direct += x.data[((b * 2 + c) * 7 + yy) * 9 + xx] * wt.data[((c * kernel + i) * kernel + j) * 3 + o];
                }
            const double got = y.data[((b * 3 + o) * y.dim(2) + oy) * y.dim(3) + ox];
            INFO("kernel " << kernel << " stride " << stride << " pad " << padding);
            REQUIRE(std::fabs(got - direct) <= 1e-12 * (1 + std::fabs(direct)));
          }
  }
  Conv2d<double> wide(2, 3, 5, 2, 2);
  check_layer(wide, random_tensor({2, 2, 7, 9}, g), g);
}

TEST_CASE("fp64 finite differences: relu and 2x2 maxpool (inputs away from kinks and ties)") {
  std::mt19937_64 g(3);
  auto x = random_tensor({2, 2, 4, 6}, g);
  for (size_t i = 0; i < x.size(); ++i)
    x.data[i] = (x.data[i] < 0 ? -0.1 : 0.1) + x.data[i] + 1e-3 * static_cast<double>(i);
  ReLU<double> relu;
  MaxPool2d<double> pool;
  check_layer(relu, x, g);
  check_layer(pool, x, g);
}

TEST_CASE("fp64 finite differences: batchnorm in training mode, 1d (B,C) and 2d (B,C,H,W)") {
  std::mt19937_64 g(4);
  BatchNorm<double> bn1(5), bn2(3);
  check_layer(bn1, random_tensor({6, 5}, g), g);
  check_layer(bn2, random_tensor({3, 3, 2, 4}, g), g);
}

TEST_CASE("fp64 finite differences: batchnorm in cuDNN's form (a batch_norm = cudnn layer rule)") {
  // cuDNN's formulas (models/batch_norm.cpp: forward_cudnn, backward_cudnn) are another algebra for
  // the same gradient: fma(d, a, fma(g, scale, b)) must still be dL/dx, dgamma and dbeta exactly so
  // in fp64 up to the differences' error.
  profiles::OpTable table = fp64_table();
  profiles::LayerRule rule;
  rule.match.kind = profiles::LayerShape::Kind::batch_norm;
  rule.batch_norm = profiles::BatchNormForm::cudnn;
  table.layer_rules.push_back(rule);
  g_table = &table;
  std::mt19937_64 g(14);
  const auto x = random_tensor({3, 3, 2, 4}, g);
  BatchNorm<double> bn(3), plain(3);
  Context ctx = context();
  bn.initialize(ctx);
  plain.initialize(ctx);
  const auto y = bn.forward(x, ctx);
  Context fplab_ctx = ctx;
  fplab_ctx.ops = &fp64_table();
  CHECK(y.data != plain.forward(x, fplab_ctx).data);  // the rule is in effect: other roundings
  check_layer(bn, x, g);
  g_table = nullptr;
}

TEST_CASE("fp64 finite differences: global average pooling and dropout (fixed mask per step)") {
  std::mt19937_64 g(5);
  GlobalAvgPool<double> gap;
  Dropout<double> dropout(0.3);
  check_layer(gap, random_tensor({2, 3, 4, 5}, g), g);
  check_layer(dropout, random_tensor({4, 9}, g), g);
}

TEST_CASE("fp64 finite differences: softmax cross-entropy loss gradient") {
  std::mt19937_64 g(6);
  auto logits = random_tensor({5, 10}, g, 2.0);
  const std::vector<uint8_t> labels = {0, 3, 9, 3, 7};
  SoftmaxCrossEntropy<double> loss_fn;
  auto loss = [&] {
    Context c = context();
    return loss_fn.forward(logits, labels, c);
  };
  loss();
  const auto d = loss_fn.backward();
  check("logits", logits.data, d.data, loss);
}

TEST_CASE("fp64 finite differences: whole models through the loss (mlp, small_cnn_bn), sampled parameters") {
  std::mt19937_64 g(7);
  for (const char* name : {"mlp", "small_cnn_bn"}) {
    ModelSpec spec;
    spec.name = name;
    spec.hidden = {6};
    auto model = build_model<double>(spec, {1, 8, 8});
    Context ctx = context();
    model.initialize(ctx);
    const auto x = random_tensor({3, 1, 8, 8}, g);
    const std::vector<uint8_t> labels = {1, 4, 8};
    SoftmaxCrossEntropy<double> loss_fn;
    auto loss = [&] {
      Context c = context();
      return loss_fn.forward(model.forward(x, c), labels, c);
    };
    loss();
    model.backward(loss_fn.backward(), ctx);
    for (auto* p : model.parameters()) {
      const auto analytic = p->grad.data;
      INFO(name << " " << p->name);
      check(p->name.c_str(), p->value.data, analytic, loss, std::max<size_t>(1, p->value.size() / 7));
    }
  }
}
