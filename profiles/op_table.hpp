// Which schedule and arithmetic each kind of reduction in training uses: the interface through
// which a model asks "how does this device add?" (hardware profiles fill it later; for now a
// preset or a small TOML file does).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "profiles/layer_rule.hpp"
#include "sim/arithmetic.hpp"
#include "sim/schedule.hpp"

namespace fplab::profiles {

// The reductions of a training step.
enum class OpKind : uint8_t {
  fwd,        // forward GEMMs/convolutions: the reduction over input features
  dgrad,      // input gradients: the reduction over output features
  wgrad,      // weight gradients: the reduction over the batch (and positions)
  bias_grad,  // bias, BatchNorm gamma/beta gradients: sums over the batch
  bn_stats,   // BatchNorm means and variances, global average pooling
  softmax,    // the softmax denominator: a sum over classes
  loss,       // the mean loss over the batch
};
inline constexpr std::array<OpKind, 7> all_op_kinds = {
    OpKind::fwd, OpKind::dgrad, OpKind::wgrad, OpKind::bias_grad, OpKind::bn_stats, OpKind::softmax, OpKind::loss};
std::string_view op_kind_name(OpKind kind);

// How a convolution's input gradient adds up. `col2im`: a GEMM over the output channels for each
// (pixel, tap) column, then each input pixel's taps added after it in col2im's loop order (fplab's
// first form, and TensorFlow's). `direct`: one reduction per input pixel over (output channel,
// kernel row, kernel column), the dgrad schedule over all of those terms, as cuDNN's data-gradient
// kernels add (docs/results/step_compare.md).
enum class ConvDgrad : uint8_t { col2im, direct };
std::string_view conv_dgrad_name(ConvDgrad form);

struct OpTable {
  std::array<OpChoice, 7> ops;
  std::vector<LayerRule> layer_rules;  // the first rule matching a layer and setting an op wins
  ConvDgrad conv_dgrad = ConvDgrad::col2im;
  const OpChoice& operator[](OpKind kind) const { return ops[static_cast<size_t>(kind)]; }
  OpChoice& operator[](OpKind kind) { return ops[static_cast<size_t>(kind)]; }
  // What `kind` uses in `layer` (nullptr: a reduction outside a linear, convolution or batch norm layer).
  const OpChoice& choice(OpKind kind, const LayerShape* layer) const;
  // How `layer`'s weight gradient is computed: the first rule matching it that sets conv_wgrad, else gemm.
  ConvWgrad conv_wgrad(const LayerShape& layer) const;
  // A batch normalisation's arithmetic: the first rule matching it that sets batch_norm, else fplab.
  BatchNormForm batch_norm(const LayerShape& layer) const;
  // Every choice of the table: its seven entries, then every rule's.
  std::vector<const OpChoice*> every_choice() const;
  // Every entry's accumulation format, the layer rules' included (fplab train/run --format).
  void set_format(const fp::Format& format);
  bool nondeterministic() const;
  // "fwd=all:seq fp32/rne/fused; dgrad=...; layers conv height=14: wgrad=..." (and "; conv_dgrad=direct")
  std::string describe() const;
};

// "conv kernel=3 height=14: wgrad=contig(196):seq | all:atomic fp32/rne/fused": a rule as profile show
// and OpTable::describe write it.
std::string describe_rule(const LayerRule& rule);

// Presets: "seq" (left folds / FMA chains), "pairwise" (balanced trees), "gpu" (a GPU-like set:
// FMA-chain GEMMs, split-K input gradients, atomics for weight and bias gradients, warp trees for
// statistics), "atomic" (every reduction's final combine by atomics), "exact" (every reduction
// correctly rounded: the schedule cannot matter). `format` is the accumulation format of every
// reduction ("fp32", "bf16", ...), or "exact", which forces the exact preset in fp32.
OpTable op_table_preset(std::string_view preset, std::string_view format = "fp32");
std::string op_table_presets_help();

// A TOML file with one schedule per operation kind (all seven required) and optional
// `format`, `mode`, `products`, e.g.
//   fwd = "all:seq"
//   wgrad = "splitk-atomic(8)"
// Errors name the file, the line and the key.
OpTable load_op_table(const std::string& path, std::string_view format = "");

}  // namespace fplab::profiles
