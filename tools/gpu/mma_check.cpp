// gpu_mma_validate: the comparison of GPU outputs with the model: tallies, mismatch classes,
// the variants that reproduce them, examples for the JSON.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "fp/round.hpp"
#include "tools/gpu/mma_validate.hpp"

using nlohmann::json;

namespace fplab::tools::gpu::mma {

// ---- checking outputs against the model

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
  if (std::isnan(gpu) != std::isnan(want))
    s = std::isnan(gpu) ? "GPU NaN, model a number" : "model NaN, GPU a number";
  else if (std::isinf(gpu) != std::isinf(want))
    s = std::isinf(gpu) ? "GPU inf, model finite" : "model inf, GPU finite";
  else if (gpu == 0 && want == 0)
    s = "sign of zero";
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
          for (size_t kk = 0; kk < K; ++kk)
            ea.push_back(hex(A[i * K + kk], bits)), eb.push_back(hex(B[kk * 8 + j], bits));
          cls.examples.push_back({{"c", show(c)},
                                  {"a", ea},
                                  {"b", eb},
                                  {"gpu", show(gpu)},
                                  {"model", show(want)},
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

}  // namespace fplab::tools::gpu::mma
