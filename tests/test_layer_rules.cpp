// Per-layer rules of a hardware profile ([[default.layers]], docs/profiles.md "Layer rules"): parsed
// with one-line errors, looked up by layer shape (first matching rule setting the op wins, else the
// table's entry), counted as noise where they draw it (and refused in [deterministic]), and applied
// by the layers themselves: a convolution's weight gradient takes the rule of its own input size
// only, a linear layer the rule of its own features.
#include <catch2/catch.hpp>

#include <random>

#include "fp/format.hpp"
#include "models/context.hpp"
#include "models/conv2d.hpp"
#include "models/linear.hpp"
#include "profiles/hw_profile.hpp"
#include "sim/schedule.hpp"
#include "tests/temp_dir.hpp"

using namespace fplab;
using namespace fplab::profiles;
using fplab::test::TempDir;

namespace {

std::string plain_table(const std::string& mode) {
  std::string s = "[" + mode + "]\n";
  for (OpKind k : all_op_kinds) s += std::string(op_kind_name(k)) + " = \"all:seq\"\n";
  return s;
}

std::string profile_with(const std::string& default_rules, const std::string& deterministic_rules = "") {
  return "name = \"toy\"\ndescription = \"a toy\"\n" + plain_table("default") + default_rules +
         plain_table("deterministic") + deterministic_rules;
}

const char* kRules = R"(
[[default.layers]]
match = { layer = "conv", kernel = 3, height = 14 }
wgrad = "contig(196):seq | all:atomic"

[[default.layers]]
match = { layer = "conv" }
wgrad = "all:tree"
fwd = { schedule = "all:rev", format = "bf16" }

[[default.layers]]
match = { layer = "linear", in = 288, out = 32 }
fwd = "contig(64):seq | all:seq"
)";

LayerShape conv(size_t in, size_t out, size_t height, size_t kernel = 3, size_t stride = 1) {
  return {LayerShape::Kind::conv, in, out, kernel, stride, height};
}

std::string wgrad_of(const OpTable& table, const LayerShape& layer) {
  return sim::to_string(table.choice(OpKind::wgrad, &layer).schedule);
}

}  // namespace

TEST_CASE("layer rules: parsed, and looked up by the layer's shape") {
  const HardwareProfile p = parse_hw_profile(profile_with(kRules), "toy.toml");
  const OpTable& t = p.default_ops;
  REQUIRE(t.layer_rules.size() == 3);
  const auto schedule = [&](OpKind op, const LayerShape* layer) {
    return sim::to_string(t.choice(op, layer).schedule);
  };
  const LayerShape at14 = conv(16, 32, 14), at7 = conv(32, 32, 7), dense{LayerShape::Kind::linear, 288, 32},
                   other_dense{LayerShape::Kind::linear, 32, 10};
  CHECK(schedule(OpKind::wgrad, &at14) == "contig(196):seq | all:atomic");  // the first rule that matches
  CHECK(schedule(OpKind::wgrad, &at7) == "all:tree");                       // the second: any convolution
  CHECK(schedule(OpKind::fwd, &at14) == "all:rev");  // the first rule sets no fwd: the next one's
  CHECK(t.choice(OpKind::fwd, &at14).arithmetic.format.name == "bf16");
  CHECK(schedule(OpKind::dgrad, &at14) == "all:seq");  // no rule sets dgrad: the table's
  CHECK(schedule(OpKind::fwd, &dense) == "contig(64):seq | all:seq");
  CHECK(schedule(OpKind::fwd, &other_dense) == "all:seq");
  CHECK(schedule(OpKind::wgrad, nullptr) == "all:seq");  // outside any layer
  LayerShape strided = at14;
  strided.kernel = 5;
  CHECK(schedule(OpKind::wgrad, &strided) == "all:tree");  // kernel 5 misses the first rule

  CHECK(noisy_ops(t) == std::vector<OpKind>{OpKind::wgrad});
  CHECK(t.nondeterministic());
  CHECK(noisy_ops(p.deterministic_ops).empty());
  CHECK(t.describe().find("layers conv kernel=3 height=14: wgrad=contig(196):seq | all:atomic") != std::string::npos);
  CHECK(t.describe().find("layers linear in=288 out=32: fwd=contig(64):seq | all:seq") != std::string::npos);

  OpTable narrow = t;
  narrow.set_format(fp::parse_format("fp16"));
  CHECK(narrow.choice(OpKind::wgrad, &at14).arithmetic.format.name == "fp16");
  CHECK(narrow.choice(OpKind::fwd, &at7).arithmetic.format.name == "fp16");
  CHECK(narrow[OpKind::loss].arithmetic.format.name == "fp16");
}

TEST_CASE("layer rules: a linear layer's rule may name its rows (the batch)") {
  const HardwareProfile p = parse_hw_profile(profile_with(R"(
[[default.layers]]
match = { layer = "linear", in = 512, out = 10, batch = 128 }
wgrad = "contig(8):seq | all:seq"
)"),
                                             "toy.toml");
  const OpTable& t = p.default_ops;
  const LayerShape at128{LayerShape::Kind::linear, 512, 10, 0, 0, 0, 128},
      at64{LayerShape::Kind::linear, 512, 10, 0, 0, 0, 64};
  CHECK(sim::to_string(t.choice(OpKind::wgrad, &at128).schedule) == "contig(8):seq | all:seq");
  CHECK(sim::to_string(t.choice(OpKind::wgrad, &at64).schedule) == "all:seq");  // another batch: the table's
  CHECK(t.describe().find("layers linear in=512 out=10 batch=128: wgrad=contig(8):seq | all:seq") !=
        std::string::npos);
}

TEST_CASE("layer rules: a batch norm's rule sets its sums and its arithmetic") {
  const HardwareProfile p = parse_hw_profile(profile_with(R"(
[[default.layers]]
match = { layer = "bn", height = 14 }
batch_norm = "cudnn"
bn_stats = "strided(512):seq | contig(32):shfl_down | all:shfl_down"
bias_grad = "strided(512):seq | contig(32):tree | all:tree"

[[default.layers]]
match = { layer = "bn", in = 8 }
batch_norm = "fplab"

[[default.layers]]
match = { layer = "bn", height = 7, batch = 64 }
batch_norm = "cudnn"

[[default.layers]]
match = { layer = "bn", height = 28, batch = 64 }
batch_norm = "cudnn-nchw"
)"), "toy.toml");
  const OpTable& t = p.default_ops;
  const LayerShape bn14{LayerShape::Kind::batch_norm, 32, 0, 0, 0, 14}, bn7{LayerShape::Kind::batch_norm, 32, 0, 0, 0, 7};
  CHECK(t.batch_norm(bn14) == BatchNormForm::cudnn);
  CHECK(t.batch_norm(bn7) == BatchNormForm::fplab);  // batch 0 is not 64: no rule, fplab's
  CHECK(t.batch_norm({LayerShape::Kind::batch_norm, 32, 0, 0, 0, 7, 64}) == BatchNormForm::cudnn);
  CHECK(t.describe().find("layers bn height=7 batch=64: batch_norm=cudnn") != std::string::npos);
  CHECK(t.batch_norm({LayerShape::Kind::batch_norm, 8, 0, 0, 0, 14}) == BatchNormForm::cudnn);  // the first rule wins
  CHECK(t.batch_norm(conv(32, 32, 14)) == BatchNormForm::fplab);  // a convolution is no batch norm
  CHECK(sim::to_string(t.choice(OpKind::bn_stats, &bn14).schedule) ==
        "strided(512):seq | contig(32):shfl_down | all:shfl_down");
  CHECK(sim::to_string(t.choice(OpKind::bias_grad, &bn14).schedule) == "strided(512):seq | contig(32):tree | all:tree");
  CHECK(sim::to_string(t.choice(OpKind::bias_grad, &bn7).schedule) == "all:seq");
  const LayerShape conv14 = conv(32, 32, 14);
  CHECK(sim::to_string(t.choice(OpKind::bias_grad, &conv14).schedule) == "all:seq");  // a conv at 14: not the bn rule
  CHECK(t.describe().find("layers bn height=14: bias_grad=") != std::string::npos);
  CHECK(t.describe().find("batch_norm=cudnn") != std::string::npos);
  CHECK(t.batch_norm({LayerShape::Kind::batch_norm, 16, 0, 0, 0, 28, 64}) == BatchNormForm::cudnn_nchw);
  CHECK(t.describe().find("layers bn height=28 batch=64: batch_norm=cudnn-nchw") != std::string::npos);
}

TEST_CASE("layer rules: malformed rules give one line naming the file, the line and the key") {
  TempDir dir;
  const std::pair<std::string, std::string> cases[] = {
      {"[[default.layers]]\nwgrad = \"all:seq\"\n", "key 'default.layers': needs match = { layer = \"conv\", ... }"},
      {"[[default.layers]]\nmatch = { layer = \"conv\" }\n",
       "sets no operation (fwd, dgrad, wgrad, bias_grad, bn_stats, conv_wgrad or batch_norm)"},
      {"[[default.layers]]\nmatch = { kernel = 3 }\nwgrad = \"all:seq\"\n",
       "needs layer = \"conv\", \"linear\" or \"bn\""},
      {"[[default.layers]]\nmatch = { layer = \"pool\" }\nwgrad = \"all:seq\"\n",
       "key 'default.layers.match.layer': must be \"conv\", \"linear\" or \"bn\""},
      {"[[default.layers]]\nmatch = { layer = \"conv\", heigth = 3 }\nwgrad = \"all:seq\"\n",
       "key 'default.layers.match.heigth': unknown key (known here: layer, in, out, kernel, stride, height, batch)"},
      {"[[default.layers]]\nmatch = { layer = \"conv\", height = 0 }\nwgrad = \"all:seq\"\n",
       "key 'default.layers.match.height': must be a whole number >= 1"},
      {"[[default.layers]]\nmatch = { layer = \"linear\", kernel = 3 }\nwgrad = \"all:seq\"\n",
       "kernel, stride and height describe convolutions, not linear layers"},
      {"[[default.layers]]\nmatch = { layer = \"conv\" }\nsoftmax = \"all:seq\"\n",
       "key 'default.layers.softmax': unknown key (known here: match, fwd, dgrad, wgrad, bias_grad, bn_stats, "
       "conv_wgrad, "
       "batch_norm)"},
      {"[[default.layers]]\nmatch = { layer = \"bn\", out = 3 }\nbatch_norm = \"cudnn\"\n",
       "a batch norm is matched by in (its channels), height and batch only"},
      {"[[default.layers]]\nmatch = { layer = \"bn\" }\nbatch_norm = \"miopen\"\n",
       "key 'default.layers.batch_norm': must be \"fplab\", \"cudnn\", \"cudnn-nchw\" or \"cudnn-nchw-backward\""},
      {"[[default.layers]]\nmatch = { layer = \"bn\", height = 7 }\nfwd = \"all:seq\"\n",
       "key 'default.layers.fwd': a batch norm rule sets bn_stats, bias_grad and batch_norm only"},
      {"[[default.layers]]\nmatch = { layer = \"conv\" }\nbatch_norm = \"cudnn\"\n",
       "bn_stats and batch_norm need match = { layer = \"bn\", ... }"},
      {"[[default.layers]]\nmatch = { layer = \"linear\" }\nbn_stats = \"all:seq\"\n",
       "bn_stats and batch_norm need match = { layer = \"bn\", ... }"},
      {"[[default.layers]]\nmatch = { layer = \"conv\", kernel = 3, stride = 1 }\nconv_wgrad = \"fft\"\n",
       "key 'default.layers.conv_wgrad': must be \"gemm\" or \"winograd\""},
      {"[[default.layers]]\nmatch = { layer = \"conv\", kernel = 3 }\nconv_wgrad = \"winograd\"\n",
       "key 'default.layers.conv_wgrad': \"winograd\" needs match = { layer = \"conv\", kernel = 3, stride = 1"},
      {"[[default.layers]]\nmatch = { layer = \"conv\", kernel = 5, stride = 1 }\nconv_wgrad = \"winograd\"\n",
       "(F(4x4, 3x3) only)"},
      {"[[default.layers]]\nmatch = { layer = \"conv\" }\nwgrad = \"all:atomc\"\n",
       "key 'default.layers.wgrad': schedule 'all:atomc'"},
      {"[default.layers]\nx = 1\n", "key 'default.layers': must be an array of tables [[default.layers]]"},
  };
  int i = 0;
  for (const auto& [rules, expect] : cases) {
    const std::string path = dir.write("bad" + std::to_string(i++) + ".toml", profile_with(rules));
    INFO(rules);
    try {
      load_hw_profile(path);
      FAIL("no error");
    } catch (const fp::FormatError& e) {
      const std::string message = e.what();
      INFO(message);
      CHECK(message.starts_with(path + ":"));
      CHECK(message.find(expect) != std::string::npos);
      CHECK(message.find('\n') == std::string::npos);
    }
  }
  // Noise in a deterministic table's rule, at the rule's line.
  const std::string path = dir.write(
      "noisy.toml",
      profile_with("",
                   "[[deterministic.layers]]\nmatch = { layer = \"conv\" }\nwgrad = \"split(4):seq | all:atomic\"\n"));
  CHECK_THROWS_WITH(load_hw_profile(path),
                    Catch::Contains(":21: key 'deterministic.layers.wgrad': split(4):seq | all:atomic") &&
                        Catch::Contains("the [deterministic] table must not"));
}

namespace {

// One forward and backward pass of `layer` on fixed data under `table` with implementation seed
// `seed`: (the output, the weight gradient).
template <class Layer>
std::pair<std::vector<float>, std::vector<float>> pass(Layer& layer, const OpTable& table, uint64_t seed,
                                                       const std::vector<size_t>& input_shape) {
  models::Context ctx;
  ctx.ops = &table;
  ctx.algo_seed = 3;
  ctx.impl_seed = seed;
  ctx.call = 1;
  layer.initialize(ctx);
  models::Tensor<float> x(input_shape);
  std::mt19937 g(5);
  std::normal_distribution<float> d(0, 1);
  for (auto& v : x.data) v = d(g);
  const models::Tensor<float> y = layer.forward(x, ctx);
  models::Tensor<float> dy(y.shape);
  for (auto& v : dy.data) v = d(g);
  layer.backward(dy, ctx);
  return {y.data, layer.parameters()[0]->grad.data};
}

}  // namespace

TEST_CASE("layer rules: a convolution and a linear layer take the rules of their own shapes") {
  const HardwareProfile p = parse_hw_profile(profile_with(R"(
[[default.layers]]
match = { layer = "conv", kernel = 3, height = 14 }
wgrad = "contig(196):seq | all:atomic"

[[default.layers]]
match = { layer = "linear", in = 64, out = 8 }
fwd = "all:rev"
)"),
                                             "toy.toml");
  const OpTable& rules = p.default_ops;
  const OpTable& plain = p.deterministic_ops;  // every reduction all:seq
  // At 14 pixels the weight gradient's images are added by atomics: another seed, other bits.
  models::Conv2d<float> at14(4, 8, 3, 1, 1);
  const auto a = pass(at14, rules, 1, {16, 4, 14, 14}), b = pass(at14, rules, 2, {16, 4, 14, 14});
  CHECK(a.first == b.first);    // the forward pass draws no noise
  CHECK(a.second != b.second);  // the weight gradient does
  CHECK(pass(at14, plain, 1, {16, 4, 14, 14}).second != a.second);
  // At 7 pixels no rule applies: the table's all:seq, whatever the seed.
  models::Conv2d<float> at7(4, 8, 3, 1, 1);
  CHECK(pass(at7, rules, 1, {16, 4, 7, 7}) == pass(at7, rules, 2, {16, 4, 7, 7}));
  CHECK(pass(at7, rules, 1, {16, 4, 7, 7}) == pass(at7, plain, 1, {16, 4, 7, 7}));
  // A linear layer of 64 -> 8 features sums its forward pass in reverse; 64 -> 9 does not.
  models::Linear<float> matched(64, 8), unmatched(64, 9);
  CHECK(pass(matched, rules, 1, {32, 64}).first != pass(matched, plain, 1, {32, 64}).first);
  CHECK(pass(unmatched, rules, 1, {32, 64}) == pass(unmatched, plain, 1, {32, 64}));
}

TEST_CASE("layer rules: a convolution's rule may name its images (the batch)") {
  // PyTorch picks a bias gradient's reduction by its terms, images x pixels: h100-torch's 14x14 rule
  // at 32 images is not its rule at 64.
  const HardwareProfile p = parse_hw_profile(profile_with(R"(
[[default.layers]]
match = { layer = "conv", height = 14, batch = 32 }
wgrad = "all:rev"
)"),
                                             "toy.toml");
  const OpTable& rules = p.default_ops;
  const OpTable& plain = p.deterministic_ops;
  LayerShape at32 = conv(4, 8, 14), at64 = conv(4, 8, 14);
  at32.batch = 32;
  at64.batch = 64;
  CHECK(wgrad_of(rules, at32) == "all:rev");
  CHECK(wgrad_of(rules, at64) == "all:seq");
  // The C++ layer tells the rules its batch: at 32 images the rule reverses the weight gradient's sums.
  models::Conv2d<float> layer(4, 8, 3, 1, 1);
  CHECK(pass(layer, rules, 1, {32, 4, 14, 14}).second != pass(layer, plain, 1, {32, 4, 14, 14}).second);
  CHECK(pass(layer, rules, 1, {16, 4, 14, 14}) == pass(layer, plain, 1, {16, 4, 14, 14}));
  const HardwareProfile shipped = find_hw_profile("h100-torch");
  for (const OpTable* t : {&shipped.default_ops, &shipped.deterministic_ops}) {
    LayerShape c = conv(16, 32, 14);
    c.batch = 32;
    CHECK(sim::to_string(t->choice(OpKind::bias_grad, &c).schedule) ==
          "strided(128):seq | strided(32):seq | all:shfl_down");
    c.batch = 64;
    CHECK(sim::to_string(t->choice(OpKind::bias_grad, &c).schedule) ==
          "strided(2048):seq | strided(512):seq | contig(32):shfl_down | all:shfl_down");
  }
}

TEST_CASE("layer rules: h100-torch's default mode draws noise only in convolutions' weight gradients (and one dgrad)") {
  const HardwareProfile p = find_hw_profile("h100-torch");
  // the weight gradients, and the ResNet-18's 256 -> 256 input gradient at 8x8 (below)
  CHECK(noisy_ops(p.default_ops) == std::vector<OpKind>{OpKind::dgrad, OpKind::wgrad});
  CHECK(!draws_noise(p.default_ops[OpKind::dgrad]));
  CHECK(!draws_noise(p.default_ops[OpKind::wgrad]));  // linear layers' (cuBLAS): deterministic
  const LayerShape at14 = conv(16, 32, 14), at28 = conv(1, 16, 28), at7 = conv(32, 32, 7);
  CHECK(draws_noise(p.default_ops.choice(OpKind::wgrad, &at14)));
  CHECK(draws_noise(p.default_ops.choice(OpKind::wgrad, &at28)));
  CHECK(!draws_noise(p.default_ops.choice(OpKind::wgrad, &at7)));
  CHECK(noisy_ops(p.deterministic_ops).empty());
}

TEST_CASE("layer rules: h100-torch's Winograd weight gradients, both modes, where cuDNN runs winograd_nonfused") {
  const HardwareProfile p = find_hw_profile("h100-torch");
  using profiles::ConvWgrad;
  for (const OpTable* t : {&p.default_ops, &p.deterministic_ops}) {
    CHECK(t->conv_wgrad(conv(32, 32, 7)) == ConvWgrad::winograd);   // small_cnn's
    CHECK(t->conv_wgrad(conv(32, 64, 7)) == ConvWgrad::winograd);   // medium_cnn's
    CHECK(t->conv_wgrad(conv(64, 128, 3)) == ConvWgrad::winograd);  // medium_cnn's
    CHECK(t->conv_wgrad(conv(64, 128, 7)) == ConvWgrad::gemm);
    CHECK(t->conv_wgrad(conv(32, 64, 14)) == ConvWgrad::gemm);
    CHECK(wgrad_of(*t, conv(32, 64, 7)) == "all:seq");  // each transformed position's sum one chain
  }
  CHECK(p.default_ops.conv_wgrad(conv(1, 16, 28)) == ConvWgrad::gemm);  // atomics in default mode
  CHECK(p.deterministic_ops.conv_wgrad(conv(1, 16, 28)) == ConvWgrad::winograd);
}

TEST_CASE("layer rules: h100-torch's ResNet-18 on 32x32 images, as revealed on an H200") {
  const OpTable& t = find_hw_profile("h100-torch").default_ops;
  // cuDNN's wgrad_alg0_engine: tiles of 512 output pixels of one image, added by atomics
  CHECK(wgrad_of(t, conv(3, 64, 32)) == "contig(512):seq | all:atomic");
  CHECK(wgrad_of(t, conv(64, 128, 32, 3, 2)) == "contig(256):seq | all:atomic");
  CHECK(wgrad_of(t, conv(64, 128, 32, 1, 2)) == "contig(256):seq | all:atomic");
  CHECK(wgrad_of(t, conv(128, 256, 16, 1, 2)) == "contig(64):seq | all:atomic");
  // the implicit GEMM's one chain, and the Winograd kernels modelled as one
  CHECK(wgrad_of(t, conv(128, 256, 16, 3, 2)) == "all:seq");
  CHECK(wgrad_of(t, conv(64, 64, 32)) == "all:seq");
  CHECK(wgrad_of(t, conv(512, 512, 4)) == "all:seq");
  // cuDNN's dgrad_engine at 8x8: a chain per kernel position, added by atomics; elsewhere one chain
  const auto dgrad_of = [&](const LayerShape& layer) { return sim::to_string(t.choice(OpKind::dgrad, &layer).schedule); };
  CHECK(dgrad_of(conv(256, 256, 8)) == "strided(9):seq | all:atomic");
  CHECK(dgrad_of(conv(256, 256, 7)) == "strided(9):seq | all:atomic");  // the 28x28 ResNet-18's (H100)
  CHECK(dgrad_of(conv(256, 512, 8, 3, 2)) == "all:seq");
  CHECK(dgrad_of(conv(512, 512, 4)) == "all:seq");
}

TEST_CASE("layer rules: h100-torch-tf32 keeps only the first layer's weight gradient atomic") {
  const HardwareProfile p = find_hw_profile("h100-torch-tf32");
  const LayerShape at14 = conv(16, 32, 14), at28 = conv(1, 16, 28);
  CHECK(draws_noise(p.default_ops.choice(OpKind::wgrad, &at28)));
  CHECK(!draws_noise(p.default_ops.choice(OpKind::wgrad, &at14)));
  CHECK(sim::to_string(p.default_ops.choice(OpKind::wgrad, &at14).schedule) == "all:fused(8,25,tf32)");
  CHECK(noisy_ops(p.deterministic_ops).empty());
  // the ResNet-18 on 32x32 images: the first layer's fp32 kernel, tensor cores for the rest
  CHECK(wgrad_of(p.default_ops, conv(3, 64, 32)) == "contig(512):seq | all:atomic");
  for (const LayerShape& layer : {conv(64, 64, 32), conv(64, 128, 32, 1, 2), conv(128, 256, 16, 3, 2), conv(512, 512, 4)})
    CHECK(wgrad_of(p.default_ops, layer) == "all:fused(8,25,tf32)");
  // forward and input gradients: tf32 factors rounded (to nearest even, or ties away), fp32 chains
  // where cuDNN's kernel is fp32
  const auto of = [&](OpKind op, const LayerShape& layer) {
    return sim::to_string(p.default_ops.choice(op, &layer).schedule);
  };
  // where cuDNN's kernel is fp32; the 3x3 kernels' terms by kernel position in channel blocks
  const std::string fwd32 = "each(288)[cols(9)] | all:fused(8,25,tf32rne)";
  const std::string dgrad32 = "each(288)[perm(8,7,6,5,4,3,2,1,0) | cols(9)] | all:fused(8,25,tf32rne)";
  CHECK(of(OpKind::fwd, conv(3, 64, 32)) == "all:seq");
  CHECK(of(OpKind::fwd, conv(64, 64, 32)) == fwd32);
  CHECK(of(OpKind::dgrad, conv(64, 64, 32)) == "each(144)[cols(9)] | all:fused(8,25,tf32rna)");
  CHECK(of(OpKind::fwd, conv(64, 128, 32, 3, 2)) == "each(144)[cols(9)] | all:fused(8,25,tf32rna)");
  CHECK(of(OpKind::dgrad, conv(64, 128, 32, 3, 2)) == dgrad32);
  CHECK(of(OpKind::fwd, conv(64, 128, 32, 1, 2)) == "all:seq");
  CHECK(of(OpKind::dgrad, conv(128, 256, 16, 1, 2)) == "all:seq");
  CHECK(of(OpKind::fwd, conv(128, 256, 16, 1, 2)) == "all:fused(8,25,tf32rne)");
  CHECK(of(OpKind::fwd, conv(256, 512, 8, 1, 2)) == "all:fused(8,25,tf32rne)");
  CHECK(of(OpKind::dgrad, conv(256, 512, 8, 1, 2)) == "all:fused(8,25,tf32rne)");
  for (const LayerShape& layer : {conv(128, 128, 16), conv(256, 256, 8), conv(512, 512, 4)}) {
    CHECK(of(OpKind::fwd, layer) == fwd32);
    CHECK(of(OpKind::dgrad, layer) == dgrad32);
  }
  for (const LayerShape& layer : {conv(128, 256, 16, 3, 2), conv(256, 512, 8, 3, 2)}) {
    CHECK(of(OpKind::fwd, layer) == fwd32);
    CHECK(of(OpKind::dgrad, layer) == dgrad32);
  }
  // small_cnn's layers keep their fp32 chains
  CHECK(of(OpKind::fwd, conv(16, 32, 14)) == "all:seq");
  CHECK(of(OpKind::dgrad, conv(32, 32, 7)) == "all:seq");
}
