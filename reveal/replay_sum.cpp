#include "reveal/replay_sum.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>

#include "fp/superaccumulator.hpp"
#include "sim/tensor_core.hpp"

namespace fplab::reveal {
namespace {

// Node values as doubles: fp32 values are exact in them, and so is every fp64 partial.
struct Evaluator {
  const sim::AdditionTree& tree;
  Arithmetic how;

  double round_node(double v) const { return how == Arithmetic::fp64 ? v : static_cast<double>(static_cast<float>(v)); }

  // leaf(i): the term's value as the arithmetic sees it; product(i): (a_i, b_i) for an FMA.
  template <class Leaf, class Fma>
  float run(Leaf leaf, Fma fma_onto) const {
    std::vector<double> value(tree.terms + tree.nodes.size());
    for (size_t i = 0; i < tree.terms; ++i) value[i] = leaf(i);
    for (size_t j = 0; j < tree.nodes.size(); ++j) {
      const auto& c = tree.nodes[j];
      double v;
      if (c.size() == 2) {
        if (how == Arithmetic::fp32_fused && (c[0] < tree.terms) != (c[1] < tree.terms)) {
          const size_t term = c[0] < tree.terms ? c[0] : c[1], partial = c[0] < tree.terms ? c[1] : c[0];
          v = fma_onto(term, value[partial]);
        } else if (how == Arithmetic::fp32_fused && c[0] < tree.terms && c[1] < tree.terms) {
          // Two products: the first (smaller index) rounded, the second fused onto it.
          const size_t first = std::min(c[0], c[1]), second = std::max(c[0], c[1]);
          v = fma_onto(second, static_cast<double>(static_cast<float>(value[first])));
        } else {
          v = round_node(value[c[0]] + value[c[1]]);  // both fp32 (exact in fp64), or both fp64 partials
        }
      } else {
        fp::SuperAccumulator exact;
        for (size_t k : c) exact.add(value[k]);
        v = exact.round(how == Arithmetic::fp64 ? fp::fp64() : fp::fp32(), {}).value;
      }
      value[tree.terms + j] = v;
    }
    return static_cast<float>(value[tree.root]);
  }
};

void sort_best_first(Verification& v) {
  std::stable_sort(v.scores.begin(), v.scores.end(),
                   [](const ReplayScore& a, const ReplayScore& b) { return a.identical > b.identical; });
}

}  // namespace

std::vector<float> draw_trial_inputs(std::mt19937_64& rng, size_t n, size_t kind) {
  std::vector<float> x(n);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (size_t i = 0; i < n; ++i) {
    switch (kind % 4) {
      case 0:
        x[i] = normal(rng);
        break;
      case 1:
        x[i] = unit(rng);
        break;
      case 2:
        x[i] = std::ldexp(1.0f + unit(rng), exponent(rng)) * (rng() & 1 ? -1.0f : 1.0f);
        break;
      default:
        x[i] = (i % 2 ? -x[i - 1] * (1.0f + 1e-6f * normal(rng)) : normal(rng) * 1000.0f);
        break;
    }
  }
  return x;
}

std::vector<std::string> trial_input_kinds() {
  return {"normal", "uniform [0, 1)", "wide exponents 2^-30 .. 2^31, random signs", "cancelling pairs"};
}

std::string arithmetic_name(Arithmetic a) {
  switch (a) {
    case Arithmetic::fp32:
      return "fp32 additions";
    case Arithmetic::fp64:
      return "fp64 accumulation, rounded to fp32 once";
    case Arithmetic::fp32_fused:
      return "fp32, products fused (FMA) onto the partial sum";
    case Arithmetic::fp32_rounded:
      return "fp32, products rounded first";
    case Arithmetic::fp64_rounded:
      return "products rounded to fp32, fp64 accumulation, rounded to fp32 once";
    case Arithmetic::tf32_truncated_fused:
      return "tensor-core steps (tc-h100-tf32), factors truncated to tf32";
    case Arithmetic::tf32_nearest_even_fused:
      return "tensor-core steps (tc-h100-tf32-rne), factors rounded to tf32, ties to even";
    case Arithmetic::tf32_nearest_away_fused:
      return "tensor-core steps (tc-h100-tf32-rna), factors rounded to tf32, ties away";
  }
  return "?";
}

std::vector<Arithmetic> sum_arithmetics() { return {Arithmetic::fp32, Arithmetic::fp64}; }
std::vector<Arithmetic> dot_arithmetics() {
  return {Arithmetic::fp32_fused,
          Arithmetic::fp32_rounded,
          Arithmetic::fp64,
          Arithmetic::fp64_rounded,
          Arithmetic::tf32_nearest_even_fused,
          Arithmetic::tf32_nearest_away_fused,
          Arithmetic::tf32_truncated_fused};
}

float replay_sum(const sim::AdditionTree& tree, std::span<const float> x, Arithmetic a) {
  return Evaluator{tree, a == Arithmetic::fp64 ? Arithmetic::fp64 : Arithmetic::fp32}.run(
      [&](size_t i) { return static_cast<double>(x[i]); }, [](size_t, double v) { return v; });
}

namespace {

// Tensor-core arithmetic: a node with terms among its children is one fused step of the
// registry's model (its partial sum, if any, the accumulator; the model converts the factors); a
// node of partial sums alone adds them in fp32.
float replay_fused(const sim::AdditionTree& tree, std::span<const float> a, std::span<const float> b,
                   std::string_view model) {
  const sim::FusedAddSpec spec = sim::tensor_core_model(model);
  std::vector<double> value(tree.terms + tree.nodes.size());
  std::vector<double> fa, fb;
  for (size_t j = 0; j < tree.nodes.size(); ++j) {
    const auto& c = tree.nodes[j];
    fa.clear();
    fb.clear();
    double acc = 0;
    size_t partials = 0;
    for (size_t k : c) {
      if (k < tree.terms) {
        fa.push_back(a[k]);
        fb.push_back(b[k]);
      } else if (partials++ == 0) {
        acc = value[k];
      } else {
        acc = static_cast<float>(acc) + static_cast<float>(value[k]);  // a node of partial sums
      }
    }
    value[tree.terms + j] = fa.empty() ? acc : sim::fused_multiply_add(acc, fa, fb, spec);
  }
  return static_cast<float>(value[tree.root]);
}

// The registry's model of each tensor-core candidate (sim/tensor_core_models.cpp).
const char* fused_model(Arithmetic a) {
  switch (a) {
    case Arithmetic::tf32_truncated_fused:
      return "tc-h100-tf32";
    case Arithmetic::tf32_nearest_even_fused:
      return "tc-h100-tf32-rne";
    case Arithmetic::tf32_nearest_away_fused:
      return "tc-h100-tf32-rna";
    default:
      return nullptr;
  }
}

}  // namespace

float replay_dot(const sim::AdditionTree& tree, std::span<const float> a, std::span<const float> b, Arithmetic how) {
  if (const char* model = fused_model(how)) return replay_fused(tree, a, b, model);
  const auto product = [&](size_t i) { return static_cast<double>(a[i]) * static_cast<double>(b[i]); };  // exact
  const auto leaf = [&](size_t i) {
    return how == Arithmetic::fp64 ? product(i) : static_cast<double>(static_cast<float>(product(i)));
  };
  const auto fma_onto = [&](size_t i, double partial) {
    return static_cast<double>(std::fma(a[i], b[i], static_cast<float>(partial)));
  };
  // Rounded products into fp64 partial sums: the fp64 evaluator on rounded leaves.
  return Evaluator{tree, how == Arithmetic::fp64_rounded ? Arithmetic::fp64 : how}.run(leaf, fma_onto);
}

Verification verify_sum(const SumFunction& sum, const sim::AdditionTree& tree, size_t trials, uint64_t seed) {
  Verification v{trials, {}, trial_input_kinds()};
  for (Arithmetic a : sum_arithmetics()) v.scores.push_back({a, 0});
  std::mt19937_64 rng(seed);
  for (size_t t = 0; t < trials; ++t) {
    const auto x = draw_trial_inputs(rng, tree.terms, t);
    const float real = sum(x);
    for (auto& s : v.scores)
      if (std::bit_cast<uint32_t>(replay_sum(tree, x, s.arithmetic)) == std::bit_cast<uint32_t>(real)) ++s.identical;
  }
  sort_best_first(v);
  return v;
}

Verification verify_dot(const DotFunction& dot, const sim::AdditionTree& tree, size_t trials, uint64_t seed) {
  Verification v{trials, {}, trial_input_kinds()};
  for (Arithmetic a : dot_arithmetics()) v.scores.push_back({a, 0});
  std::mt19937_64 rng(seed);
  for (size_t t = 0; t < trials; ++t) {
    const auto a = draw_trial_inputs(rng, tree.terms, t), b = draw_trial_inputs(rng, tree.terms, t + 1);
    const float real = dot(a, b);
    for (auto& s : v.scores)
      if (std::bit_cast<uint32_t>(replay_dot(tree, a, b, s.arithmetic)) == std::bit_cast<uint32_t>(real)) ++s.identical;
  }
  sort_best_first(v);
  return v;
}

}  // namespace fplab::reveal
