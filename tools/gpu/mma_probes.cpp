// gpu_mma_validate: the probe vectors (Fasi et al. 2021, FTTN 2024) and the scans of F, N, the
// product exponent, zeros, overflow and the tf32 low bits: one dot product over every output.

#include <cmath>
#include <tuple>

#include "fp/round.hpp"
#include "tools/gpu/mma_validate.hpp"

using nlohmann::json;

namespace fplab::tools::gpu::mma {

// ---- probes: one dot product replicated over every output of a tile

std::vector<Probe> probes(MmaInput in, MmaPath path) {
  const sim::FusedAddSpec spec = candidates(in, path)[0].spec;  // what the scans are centred on
  const int k = mma_k(in), F = spec.fraction_bits;
  const fp::Format& f = code_format(in);
  const bool h = in == MmaInput::fp16;
  std::vector<Probe> list;
  // Products given as (position, x, y); acc; K = instructions * k.
  auto add = [&](const std::string& name, double acc, std::vector<std::tuple<int, double, double>> products,
                 const std::string& published = "", int instructions = 1) {
    Probe p;
    p.name = name, p.acc = acc, p.published = published;
    p.a.assign(k * instructions, 0.0), p.b.assign(k * instructions, 0.0);
    for (auto [i, x, y] : products) p.a[i] = x, p.b[i] = y;
    list.push_back(p);
    return &list.back();
  };
  auto split = [](int e) { return std::pair{p2(e / 2), p2(e - e / 2)}; };  // 2^e as a product of two powers
  // Fasi et al. 2021 (PeerJ CS 7:e330) and FTTN (Li et al. 2024) probes; their inputs were fp16.
  add("FTTN extra bit: 1*1 - (1 - 2^-24)", -(1 - p2(-24)), {{0, 1, 1}}, h ? "0x1p-24 (FTTN, H100)" : "");
  add("FTTN 3 extra bits: 1*1.25 - (2^-3 + 2^-25)", -(p2(-3) + p2(-25)), {{0, 1, 1.25}},
      h ? "0x1.1ffffep+0 = 0x3F8FFFFF (FTTN, H100)" : "");
  add("FTTN rounding: 2^-14 * 3*2^-10 + 1*2", 0, {{0, p2(-14), p2(-9) + p2(-10)}, {1, 1, 2}},
      h ? "0x1p+1 (FTTN: RZ)" : "");
  add("FTTN rounding: negative", 0, {{0, p2(-14), -(p2(-9) + p2(-10))}, {1, 1, -2}}, h ? "-0x1p+1 (FTTN: RZ)" : "");
  add("FTTN rounding: 2 + 2^-14 * 3*2^-10", 2, {{0, p2(-14), p2(-9) + p2(-10)}}, h ? "0x1p+1 (FTTN: RZ)" : "");
  add("Fasi D2: 4 * 2^-24 + (1 - 2^-24)", 1 - p2(-24),
      {{0, 1, p2(-24)}, {1, 1, p2(-24)}, {2, 1, p2(-24)}, {3, 1, p2(-24)}});
  add("Fasi D3: 1 - 2^-24 + (-1 + 2^-24)", -1 + p2(-24), {{0, 1, 1}, {1, 1, -p2(-24)}});
  add("Fasi D4 carry-out: 1+1+1+2^-23 + (1+2^-22+2^-23)", 1 + p2(-22) + p2(-23),
      {{0, 1, 1}, {1, 1, 1}, {2, 1, 1}, {3, 1, p2(-23)}});
  add("Fasi C: 1*2 + 1*3*2^-24", 0, {{0, 1, 2}, {1, 1, p2(-23) + p2(-24)}});
  add("Fasi B: 4 * (1 - 2^-11)^2", 0,
      {{0, 1 - p2(-11), 1 - p2(-11)},
       {1, 1 - p2(-11), 1 - p2(-11)},
       {2, 1 - p2(-11), 1 - p2(-11)},
       {3, 1 - p2(-11), 1 - p2(-11)}});
  add("Fasi A: subnormal input 2^-24 * 4", 0, {{0, p2(-24), 4}});
  add("Fasi A: subnormal acc 2^-149 kept", p2(-149), {});
  // Scans: where is the grid 2^-F? acc -2^-j against a product 1, and a product -2^-j against acc 1.
  for (int j = F - 2; j <= F + 3; ++j) {
    add("F scan: 1*1 - acc 2^-" + std::to_string(j), -p2(-j), {{0, 1, 1}});
    const auto [x, y] = split(-j);
    add("F scan: acc 1 - 2^-" + std::to_string(j) + " product", 1, {{0, x, -y}});
  }
  // Reference exponent of a product: ea + eb (2.25 = 1.5 * 1.5 aligns as 2^0) or its own (2^1)?
  for (int j = F - 1; j <= F + 1; ++j)
    add("product exponent: 1.5*1.5 - acc 2^-" + std::to_string(j), -p2(-j), {{0, 1.5, 1.5}});
  // A zero factor beside a large one: does it take part in the alignment?
  {
    const auto [x, y] = split(-F);
    add("zero product: 1*1 - 2^-F + 0*max", 0, {{0, 1, 1}, {1, x, -y}, {2, 0, f.max_finite()}});
    add("zero product: 1*1 - 2^-F (no zero)", 0, {{0, 1, 1}, {1, x, -y}});
  }
  // Overflow of a finite sum, and of a single product (8-bit exponent inputs).
  add("overflow: acc FLT_MAX + max*1", 0x1.fffffep127, {{0, f.max_finite(), 1}});
  add("overflow: acc FLT_MAX + max*max", 0x1.fffffep127, {{0, f.max_finite(), f.max_finite()}});
  add("overflow: 2^100 * 2^100", 0, {{0, p2(100), p2(100)}});
  // Where does overflow start? The truncated sum reaching 2^128, or passing FLT_MAX + ulp/2?
  add("overflow edge: acc FLT_MAX + 2^102", 0x1.fffffep127, {{0, p2(51), p2(51)}});
  add("overflow edge: acc FLT_MAX + 2^103", 0x1.fffffep127, {{0, p2(51), p2(52)}});
  add("overflow edge: acc FLT_MAX + 2^103 + 2^102", 0x1.fffffep127, {{0, p2(51), p2(52)}, {1, p2(51), p2(51)}});
  add("overflow edge: acc FLT_MAX + 2^104", 0x1.fffffep127, {{0, p2(52), p2(52)}});
  add("overflow edge: acc -FLT_MAX - 2^104", -0x1.fffffep127, {{0, -p2(52), p2(52)}});
  // Subnormal results.
  add("subnormal result: acc 2^-126 - 2^-127", p2(-126), {{0, p2(-63), -p2(-64)}});
  add("subnormal result: acc 2^-140 alone", p2(-140), {});
  // Specials.
  add("inf * 0", 0, {{0, INFINITY, 0}});
  add("inf - inf", 0, {{0, INFINITY, 1}, {1, -INFINITY, 1}});
  add("inf + 1", 1, {{0, INFINITY, 1}});
  add("NaN input", 1, {{0, NAN, 1}});
  add("acc NaN", NAN, {{0, 1, 1}});
  add("acc -inf + 1*1", -INFINITY, {{0, 1, 1}});
  {
    Probe* z = add("-0 acc, every product -0", -0.0, {});
    std::fill(z->a.begin(), z->a.end(), -0.0);
    std::fill(z->b.begin(), z->b.end(), 1.0);
  }
  add("+1 - 1: sign of an exact zero", -1, {{0, 1, 1}});
  add("negative sum truncated to zero: -2^-75 * 2^-75", 0, {{0, -p2(-75), p2(-75)}});
  add("negative sum truncated to zero, acc -0", -0.0, {{0, -p2(-75), p2(-75)}});
  if (in == MmaInput::tf32) {
    add("tf32 low bits: (1 + 2^-11 + 2^-12) * 1", 0, {{0, 1 + p2(-11) + p2(-12), 1}})->fp32_inputs = true;
    add("tf32 low bits: -(1 + 2^-11 + 2^-12) * 1", 0, {{0, -(1 + p2(-11) + p2(-12)), 1}})->fp32_inputs = true;
  }
  if (is_fp8(in)) {  // the e8m13 result of the fp8 model (MMA-Sim)
    add("fp8: acc 1 + 2^-14, no products", 1 + p2(-14), {});
    add("fp8: acc 2^-12 + 1.5", p2(-12), {{0, 1.5, 1}});
    add("fp8: acc 2^-14 + 1.5", p2(-14), {{0, 1.5, 1}});
  }
  // Width of a fused step (FTTN): small terms at 0 and i, two instructions long. With F at or
  // above the output's precision p: acc 1 and 2^-p at 0 and i (1 + 2^-(p-1) when fused, else 1);
  // below it: 2^-(F+1) at 0 and 1 and a product 1 at i (1 when fused, 1 + 2^-F when not).
  const int p = spec.output.precision();
  for (int i = 1; i < 2 * k; ++i) {
    Probe* probe;
    if (F >= p) {
      const auto [x, y] = split(-p);
      probe = add("width: acc 1, 2^-" + std::to_string(p) + " at 0 and " + std::to_string(i), 1, {{0, x, y}, {i, x, y}},
                  "", 2);
    } else {
      if (i < 2) continue;
      const auto [x, y] = split(-(F + 1));
      probe = add("width: 2^-" + std::to_string(F + 1) + " at 0, 1, 1 at " + std::to_string(i), 0,
                  {{0, x, y}, {1, x, y}, {i, 1, 1}}, "", 2);
    }
    probe->scan = "width";
  }
  // Drop probes whose inputs the format cannot hold.
  const fp::Format& held = in == MmaInput::tf32 ? fp::tf32() : f;
  std::erase_if(list, [&](const Probe& pr) {
    for (const auto* v : {&pr.a, &pr.b})
      for (double x : *v) {
        if (std::isnan(x) || (std::isinf(x) && held.has_infinity())) continue;
        const fp::Format& fmt = pr.fp32_inputs ? code_format(in) : held;
        if (std::isinf(x) || fp::round_double(x, fmt, {fp::Mode::rne}).value != x) return true;
      }
    return false;
  });
  return list;
}

}  // namespace fplab::tools::gpu::mma
