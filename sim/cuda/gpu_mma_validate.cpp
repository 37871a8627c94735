// gpu_mma_validate: real tensor-core MMAs (gpu_mma.hpp: mma.sync and wgmma, one instruction at a
// time) against fplab's model of them, bit for bit, for tf32, fp16, bf16, e4m3 and e5m2 inputs
// with fp32 accumulation. The expectation is sim::fused_dot with tensor_core_model("tc-h100-*"),
// except for mma.sync with fp8 inputs, which sm_90 has no instruction for: ptxas lowers it to two
// fp16 HMMAs and an FADD (see candidates()).
//
//   gpu_mma_validate [--json FILE] [--samples FILE] [--scale X] [--inputs tf32,fp16,...]
//                    [--paths mma.sync,wgmma] [--threads N]
//   gpu_mma_validate --replay FILE [--json FILE]      (no GPU needed)
//   gpu_mma_validate --cpu-model [--scale X] ...       (no GPU needed: the model plays the chip)
//
// A device run: (1) an exact self-check of every kernel on integer data (any tensor core gives
// the exact sum; it tests the fragment and shared-memory layouts and picks the wgmma descriptor
// convention); (2) probe vectors of Fasi et al. 2021 and FTTN 2024 plus scans of F, N, the
// product exponent and the handling of zeros, overflow and the tf32 low bits; (3) 2^20 random
// single mma.sync instructions per input format (128 outputs each) in seven test sets, 7 x 2^11
// wgmma instructions (512 outputs each), and chains of instructions along K. Mismatches are
// grouped by what they look like, by whether the two chip rules of step() account for them, and
// by which variant of the model (F +- 1, N / 2, RNE result, ...) reproduces the chip; the
// variants are also scored on the first tiles of every set. The table comes last; exit status 1
// when a self-check fails or an output differs from the model in a way the chip rules do not
// explain. --samples writes the GPU results of the first tiles of each set; --replay re-creates
// their inputs (the generator is seeded per tile and uses no libm) and redoes the comparison on a
// machine without a GPU, so that the model can be studied without device time.
//
// One file of about 1000 lines, on purpose: the generator, the probes, the checker and the replay
// must share the test-set definitions exactly.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp/format.hpp"
#include "fp/round.hpp"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_mma.hpp"
#include "sim/cuda/gpu_stats.hpp"
#include "sim/tensor_core.hpp"

using namespace fplab;
using namespace fplab::sim::gpu;
using nlohmann::json;

namespace {

const std::vector<MmaInput> kInputs = {MmaInput::tf32, MmaInput::fp16, MmaInput::bf16, MmaInput::e4m3, MmaInput::e5m2};
const std::vector<MmaPath> kPaths = {MmaPath::mma_sync, MmaPath::wgmma};
double p2(int e) { return std::ldexp(1.0, e); }

// ---- formats and the model

// The format of the codes: tf32 codes are whole fp32 patterns.
const fp::Format& code_format(MmaInput in) {
  static const fp::Format f32 = fp::fp32(), f16 = fp::fp16(), b16 = fp::bf16(), e4 = fp::e4m3(), e5 = fp::e5m2();
  switch (in) {
    case MmaInput::tf32: return f32;
    case MmaInput::fp16: return f16;
    case MmaInput::bf16: return b16;
    case MmaInput::e4m3: return e4;
    default: return e5;
  }
}
bool is_fp8(MmaInput in) { return in == MmaInput::e4m3 || in == MmaInput::e5m2; }
double value(MmaInput in, uint32_t code) { return code_format(in).decode(code); }
uint32_t code_of(const fp::Format& f, double x) { return static_cast<uint32_t>(fp::round_double(x, f, {fp::Mode::rne}).bits); }
float as_float(uint32_t u) { return std::bit_cast<float>(u); }

std::string model_name(MmaInput in) {
  switch (in) {
    case MmaInput::tf32: return "tc-h100-tf32";
    case MmaInput::fp16: return "tc-h100-fp16";
    case MmaInput::bf16: return "tc-h100-bf16";
    case MmaInput::e4m3: return "tc-h100-fp8";
    default: return "tc-h100-fp8 (input e5m2)";
  }
}
sim::FusedAddSpec model_spec(MmaInput in) {
  sim::FusedAddSpec s = sim::tensor_core_model(in == MmaInput::e5m2 ? "tc-h100-fp8" : model_name(in));
  if (in == MmaInput::e5m2) s.input = fp::e5m2();
  return s;
}

// What the chip computes for one output, as fplab describes it, and variants of it that a mismatch
// may be explained by (the first of a list is the expectation itself).
//  - fused: sim::fused_dot with `spec` (the products of each instruction in `order`, if given).
//  - fp8 via fp16: mma.sync with fp8 inputs on sm_90 is no fp8 tensor-core operation: ptxas turns
//    it into two HMMA.16816.F32 on the values converted to fp16 (exactly), the first from zero
//    over the products in order[0..16), the second accumulating order[16..32); C is added by an
//    FADD (round to nearest) when `c_by_fadd`, else it is the first HMMA's accumulator.
struct Candidate {
  std::string name;
  sim::FusedAddSpec spec;
  std::vector<int> order;  // the products of each instruction in this order (empty: as they come)
  bool fp8_via_fp16 = false;
  bool c_by_fadd = true;
};
using Vec = std::vector<double>;

// Two things the chip does that sim::fused_multiply_add does not (docs/results/tensor-cores-h100.md):
// a sum beyond the output's range gives inf, though the result is truncated toward zero (the
// model saturates, as IEEE round-toward-zero does); and a zero result is always +0 (the model
// follows IEEE: -0 for a sum of -0 terms or a negative sum truncated to zero).
double step(double acc, const Vec& a, const Vec& b, size_t from, size_t n, const sim::FusedAddSpec& s, bool chip_rules) {
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

double evaluate(const Candidate& cand, double c, const Vec& a, const Vec& b, bool chip_rules = false) {
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
    for (size_t k = 0; k < a.size(); k += n) acc = step(acc, *pa, *pb, k, std::min(n, a.size() - k), cand.spec, chip_rules);
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
    add("F=25 fp32 result", [](auto& s) { s.output = fp::fp32(); s.fraction_bits = 25; });
  }
  return list;
}

// ---- test sets and the seeded generator

enum class Kind { normal, mixed, wide, align, cancel, subnormal, edge };
struct TestSet {
  std::string name;
  Kind kind;
  size_t k;  // 0: one instruction; otherwise a chain along K of this length
  size_t sync_tiles, wgmma_tiles;
};
const std::vector<TestSet> kSets = {
    {"normal", Kind::normal, 0, 1 << 18, 1 << 11},
    {"mixed signs, 2^+-8", Kind::mixed, 0, 1 << 17, 1 << 11},
    {"wide exponents", Kind::wide, 0, 1 << 17, 1 << 11},
    {"acc alignment", Kind::align, 0, 1 << 17, 1 << 11},
    {"cancellation", Kind::cancel, 0, 1 << 17, 1 << 11},
    {"subnormals", Kind::subnormal, 0, 1 << 17, 1 << 11},
    {"zero/inf/NaN/max", Kind::edge, 0, 1 << 17, 1 << 11},
    {"chain K=256 normal", Kind::normal, 256, 1 << 12, 1 << 8},
    {"chain K=256 mixed", Kind::mixed, 256, 1 << 12, 1 << 8},
    {"chain K=64 cancellation", Kind::cancel, 64, 1 << 12, 1 << 8},
    {"chain K=64 acc alignment", Kind::align, 64, 1 << 12, 1 << 8},
};
size_t set_k(const TestSet& s, MmaInput in) { return s.k ? s.k : static_cast<size_t>(mma_k(in)); }

struct Rng {  // splitmix64: cheap to seed per tile, the same on every machine
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  double normal() {  // Irwin-Hall: 12 uniforms - 6, no libm (replays bit for bit anywhere)
    double s = 0;
    for (int i = 0; i < 12; ++i) s += uniform();
    return s - 6;
  }
};
uint64_t tile_seed(MmaPath path, MmaInput in, size_t set, size_t tile) {
  Rng r{(static_cast<uint64_t>(path) << 56) ^ (static_cast<uint64_t>(in) << 48) ^ (uint64_t{set} << 40) ^ tile};
  return r.next();
}

int top_field(const fp::Format& f) { return f.finite_only ? (1 << f.exp_bits) - 1 : (1 << f.exp_bits) - 2; }
// A finite code: random sign and fraction, biased exponent field in [lo, hi] (clamped).
uint32_t random_code(const fp::Format& f, int lo, int hi, Rng& rng) {
  lo = std::clamp(lo, 0, top_field(f));
  hi = std::clamp(hi, lo, top_field(f));
  for (;;) {
    const uint64_t field = lo + rng.below(hi - lo + 1), fraction = rng.next() & ((uint64_t{1} << f.man_bits) - 1);
    const uint64_t code = (rng.next() & 1) << (f.width() - 1) | field << f.man_bits | fraction;
    if (std::isfinite(f.decode(code))) return static_cast<uint32_t>(code);
  }
}

uint32_t draw(const fp::Format& f, Kind kind, Rng& rng) {
  const int bias = f.bias();
  switch (kind) {
    case Kind::normal: return code_of(f, rng.normal());
    case Kind::mixed: return random_code(f, bias - 8, bias + 8, rng);
    case Kind::wide: return f.exp_bits == 8 ? random_code(f, bias - 60, bias + 60, rng) : random_code(f, 0, top_field(f), rng);
    case Kind::align: return rng.below(8) == 0 ? 0 : random_code(f, bias - 2, bias + 2, rng);
    case Kind::cancel: return random_code(f, bias - 3, bias + 3, rng);
    case Kind::subnormal: {
      const uint64_t r = rng.below(6);
      if (r < 2) return random_code(f, 0, 0, rng);
      if (r == 2) return random_code(f, 1, 1, rng);
      if (r == 3 && f.exp_bits == 8) return random_code(f, 1, bias / 2, rng);
      return random_code(f, bias - 4, bias + 4, rng);
    }
    case Kind::edge: {
      const uint64_t r = rng.below(32);
      const bool negative = rng.next() & 1;
      if (r < 2) return static_cast<uint32_t>(uint64_t{negative} << (f.width() - 1));
      if (r == 2) return static_cast<uint32_t>(f.has_infinity() ? f.infinity_bits(negative) : f.max_finite_bits(negative));
      if (r == 3) return static_cast<uint32_t>(f.quiet_nan_bits(false));
      if (r < 6) return static_cast<uint32_t>(f.max_finite_bits(negative));
      return code_of(f, rng.normal());
    }
  }
  return 0;
}

// C for output (i, j): some sets place it relative to the largest product of that output.
float draw_c(Kind kind, Rng& rng, double largest_product, double sum) {
  const fp::Format f32 = fp::fp32();
  auto relative = [&](int lo, int hi) {
    if (largest_product == 0 || !std::isfinite(largest_product)) return static_cast<float>(rng.normal());
    const int e = std::clamp(std::ilogb(largest_product) + lo + static_cast<int>(rng.below(hi - lo + 1)), -149, 127);
    const double m = 1 + static_cast<double>(rng.next() >> 41) * 0x1p-23;
    return as_float(code_of(f32, (rng.next() & 1 ? -m : m) * p2(e)));
  };
  switch (kind) {
    case Kind::normal: return static_cast<float>(4 * rng.normal());
    case Kind::mixed: return as_float(random_code(f32, 127 - 10, 127 + 10, rng));
    case Kind::wide: return relative(-30, 6);
    case Kind::align: return relative(-34, 34);
    case Kind::cancel: {
      uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(-sum));
      if (rng.below(2) && u << 1) u ^= 1u << rng.below(3);  // near, not exact, cancellation
      return as_float(u);
    }
    case Kind::subnormal: {
      const uint64_t r = rng.below(4);
      if (r == 0) return as_float(random_code(f32, 0, 0, rng));
      if (r == 1) return as_float(random_code(f32, 1, 3, rng));
      if (r == 2) return rng.next() & 1 ? -0.0f : 0.0f;
      return relative(-10, 10);
    }
    case Kind::edge: {
      const uint64_t r = rng.below(16);
      const float sign = rng.next() & 1 ? -1.0f : 1.0f;
      if (r < 2) return sign * 0.0f;
      if (r == 2) return sign * INFINITY;
      if (r == 3) return NAN;
      if (r == 4) return sign * 0x1.fffffep127f;
      if (r == 5) return as_float(random_code(f32, 0, 0, rng));
      return static_cast<float>(4 * rng.normal());
    }
  }
  return 0;
}

// Tile `index` of a set: A (rows x K), B (K x 8), C (rows x 8), from its own seed.
void generate_tile(MmaPath path, MmaInput in, size_t set_index, size_t index, int rows, size_t K, uint32_t* A,
                   uint32_t* B, float* C) {
  const TestSet& set = kSets[set_index];
  const fp::Format& f = code_format(in);
  Rng rng{tile_seed(path, in, set_index, index)};
  for (size_t i = 0; i < rows * K; ++i) A[i] = draw(f, set.kind, rng);
  for (size_t i = 0; i < K * 8; ++i) B[i] = draw(f, set.kind, rng);
  if (set.kind == Kind::cancel) {  // pairs of K indices whose products cancel, exactly or nearly
    const uint32_t sign = 1u << (f.width() - 1), unit = in == MmaInput::tf32 ? 1u << 13 : 1u;
    for (size_t kk = 0; kk + 1 < K; kk += 2) {
      if (rng.below(4) == 0) continue;
      for (int i = 0; i < rows; ++i) A[i * K + kk + 1] = A[i * K + kk];
      const bool near = rng.below(2);
      for (int j = 0; j < 8; ++j) {
        uint32_t code = B[kk * 8 + j] ^ sign;
        if (near && (code & (sign - 1)) > unit) code += rng.next() & 1 ? unit : 0u - unit;
        B[(kk + 1) * 8 + j] = code;
      }
    }
  }
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < 8; ++j) {
      double largest = 0, sum = 0;
      for (size_t kk = 0; kk < K; ++kk) {
        const double p = value(in, A[i * K + kk]) * value(in, B[kk * 8 + j]);
        if (std::isfinite(p)) largest = std::max(largest, std::fabs(p)), sum += p;
      }
      C[i * 8 + j] = draw_c(set.kind, rng, largest, sum);
    }
}

// ---- checking outputs against the model

struct ClassInfo {
  int64_t count = 0, max_ulps = 0, detailed = 0;
  std::map<std::string, int64_t> explained;  // candidate -> mismatches of the class it reproduces
  json examples = json::array();
};
struct Tally {
  int64_t outputs = 0, identical = 0, max_ulps = 0, detailed = 0;
  int64_t by_rules = 0;  // mismatches that the two chip rules (see step()) account for exactly
  std::map<std::string, ClassInfo> classes;
  std::vector<int64_t> candidate_agree;
  int64_t candidate_outputs = 0;
  void merge(const Tally& o) {
    outputs += o.outputs, identical += o.identical, detailed += o.detailed, by_rules += o.by_rules;
    max_ulps = std::max(max_ulps, o.max_ulps);
    candidate_outputs += o.candidate_outputs;
    candidate_agree.resize(std::max(candidate_agree.size(), o.candidate_agree.size()));
    for (size_t i = 0; i < o.candidate_agree.size(); ++i) candidate_agree[i] += o.candidate_agree[i];
    for (const auto& [name, c] : o.classes) {
      ClassInfo& mine = classes[name];
      mine.count += c.count, mine.detailed += c.detailed;
      mine.max_ulps = std::max(mine.max_ulps, c.max_ulps);
      for (const auto& [cand, n] : c.explained) mine.explained[cand] += n;
      for (const auto& e : c.examples)
        if (mine.examples.size() < 3) mine.examples.push_back(e);
    }
  }
};

constexpr int64_t kDetailedPerThread = 400;  // mismatches per thread and set run against every variant

std::string hex(uint32_t code, int bits) {
  char s[16];
  std::snprintf(s, sizeof s, "%0*x", bits / 4, code);
  return s;
}
std::string show(double x) {
  char s[48];
  std::snprintf(s, sizeof s, "%a", x);
  return s;
}

// What a mismatch looks like: how the results differ, and what is special about its inputs.
std::string classify(MmaInput in, const std::vector<double>& a, const std::vector<double>& b, double c, float gpu,
                     float want) {
  std::string s;
  if (std::isnan(gpu) != std::isnan(want)) s = std::isnan(gpu) ? "GPU NaN, model a number" : "model NaN, GPU a number";
  else if (std::isinf(gpu) != std::isinf(want)) s = std::isinf(gpu) ? "GPU inf, model finite" : "model inf, GPU finite";
  else if (gpu == 0 && want == 0) s = "sign of zero";
  else {
    const int64_t u = stats::ulps(gpu, want);
    s = u == 1 ? "1 ulp" : u <= 16 ? "2-16 ulps" : "> 16 ulps";
  }
  const double min_input = in == MmaInput::tf32 ? p2(-126) : code_format(in).min_normal();
  bool sub_in = false, zero_times_large = false, special = !std::isfinite(c);
  for (size_t k = 0; k < a.size(); ++k) {
    for (double x : {a[k], b[k]}) {
      sub_in |= x != 0 && std::fabs(x) < min_input;
      special |= !std::isfinite(x);
    }
    zero_times_large |= (a[k] == 0 && std::fabs(b[k]) >= 2) || (b[k] == 0 && std::fabs(a[k]) >= 2);
  }
  auto tiny = [](double x) { return x != 0 && std::fabs(x) < p2(-126); };
  if (special) s += "; inf/NaN input";
  if (sub_in) s += "; subnormal input";
  if (tiny(c)) s += "; subnormal acc";
  if (tiny(gpu) || tiny(want)) s += "; subnormal result";
  if (zero_times_large) s += "; zero times |x| >= 2";
  return s;
}

// Compares the outputs of a chunk of tiles with the model (thread `part` of `parts` takes every
// parts-th tile); tiles whose index in the set is below `sample_tiles` also score every variant.
void check_part(MmaInput in, const MmaTiles& t, const std::vector<float>& d, size_t first_index, size_t sample_tiles,
                const std::vector<Candidate>& cands, int part, int parts, Tally& tally) {
  const size_t K = t.k, rows = t.rows;
  const int bits = mma_code_bits(in);
  std::vector<double> a(K), b(K);
  tally.candidate_agree.assign(cands.size(), 0);
  for (size_t tile = part; tile < t.tiles; tile += parts) {
    const uint32_t* A = &t.a[tile * rows * K];
    const uint32_t* B = &t.b[tile * K * 8];
    const bool sample = first_index + tile < sample_tiles;
    for (size_t i = 0; i < rows; ++i)
      for (size_t j = 0; j < 8; ++j) {
        for (size_t kk = 0; kk < K; ++kk) a[kk] = value(in, A[i * K + kk]), b[kk] = value(in, B[kk * 8 + j]);
        const double c = t.c[(tile * rows + i) * 8 + j];
        const float gpu = d[(tile * rows + i) * 8 + j];
        const auto want = static_cast<float>(evaluate(cands[0], c, a, b));
        const bool same = stats::same_bits(gpu, want);
        ++tally.outputs;
        if (sample) {
          ++tally.candidate_outputs;
          tally.candidate_agree[0] += same;
          for (size_t ci = 1; ci < cands.size(); ++ci)
            tally.candidate_agree[ci] += stats::same_bits(gpu, static_cast<float>(evaluate(cands[ci], c, a, b)));
        }
        if (same) {
          ++tally.identical;
          continue;
        }
        const int64_t u = stats::ulps(gpu, want);
        tally.max_ulps = std::max(tally.max_ulps, u < 0 ? int64_t{1} << 32 : u);
        const bool ruled = stats::same_bits(gpu, static_cast<float>(evaluate(cands[0], c, a, b, true)));
        tally.by_rules += ruled;
        ClassInfo& cls = tally.classes[(ruled ? "chip rule: " : "") + classify(in, a, b, c, gpu, want)];
        ++cls.count;
        cls.max_ulps = std::max(cls.max_ulps, u < 0 ? int64_t{1} << 32 : u);
        if (tally.detailed >= kDetailedPerThread) continue;
        ++tally.detailed, ++cls.detailed;
        json reproduced = json::array();
        for (size_t ci = 1; ci < cands.size(); ++ci)
          if (stats::same_bits(gpu, static_cast<float>(evaluate(cands[ci], c, a, b)))) {
            ++cls.explained[cands[ci].name];
            reproduced.push_back(cands[ci].name);
          }
        if (cls.examples.size() < 3) {
          json ea = json::array(), eb = json::array();
          for (size_t kk = 0; kk < K; ++kk) ea.push_back(hex(A[i * K + kk], bits)), eb.push_back(hex(B[kk * 8 + j], bits));
          cls.examples.push_back({{"c", show(c)}, {"a", ea}, {"b", eb}, {"gpu", show(gpu)}, {"model", show(want)},
                                  {"reproduced_by", reproduced}});
        }
      }
  }
}

Tally check(MmaInput in, const MmaTiles& t, const std::vector<float>& d, size_t first_index, size_t sample_tiles,
            const std::vector<Candidate>& cands, int threads) {
  std::vector<Tally> parts(threads);
  std::vector<std::thread> pool;
  for (int p = 0; p < threads; ++p)
    pool.emplace_back([&, p] { check_part(in, t, d, first_index, sample_tiles, cands, p, threads, parts[p]); });
  for (auto& th : pool) th.join();
  Tally total;
  for (const Tally& p : parts) total.merge(p);
  return total;
}

MmaTiles make_tiles(MmaPath path, MmaInput in, size_t set_index, size_t first, size_t count, int threads) {
  MmaTiles t;
  t.tiles = count;
  t.k = set_k(kSets[set_index], in);
  t.rows = mma_rows(path);
  t.a.resize(count * t.rows * t.k);
  t.b.resize(count * t.k * 8);
  t.c.resize(count * t.rows * 8);
  std::vector<std::thread> pool;
  for (int p = 0; p < threads; ++p)
    pool.emplace_back([&, p] {
      for (size_t i = p; i < count; i += threads)
        generate_tile(path, in, set_index, first + i, t.rows, t.k, &t.a[i * t.rows * t.k], &t.b[i * t.k * 8],
                      &t.c[i * t.rows * 8]);
    });
  for (auto& th : pool) th.join();
  return t;
}

// ---- probes: one dot product replicated over every output of a tile

struct Probe {
  std::string name;
  double acc = 0;
  std::vector<double> a, b;  // K = instructions * k, zeros where not set
  std::string published;     // a published H100 result, where there is one
  bool fp32_inputs = false;  // values are fp32, not necessarily of the input format (tf32 truncation)
  std::string scan;          // width probes: the scan they belong to (printed as one line)
};

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
  add("FTTN rounding: 2^-14 * 3*2^-10 + 1*2", 0, {{0, p2(-14), p2(-9) + p2(-10)}, {1, 1, 2}}, h ? "0x1p+1 (FTTN: RZ)" : "");
  add("FTTN rounding: negative", 0, {{0, p2(-14), -(p2(-9) + p2(-10))}, {1, 1, -2}}, h ? "-0x1p+1 (FTTN: RZ)" : "");
  add("FTTN rounding: 2 + 2^-14 * 3*2^-10", 2, {{0, p2(-14), p2(-9) + p2(-10)}}, h ? "0x1p+1 (FTTN: RZ)" : "");
  add("Fasi D2: 4 * 2^-24 + (1 - 2^-24)", 1 - p2(-24), {{0, 1, p2(-24)}, {1, 1, p2(-24)}, {2, 1, p2(-24)}, {3, 1, p2(-24)}});
  add("Fasi D3: 1 - 2^-24 + (-1 + 2^-24)", -1 + p2(-24), {{0, 1, 1}, {1, 1, -p2(-24)}});
  add("Fasi D4 carry-out: 1+1+1+2^-23 + (1+2^-22+2^-23)", 1 + p2(-22) + p2(-23), {{0, 1, 1}, {1, 1, 1}, {2, 1, 1}, {3, 1, p2(-23)}});
  add("Fasi C: 1*2 + 1*3*2^-24", 0, {{0, 1, 2}, {1, 1, p2(-23) + p2(-24)}});
  add("Fasi B: 4 * (1 - 2^-11)^2", 0, {{0, 1 - p2(-11), 1 - p2(-11)}, {1, 1 - p2(-11), 1 - p2(-11)},
                                       {2, 1 - p2(-11), 1 - p2(-11)}, {3, 1 - p2(-11), 1 - p2(-11)}});
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
      probe = add("width: acc 1, 2^-" + std::to_string(p) + " at 0 and " + std::to_string(i), 1, {{0, x, y}, {i, x, y}}, "", 2);
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

// ---- the device run

struct Options {
  std::string json_path, samples_path, replay_path;
  double scale = 1;
  int threads = 0;
  bool cpu_model = false;
  std::vector<MmaInput> inputs = kInputs;
  std::vector<MmaPath> paths = kPaths;
};

constexpr size_t kSampleTiles[2] = {256, 32};  // per set, mma.sync and wgmma: scored by every variant, and saved

// Integer data, exact for any tensor core: does the kernel put every value where it belongs?
int64_t self_check(MmaInput in, MmaPath path, MmaOptions options, std::string& first_error) {
  const fp::Format& f = code_format(in);
  MmaTiles t;
  t.tiles = 16, t.k = 2 * mma_k(in), t.rows = mma_rows(path);
  Rng rng{1234 + static_cast<uint64_t>(in)};
  for (size_t i = 0; i < t.tiles * t.rows * t.k; ++i) t.a.push_back(code_of(f, static_cast<double>(rng.below(9)) - 4));
  for (size_t i = 0; i < t.tiles * t.k * 8; ++i) t.b.push_back(code_of(f, static_cast<double>(rng.below(9)) - 4));
  for (size_t i = 0; i < t.tiles * t.rows * 8; ++i) t.c.push_back(static_cast<float>(rng.below(129)) - 64);
  const std::vector<float> d = run_mma(in, path, t, options);
  int64_t wrong = 0;
  for (size_t tile = 0; tile < t.tiles; ++tile)
    for (int i = 0; i < t.rows; ++i)
      for (int j = 0; j < 8; ++j) {
        double sum = t.c[(tile * t.rows + i) * 8 + j];
        for (size_t kk = 0; kk < t.k; ++kk)
          sum += value(in, t.a[(tile * t.rows + i) * t.k + kk]) * value(in, t.b[(tile * t.k + kk) * 8 + j]);
        const float got = d[(tile * t.rows + i) * 8 + j];
        if (got != static_cast<float>(sum) && wrong++ == 0)
          first_error = "tile " + std::to_string(tile) + " D[" + std::to_string(i) + "][" + std::to_string(j) +
                        "] = " + show(got) + ", exact " + show(sum);
      }
  return wrong;
}

struct Row {
  MmaPath path;
  MmaInput input;
  size_t set;
  size_t k = 0, tiles = 0;
  Tally tally;
};

void print_classes(const Row& r, const std::vector<Candidate>& cands) {
  std::vector<std::pair<std::string, ClassInfo>> classes(r.tally.classes.begin(), r.tally.classes.end());
  std::sort(classes.begin(), classes.end(), [](auto& x, auto& y) { return x.second.count > y.second.count; });
  for (const auto& [name, c] : classes) {
    std::string explained;
    for (const Candidate& cand : cands)
      if (auto it = c.explained.find(cand.name); it != c.explained.end())
        explained += (explained.empty() ? "" : ", ") + cand.name + " " + std::to_string(it->second) + "/" + std::to_string(c.detailed);
    std::printf("    %-62s %10lld  max %lld ulps; reproduced by: %s\n", name.c_str(), static_cast<long long>(c.count),
                static_cast<long long>(c.max_ulps), explained.empty() ? "none of the variants" : explained.c_str());
    if (!c.examples.empty()) std::printf("      e.g. %s\n", c.examples[0].dump().c_str());
  }
}

json row_json(const Row& r, const std::vector<Candidate>& cands) {
  json classes = json::object();
  for (const auto& [name, c] : r.tally.classes)
    classes[name] = {{"count", c.count}, {"max_ulps", c.max_ulps}, {"detailed", c.detailed},
                     {"reproduced_by", c.explained}, {"examples", c.examples}};
  json variants = json::object();
  for (size_t i = 0; i < cands.size() && i < r.tally.candidate_agree.size(); ++i)
    variants[cands[i].name] = r.tally.candidate_agree[i];
  return {{"path", to_string(r.path)}, {"input", to_string(r.input)}, {"instruction", mma_instruction(r.input, r.path)},
          {"model", model_name(r.input, r.path)}, {"set", kSets[r.set].name}, {"k", r.k}, {"tiles", r.tiles},
          {"outputs", r.tally.outputs}, {"identical", r.tally.identical}, {"identical_with_chip_rules", r.tally.identical + r.tally.by_rules},
          {"max_ulps", r.tally.max_ulps},
          {"classes", classes}, {"variant_outputs", r.tally.candidate_outputs}, {"variant_identical", variants}};
}

// Scores of the variants over the sample tiles of every set of one (path, input).
void print_variants(const std::vector<Row>& rows, MmaPath path, MmaInput in, const std::vector<Candidate>& cands) {
  std::vector<int64_t> agree(cands.size(), 0);
  int64_t total = 0;
  for (const Row& r : rows)
    if (r.path == path && r.input == in) {
      total += r.tally.candidate_outputs;
      for (size_t i = 0; i < r.tally.candidate_agree.size(); ++i) agree[i] += r.tally.candidate_agree[i];
    }
  if (total == 0) return;
  std::printf("  variants of %s on %lld sampled outputs of %s %s (bit-identical %%):", model_name(in, path).c_str(),
              static_cast<long long>(total), to_string(path), to_string(in));
  for (size_t i = 0; i < cands.size(); ++i)
    std::printf("%s %s %.4f", i % 4 == 0 ? "\n   " : ";", cands[i].name.c_str(), 100.0 * agree[i] / total);
  std::printf("\n");
}

std::string percent(int64_t part, int64_t whole) {
  char s[32];
  if (part == whole) return "100%";
  std::snprintf(s, sizeof s, "%.4f%%", std::floor(1e6 * static_cast<double>(part) / whole) / 1e4);  // never shows 100
  return s;
}

void print_table(const std::vector<Row>& rows) {
  std::printf("\ninput | path | model | test set | K | tiles | outputs | bit-identical | with the chip rules | max ulps | "
              "mismatch classes\n");
  std::printf("---|---|---|---|---|---|---|---|---|---|---\n");
  for (const Row& r : rows) {
    std::string classes;
    for (const auto& [name, c] : r.tally.classes)
      classes += (classes.empty() ? "" : "; ") + name + ": " + std::to_string(c.count);
    std::printf("%s | %s | %s | %s | %zu | %zu | %lld | %s | %s | %lld | %s\n", to_string(r.input), to_string(r.path),
                model_name(r.input, r.path).c_str(), kSets[r.set].name.c_str(), r.k, r.tiles, static_cast<long long>(r.tally.outputs),
                percent(r.tally.identical, r.tally.outputs).c_str(),
                percent(r.tally.identical + r.tally.by_rules, r.tally.outputs).c_str(),
                static_cast<long long>(r.tally.max_ulps), classes.empty() ? "-" : classes.c_str());
  }
}

struct ProbeResult {
  std::string line;
  bool ok = true;
  json j;
};

std::vector<float> execute(const Options& o, MmaInput in, MmaPath path, const MmaTiles& t, MmaOptions options);

ProbeResult run_probe(MmaInput in, MmaPath path, const Probe& p, MmaOptions options, const Options& o) {
  const fp::Format& f = code_format(in);
  MmaTiles t;
  t.tiles = 1, t.k = p.a.size(), t.rows = mma_rows(path);
  for (int i = 0; i < t.rows; ++i)
    for (double x : p.a) t.a.push_back(static_cast<uint32_t>(std::isnan(x) ? f.quiet_nan_bits(false) : f.encode(x)));
  for (size_t kk = 0; kk < t.k; ++kk)
    for (int j = 0; j < 8; ++j) t.b.push_back(static_cast<uint32_t>(std::isnan(p.b[kk]) ? f.quiet_nan_bits(false) : f.encode(p.b[kk])));
  t.c.assign(t.rows * 8, static_cast<float>(p.acc));
  const std::vector<float> d = execute(o, in, path, t, options);
  std::vector<double> a, b;
  for (size_t kk = 0; kk < t.k; ++kk) a.push_back(value(in, t.a[kk])), b.push_back(value(in, t.b[kk * 8]));
  const Candidate model = candidates(in, path)[0];
  const auto want = static_cast<float>(evaluate(model, p.acc, a, b));
  const auto ruled = static_cast<float>(evaluate(model, p.acc, a, b, true));
  const bool uniform = std::all_of(d.begin(), d.end(), [&](float x) { return stats::same_bits(x, d[0]); });
  ProbeResult r;
  r.ok = uniform && stats::same_bits(d[0], want);
  const bool by_rules = uniform && !r.ok && stats::same_bits(d[0], ruled);
  char line[512];
  std::snprintf(line, sizeof line, "  %-50s GPU %-16s model %-16s %s%s%s", p.name.c_str(), show(d[0]).c_str(),
                show(want).c_str(), r.ok ? "ok" : by_rules ? "differs: a chip rule" : "DIFFERS",
                uniform ? "" : " (outputs of the tile differ!)", p.published.empty() ? "" : ("; published " + p.published).c_str());
  r.line = line;
  r.j = {{"probe", p.name}, {"gpu", show(d[0])}, {"model", show(want)}, {"identical", r.ok}, {"by_chip_rules", by_rules},
         {"published", p.published}, {"all_outputs_equal", uniform}};
  return r;
}

// The chip, or with --cpu-model the model standing in for it (a dry run of everything but the
// kernels, for machines without a GPU).
std::vector<float> execute(const Options& o, MmaInput in, MmaPath path, const MmaTiles& t, MmaOptions options) {
  if (!o.cpu_model) return run_mma(in, path, t, options);
  std::vector<float> d(t.tiles * t.rows * 8);
  std::vector<double> a(t.k), b(t.k);
  const Candidate model = candidates(in, path)[0];
  for (size_t tile = 0; tile < t.tiles; ++tile)
    for (int i = 0; i < t.rows; ++i)
      for (int j = 0; j < 8; ++j) {
        for (size_t kk = 0; kk < t.k; ++kk)
          a[kk] = value(in, t.a[(tile * t.rows + i) * t.k + kk]), b[kk] = value(in, t.b[(tile * t.k + kk) * 8 + j]);
        const size_t at = (tile * t.rows + i) * 8 + j;
        d[at] = static_cast<float>(evaluate(model, t.c[at], a, b, true));
      }
  return d;
}

// Self-check, probes and random sets of one instruction; false when the self-check fails.
bool run_instruction(const Options& o, MmaInput in, MmaPath path, int threads, json& out, std::ofstream& samples,
                     std::vector<Row>& rows) {
  const std::vector<Candidate> cands = candidates(in, path);
  // (1) exact self-check; for wgmma it picks the descriptor convention.
  MmaOptions options;
  std::string error;
  int64_t wrong = o.cpu_model ? 0 : self_check(in, path, options, error);
  if (wrong && path == MmaPath::wgmma) {
    std::string error2;
    options.swap_descriptor_offsets = true;
    if (self_check(in, path, options, error2) == 0) wrong = 0;
    else options.swap_descriptor_offsets = false;
  }
  std::printf("\n== %s: %s\nself-check (integer data, exact): %s%s\n", mma_instruction(in, path).c_str(),
              model_name(in, path).c_str(), wrong ? ("FAILED, " + std::to_string(wrong) + " wrong; first: " + error).c_str() : "pass",
              options.swap_descriptor_offsets ? " (descriptor offsets swapped)" : "");
  out["self_check"].push_back({{"instruction", mma_instruction(in, path)}, {"wrong", wrong}, {"first", error},
                               {"swapped_descriptor_offsets", options.swap_descriptor_offsets}});
  if (wrong) return false;
  // (2) probes.
  std::map<std::string, std::pair<std::string, std::string>> scans;  // positions fused with 0: GPU, model
  for (const Probe& p : probes(in, path)) {
    const ProbeResult r = run_probe(in, path, p, options, o);
    json j = r.j;
    j["instruction"] = mma_instruction(in, path);
    out["probes"].push_back(j);
    if (p.scan.empty()) {
      std::printf("%s\n", r.line.c_str());
      continue;
    }
    // acc 1: fused when the result is not 1; acc 0: fused when it is 1 (see probes()).
    auto& [gpu, model] = scans[p.scan];
    const std::string pos = p.name.substr(p.name.rfind(' ') + 1);
    if ((p.acc != 0) != (r.j["gpu"] == show(1.0))) gpu += (gpu.empty() ? "" : ",") + pos;
    if ((p.acc != 0) != (r.j["model"] == show(1.0))) model += (model.empty() ? "" : ",") + pos;
  }
  for (const auto& [name, s] : scans)
    std::printf("  %s scan, positions in the fused step of position 0: GPU {%s}; model {%s} %s\n", name.c_str(),
                s.first.c_str(), s.second.c_str(), s.first == s.second ? "ok" : "DIFFERS");
  // (3) random sets.
  const size_t chunk = path == MmaPath::mma_sync ? 1 << 15 : 1 << 10;
  for (size_t si = 0; si < kSets.size(); ++si) {
    const TestSet& set = kSets[si];
    Row row{path, in, si, set_k(set, in), 0, {}};
    const size_t full = path == MmaPath::mma_sync ? set.sync_tiles : set.wgmma_tiles;
    row.tiles = std::max<size_t>(1, static_cast<size_t>(static_cast<double>(full) * o.scale));
    // Chains cost K / k steps an output: fewer sampled tiles.
    const size_t sample_tiles = std::min(row.tiles, kSampleTiles[static_cast<int>(path)] / (set.k ? 4 : 1));
    for (size_t first = 0; first < row.tiles; first += chunk) {
      const size_t count = std::min(chunk, row.tiles - first);
      const MmaTiles t = make_tiles(path, in, si, first, count, threads);
      const std::vector<float> d = execute(o, in, path, t, options);
      if (first == 0 && samples.is_open()) {
        const int32_t head[4] = {static_cast<int32_t>(path), static_cast<int32_t>(in), static_cast<int32_t>(si),
                                 static_cast<int32_t>(sample_tiles)};
        samples.write(reinterpret_cast<const char*>(head), sizeof head);
        samples.write(reinterpret_cast<const char*>(d.data()), sample_tiles * t.rows * 8 * sizeof(float));
      }
      row.tally.merge(check(in, t, d, first, sample_tiles, cands, threads));
    }
    std::printf("  %-26s K=%-4zu %8zu tiles %11lld outputs  bit-identical %s (with the chip rules %s)  max %lld ulps\n",
                set.name.c_str(), row.k, row.tiles, static_cast<long long>(row.tally.outputs),
                percent(row.tally.identical, row.tally.outputs).c_str(),
                percent(row.tally.identical + row.tally.by_rules, row.tally.outputs).c_str(),
                static_cast<long long>(row.tally.max_ulps));
    print_classes(row, cands);
    out["rows"].push_back(row_json(row, cands));
    rows.push_back(std::move(row));
    std::fflush(stdout);
  }
  print_variants(rows, path, in, cands);
  return true;
}

int device_run(const Options& o) {
  std::string why;
  if (!o.cpu_model && !device_available(&why)) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 0;
  }
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  const std::string device = o.cpu_model ? "no GPU: the model stands in for the chip (--cpu-model)" : device_info().describe();
  std::printf("%s; %d host threads\n", device.c_str(), threads);
  json out = {{"device", device}, {"self_check", json::array()}, {"probes", json::array()}, {"rows", json::array()}};
  std::ofstream samples;
  if (!o.samples_path.empty()) {
    samples.open(o.samples_path, std::ios::binary);
    samples.write("FPLABMMA1\n", 10);
  }
  bool failed = false;
  std::vector<Row> rows;
  // mma.sync first: a CUDA error (sticky for the process) in the wgmma kernels loses only those.
  for (MmaPath path : o.paths)
    for (MmaInput in : o.inputs) {
      try {
        failed |= !run_instruction(o, in, path, threads, out, samples, rows);
      } catch (const CudaError& e) {
        std::printf("\n%s: CUDA error: %s\n", mma_instruction(in, path).c_str(), e.what());
        out["errors"].push_back(mma_instruction(in, path) + ": " + e.what());
        failed = true;
      }
    }
  for (const Row& r : rows) failed |= r.tally.identical + r.tally.by_rules != r.tally.outputs;
  print_table(rows);
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(1) << "\n";
  return failed ? 1 : 0;
}

// ---- replay of saved samples, without a GPU

int replay(const Options& o) {
  std::ifstream in(o.replay_path, std::ios::binary);
  char magic[10];
  if (!in.read(magic, 10) || std::memcmp(magic, "FPLABMMA1\n", 10) != 0) {
    std::fprintf(stderr, "gpu_mma_validate: %s is not a samples file\n", o.replay_path.c_str());
    return 2;
  }
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<Row> rows;
  json out = {{"replay", o.replay_path}, {"rows", json::array()}};
  int32_t head[4];
  while (in.read(reinterpret_cast<char*>(head), sizeof head)) {
    const auto path = static_cast<MmaPath>(head[0]);
    const auto input = static_cast<MmaInput>(head[1]);
    const size_t si = head[2], tiles = head[3];
    const MmaTiles t = make_tiles(path, input, si, 0, tiles, threads);
    std::vector<float> d(tiles * t.rows * 8);
    in.read(reinterpret_cast<char*>(d.data()), d.size() * sizeof(float));
    if (std::find(o.inputs.begin(), o.inputs.end(), input) == o.inputs.end()) continue;
    const std::vector<Candidate> cands = candidates(input, path);
    Row row{path, input, si, t.k, tiles, check(input, t, d, 0, tiles, cands, threads)};
    std::printf("%s %s %-26s bit-identical %s\n", to_string(input), to_string(path), kSets[si].name.c_str(),
                percent(row.tally.identical, row.tally.outputs).c_str());
    print_classes(row, cands);
    out["rows"].push_back(row_json(row, cands));
    rows.push_back(std::move(row));
  }
  for (MmaInput input : o.inputs)
    for (MmaPath path : kPaths) print_variants(rows, path, input, candidates(input, path));
  print_table(rows);
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(1) << "\n";
  return 0;
}

template <typename T>
std::vector<T> parse_list(const std::string& text, const std::vector<T>& all) {
  std::vector<T> chosen;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    auto it = std::find_if(all.begin(), all.end(), [&](T x) { return item == to_string(x); });
    if (it == all.end()) throw std::invalid_argument("unknown item '" + item + "'");
    chosen.push_back(*it);
    start = end + 1;
  }
  return chosen;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
        return argv[++i];
      };
      if (arg == "--json") o.json_path = next();
      else if (arg == "--samples") o.samples_path = next();
      else if (arg == "--replay") o.replay_path = next();
      else if (arg == "--scale") o.scale = std::stod(next());
      else if (arg == "--threads") o.threads = std::stoi(next());
      else if (arg == "--cpu-model") o.cpu_model = true;
      else if (arg == "--inputs") o.inputs = parse_list(next(), kInputs);
      else if (arg == "--paths") o.paths = parse_list(next(), kPaths);
      else throw std::invalid_argument("unknown argument " + arg);
    }
    if (!o.replay_path.empty()) return replay(o);
    return device_run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_mma_validate: %s\n", e.what());
    return 2;
  }
}
