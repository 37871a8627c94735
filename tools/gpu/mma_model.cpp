// gpu_mma_validate: the reference model of one MMA output (sim::fused_dot with the tc-h100-*
// models), the chip rules, and the variants of the model a mismatch may be explained by.

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>

#include "fp/round.hpp"
#include "sim/tensor_core.hpp"

#include "tools/gpu/mma_validate.hpp"

using nlohmann::json;

namespace fplab::tools::gpu::mma {

const std::vector<MmaInput> kInputs = {MmaInput::tf32, MmaInput::fp16, MmaInput::bf16, MmaInput::e4m3, MmaInput::e5m2};
const std::vector<MmaPath> kPaths = {MmaPath::mma_sync, MmaPath::wgmma};
double p2(int e) { return std::ldexp(1.0, e); }

// ---- formats and the model

// The format of the codes: tf32 codes are whole fp32 patterns.
const fp::Format& code_format(MmaInput in) {
  static const fp::Format f32 = fp::fp32(), f16 = fp::fp16(), b16 = fp::bf16(), e4 = fp::e4m3(), e5 = fp::e5m2();
  switch (in) {
    case MmaInput::tf32:
      return f32;
    case MmaInput::fp16:
      return f16;
    case MmaInput::bf16:
      return b16;
    case MmaInput::e4m3:
      return e4;
    default:
      return e5;
  }
}
bool is_fp8(MmaInput in) { return in == MmaInput::e4m3 || in == MmaInput::e5m2; }
double value(MmaInput in, uint32_t code) { return code_format(in).decode(code); }
uint32_t code_of(const fp::Format& f, double x) {
  return static_cast<uint32_t>(fp::round_double(x, f, {fp::Mode::rne}).bits);
}
float as_float(uint32_t u) { return std::bit_cast<float>(u); }

std::string model_name(MmaInput in) {
  switch (in) {
    case MmaInput::tf32:
      return "tc-h100-tf32";
    case MmaInput::fp16:
      return "tc-h100-fp16";
    case MmaInput::bf16:
      return "tc-h100-bf16";
    case MmaInput::e4m3:
      return "tc-h100-fp8";
    default:
      return "tc-h100-fp8 (input e5m2)";
  }
}
sim::FusedAddSpec model_spec(MmaInput in) {
  sim::FusedAddSpec s = sim::tensor_core_model(in == MmaInput::e5m2 ? "tc-h100-fp8" : model_name(in));
  if (in == MmaInput::e5m2) s.input = fp::e5m2();
  return s;
}

// Two things the chip does that sim::fused_multiply_add does not (docs/results/tensor-cores-h100.md):
// a sum beyond the output's range gives inf, though the result is truncated toward zero (the
// model saturates, as IEEE round-toward-zero does); and a zero result is always +0 (the model
// follows IEEE: -0 for a sum of -0 terms or a negative sum truncated to zero).
double step(double acc, const Vec& a, const Vec& b, size_t from, size_t n, const sim::FusedAddSpec& s,
            bool chip_rules) {
  const std::span<const double> x(a.data() + from, n), y(b.data() + from, n);
  const double r = sim::fused_multiply_add(acc, x, y, s);
  if (!chip_rules) return r;
  if (r == 0) return 0.0;
  if (std::fabs(r) == s.output.max_finite()) {
    sim::FusedAddSpec wide = s;
    wide.output = fp::parse_format("e11m" + std::to_string(s.output.man_bits));
    if (std::fabs(sim::fused_multiply_add(acc, x, y, wide)) > s.output.max_finite()) return std::copysign(INFINITY, r);
  }
  return r;
}

double evaluate(const Candidate& cand, double c, const Vec& a, const Vec& b, bool chip_rules) {
  const Vec* pa = &a;
  const Vec* pb = &b;
  thread_local Vec ordered_a, ordered_b;
  if (!cand.order.empty()) {
    ordered_a.resize(a.size()), ordered_b.resize(b.size());
    const size_t n = cand.order.size();
    for (size_t k = 0; k < a.size(); ++k) {
      const size_t from = k / n * n + static_cast<size_t>(cand.order[k % n]);
      ordered_a[k] = a[from], ordered_b[k] = b[from];
    }
    pa = &ordered_a, pb = &ordered_b;
  }
  if (!cand.fp8_via_fp16 && !chip_rules) return sim::fused_dot(c, *pa, *pb, cand.spec);
  double acc = c;
  if (!cand.fp8_via_fp16) {
    const size_t n = static_cast<size_t>(cand.spec.products);
    for (size_t k = 0; k < a.size(); k += n)
      acc = step(acc, *pa, *pb, k, std::min(n, a.size() - k), cand.spec, chip_rules);
    return acc;
  }
  for (size_t k = 0; k < a.size(); k += 32) {
    double h = step(cand.c_by_fadd ? 0.0 : acc, *pa, *pb, k, 16, cand.spec, chip_rules);
    h = step(h, *pa, *pb, k + 16, 16, cand.spec, chip_rules);
    acc = cand.c_by_fadd ? static_cast<double>(static_cast<float>(acc) + static_cast<float>(h)) : h;  // FADD.RN
  }
  return acc;
}

std::string model_name(MmaInput in, MmaPath path) {
  if (path == MmaPath::mma_sync && is_fp8(in)) return "2 x HMMA.16816 (tc-h100-fp16) + FADD";
  return model_name(in);
}

std::vector<Candidate> candidates(MmaInput in, MmaPath path) {
  const sim::FusedAddSpec base = model_spec(in);
  const int k = mma_k(in);
  std::vector<Candidate> list;
  if (path == MmaPath::mma_sync && is_fp8(in)) {
    // Pairs of K indices per fp16x2 register: the low halves of the fp8 registers (K = 4t, 4t+1,
    // 4t+16, 4t+17) go to the first HMMA, the high halves to the second.
    std::vector<int> pairs, halves, swapped;
    for (int t = 0; t < 4; ++t) pairs.insert(pairs.end(), {4 * t, 4 * t + 1, 4 * t + 16, 4 * t + 17});
    for (int t = 0; t < 4; ++t) pairs.insert(pairs.end(), {4 * t + 2, 4 * t + 3, 4 * t + 18, 4 * t + 19});
    for (int i = 0; i < 32; ++i) halves.push_back(i), swapped.push_back(pairs[(i + 16) % 32]);
    const sim::FusedAddSpec h = sim::tensor_core_model("tc-h100-fp16");
    sim::FusedAddSpec whole = h;
    whole.products = 32;
    list.push_back({"model", h, pairs, true, true});
    list.push_back({"C in the first HMMA", h, pairs, true, false});
    list.push_back({"K halves 0-15, 16-31", h, halves, true, true});
    list.push_back({"second group first", h, swapped, true, true});
    list.push_back({model_name(in), base, {}});
    list.push_back({"one fp16 step N=32 F=25", whole, {}});
    return list;
  }
  list.push_back({"model", base, {}});
  auto add = [&](const std::string& name, const std::function<void(sim::FusedAddSpec&)>& edit) {
    sim::FusedAddSpec s = base;
    edit(s);
    list.push_back({name, s, {}});
  };
  for (int df : {-2, -1, 1, 2, 3})
    add("F=" + std::to_string(base.fraction_bits + df), [&](auto& s) { s.fraction_bits += df; });
  add("N=" + std::to_string(k / 2), [&](auto& s) { s.products = k / 2; });
  if (k >= 16) add("N=" + std::to_string(k / 4), [&](auto& s) { s.products = k / 4; });
  add("result RNE", [](auto& s) { s.output_mode = fp::Mode::rne; });
  add("alignment floors", [](auto& s) { s.truncation = sim::AlignedTruncation::toward_minus_infinity; });
  add("acc outside alignment", [](auto& s) { s.accumulator_in_alignment = false; });
  if (in == MmaInput::tf32) add("tf32 inputs RNE", [](auto& s) { s.input_mode = fp::Mode::rne; });
  if (is_fp8(in)) {
    add("fp32 result", [](auto& s) { s.output = fp::fp32(); });
    add("F=25 fp32 result", [](auto& s) {
      s.output = fp::fp32();
      s.fraction_bits = 25;
    });
  }
  return list;
}

}  // namespace fplab::tools::gpu::mma
