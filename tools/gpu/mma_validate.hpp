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
//   gpu_mma_validate --help
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
// This header holds what the parts share, the test-set definitions above all, which the generator,
// the probes, the checker and the replay must agree on exactly:
//   mma_model.cpp       the model of one output, the chip rules, the variants (candidates)
//   mma_test_sets.cpp   the test sets and their seeded generator
//   mma_probes.cpp      probe vectors and scans
//   mma_check.cpp       outputs against the model: tallies, mismatch classes
//   mma_report.cpp      printed rows and tables, a row's JSON
//   mma_device_run.cpp  the device (or --cpu-model) run and the samples file
//   mma_replay.cpp      --replay
//   mma_validate_main.cpp  options and main
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp/format.hpp"
#include "sim/cuda/gpu_mma.hpp"
#include "sim/cuda/gpu_stats.hpp"
#include "sim/tensor_core.hpp"
#include "tools/gpu/tool_rng.hpp"

namespace fplab::tools::gpu::mma {

using namespace fplab::sim::gpu;
using nlohmann::json;

extern const std::vector<MmaInput> kInputs;
extern const std::vector<MmaPath> kPaths;
double p2(int e);

// ---- formats and the model (mma_model.cpp)
const fp::Format& code_format(MmaInput in);  // tf32 codes are whole fp32 patterns
bool is_fp8(MmaInput in);
double value(MmaInput in, uint32_t code);
uint32_t code_of(const fp::Format& f, double x);
float as_float(uint32_t u);
std::string model_name(MmaInput in);
std::string model_name(MmaInput in, MmaPath path);
sim::FusedAddSpec model_spec(MmaInput in);

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
double evaluate(const Candidate& cand, double c, const Vec& a, const Vec& b, bool chip_rules = false);
std::vector<Candidate> candidates(MmaInput in, MmaPath path);

// ---- test sets and the seeded generator (mma_test_sets.cpp)
enum class Kind { normal, mixed, wide, align, cancel, subnormal, edge };
struct TestSet {
  std::string name;
  Kind kind;
  size_t k;  // 0: one instruction; otherwise a chain along K of this length
  size_t sync_tiles, wgmma_tiles;
};
extern const std::vector<TestSet> kSets;
size_t set_k(const TestSet& s, MmaInput in);
using Rng = ToolRng;
Rng tile_rng(MmaPath path, MmaInput in, size_t set, size_t tile);
uint32_t random_code(const fp::Format& f, int lo, int hi, Rng& rng);
// Tiles first .. first + count of a set, generated on `threads` threads.
MmaTiles make_tiles(MmaPath path, MmaInput in, size_t set_index, size_t first, size_t count, int threads);

// ---- checking outputs against the model (mma_check.cpp)
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
std::string hex(uint32_t code, int bits);
std::string show(double x);
Tally check(MmaInput in, const MmaTiles& t, const std::vector<float>& d, size_t first_index, size_t sample_tiles,
            const std::vector<Candidate>& cands, int threads);

// ---- probes: one dot product replicated over every output of a tile (mma_probes.cpp)
struct Probe {
  std::string name;
  double acc = 0;
  std::vector<double> a, b;  // K = instructions * k, zeros where not set
  std::string published;     // a published H100 result, where there is one
  bool fp32_inputs = false;  // values are fp32, not necessarily of the input format (tf32 truncation)
  std::string scan;          // width probes: the scan they belong to (printed as one line)
};
std::vector<Probe> probes(MmaInput in, MmaPath path);

// ---- the run (mma_device_run.cpp), its report (mma_report.cpp) and the replay (mma_replay.cpp)
struct Options {
  std::string json_path, samples_path, replay_path;
  double scale = 1;
  int threads = 0;
  bool cpu_model = false;
  std::vector<MmaInput> inputs = kInputs;
  std::vector<MmaPath> paths = kPaths;
};
constexpr size_t kSampleTiles[2] = {256, 32};  // per set, mma.sync and wgmma: scored by every variant, and saved
// The samples file's first bytes; 2: tiles from tool_rng.hpp's stream (1 was a splitmix64 of its own).
inline constexpr char kSamplesMagic[] = "FPLABMMA2\n";
struct Row {
  MmaPath path;
  MmaInput input;
  size_t set;
  size_t k = 0, tiles = 0;
  Tally tally;
};
void print_classes(const Row& r, const std::vector<Candidate>& cands);
json row_json(const Row& r, const std::vector<Candidate>& cands);
void print_variants(const std::vector<Row>& rows, MmaPath path, MmaInput in, const std::vector<Candidate>& cands);
std::string percent(int64_t part, int64_t whole);
void print_table(const std::vector<Row>& rows);

int device_run(const Options& o);
int replay(const Options& o);

}  // namespace fplab::tools::gpu::mma
