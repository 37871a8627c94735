#include "sim/presets.hpp"

#include <cctype>
#include <charconv>
#include <functional>

#include "sim/tensor_core_models.hpp"

namespace fplab::sim {
namespace {

struct PresetDef {
  PresetInfo info;
  std::vector<int64_t> defaults;  // parameters, in order; empty = takes none
  std::function<std::string(const std::vector<int64_t>&)> expansion;
};

std::string n(int64_t v) { return std::to_string(v); }

// OpenBLAS 0.3.21 sdot (kernel/x86_64/sdot.c with sdot_microk_skylakex-2.c), as revealed through
// np.dot (docs/reveal.md). The kernel takes the first n & -32 terms: a loop of 64 at a time keeps
// four 16-lane FMA accumulators (lane m: terms m, m + 64, ...), folds each to 8 lanes (lane j with
// j + 8), then a loop of 32 at a time FMAs the next 32 terms into those 32 lanes; the 4 vectors are
// added in order, the 128-bit halves added, two hadds finish it. dot_compute adds the n mod 32
// other terms as float products into a double from 0, then the kernel's result, and rounds to
// float once.
constexpr const char* kOpenblasSdot =
    "body(32)[body(64)[strided(64):seq | perm(0,8,1,9,2,10,3,11,4,12,5,13,6,14,7,15) | contig(2):seq] | "
    "strided(32):seq | strided(8):seq | strided(4):seq | all:tree] | all:seq@fp64";

// The same sdot.c with sdot_microk_haswell-2.c, the kernel OpenBLAS runs on its Haswell and Zen
// cores (revealed through cblas_sdot and np.dot on an AMD EPYC, docs/reveal.md): one loop of 32 at
// a time into four 8-lane FMA accumulators (lane j: terms j, j + 32, ...); each register's 128-bit
// halves added (lane e with e + 4), the four registers added as (r0 + r1) + (r2 + r3), two hadds.
// So the 32 lanes reach the 4 lanes of the last register as a balanced tree over the lanes with
// the same index mod 4, in lane order. The tail as in the AVX-512 preset above.
constexpr const char* kOpenblasSdotHaswell =
    "body(32)[strided(32):seq | strided(4):tree | all:tree] | all:seq@fp64";

// The plain presets and, after them, one tc-* preset per tensor-core model of the registry.
std::vector<PresetDef> with_tensor_core_models(std::vector<PresetDef> defs) {
  for (const auto& m : tensor_core_models()) {
    const std::string expansion = "all:" + to_string(fused_reducer(m));
    defs.push_back({{std::string(m.name), std::string(m.name), std::string(m.description)}, {}, [expansion](auto&) {
                      return expansion;
                    }});
  }
  return defs;
}

const std::vector<PresetDef>& definitions() {
  static const std::vector<PresetDef> defs = with_tensor_core_models({
      {{"seq", "seq", "left fold ((t0 + t1) + t2) + ..."}, {}, [](auto&) { return "all:seq"; }},
      {{"rev", "rev", "right fold t0 + (t1 + (... + t(K-1)))"}, {}, [](auto&) { return "all:rev"; }},
      {{"pairwise", "pairwise", "balanced binary tree, first half on the left"}, {}, [](auto&) { return "all:tree"; }},
      {{"kahan", "kahan", "Kahan compensated sum"}, {}, [](auto&) { return "all:kahan"; }},
      {{"neumaier", "neumaier", "Neumaier (improved Kahan) compensated sum"}, {}, [](auto&) { return "all:neumaier"; }},
      {{"exact", "exact", "exact sum, rounded once (order cannot matter)"}, {}, [](auto&) { return "all:exact"; }},
      {{"binned", "binned", "order-independent reproducible sum (3-fold pre-rounding, ReproBLAS style)"},
       {},
       [](auto&) { return "all:binned"; }},
      {{"atomic", "atomic", "every term added by an atomic in a random arrival order"},
       {},
       [](auto&) { return "all:atomic"; }},
      {{"permuted", "permuted", "a random permutation, then a left fold"},
       {},
       [](auto&) { return "shuffle | all:seq"; }},
      {{"numpy", "numpy",
        "numpy.sum of a contiguous float32 or float64 array in NumPy >= 2.3: one pairwise sum (blocks of <= 128 "
        "with 8 interleaved accumulators) over the whole axis (checked bit for bit against NumPy 2.3 and 2.4)"},
       {},
       [](auto&) { return "all:numpy_pairwise"; }},
      {{"numpy-2.2", "numpy-2.2",
        "numpy.sum of a contiguous array in NumPy <= 2.2: pairwise sums over the iterator's 8192-element "
        "buffers, added in order (checked bit for bit against NumPy 1.24)"},
       {},
       [](auto&) { return "contig(8192):numpy_pairwise | all:seq"; }},
      {{"numpy-fp16", "numpy-fp16",
        "numpy.sum of a contiguous float16 array in NumPy >= 2.3 (use with --format fp16): the pairwise sum in "
        "float32, rounded to float16 once (checked bit for bit against NumPy 2.3)"},
       {},
       [](auto&) { return "all:numpy_pairwise@fp32"; }},
      {{"numpy-2.2-fp16", "numpy-2.2-fp16",
        "numpy.sum of a contiguous float16 array in NumPy <= 2.2 (use with --format fp16): each 8192-element "
        "buffer's pairwise sum in float32, added to the float16 running sum in float32 and rounded to float16 "
        "(checked bit for bit against NumPy 1.24)"},
       {},
       [](auto&) { return "contig(8192):numpy_pairwise@fp32 | all:seq@fp32>fp16"; }},
      {{"openblas-sdot", "openblas-sdot",
        "np.dot of two float32 vectors through OpenBLAS 0.3.21's sdot, AVX-512 kernel (Debian's, on a CPU it "
        "names Cooperlake/SkylakeX): FMA lanes of 64 folded to 8 and by hadd, the n mod 32 rest as float products "
        "into a double, the kernel's result added last (checked bit for bit against np.dot)"},
       {},
       [](auto&) { return kOpenblasSdot; }},
      {{"openblas-sdot-haswell", "openblas-sdot-haswell",
        "np.dot of two float32 vectors through OpenBLAS 0.3.21's sdot, AVX2 kernel (on a CPU it names Haswell or "
        "Zen): four 8-lane FMA registers, their halves and the registers folded as a tree, two hadds, the n mod 32 "
        "rest as float products into a double, the kernel's result added last (checked bit for bit against np.dot "
        "and cblas_sdot)"},
       {},
       [](auto&) { return kOpenblasSdotHaswell; }},
      {{"cuda-naive-sum(T,B)", "cuda-naive-sum(256,1024)",
        "textbook CUDA sum: grid-stride fold per thread, warp shfl_down, block combine by warp 0, atomicAdd across "
        "blocks"},
       {256, 1024},
       [](auto& p) {
         return "strided(" + n(p[0] * p[1]) + "):seq | contig(32):shfl_down | contig(" + n(p[0] / 32) +
                "):seq | all:atomic";
       }},
      {{"cub-reduce(G)", "cub-reduce(5280)",
        "CUB's DeviceReduce::Sum of a contiguous float array as CUDA 13.0's CUB runs it on sm_90 (256 threads, 16 "
        "items a thread read as 4 float4, each thread's items a tree, lanes a tree, warps in order; tiles shared "
        "out over at most G blocks, their sums reduced by one more block), revealed on an H200 and replayed bit "
        "for bit to 65536 terms, its value checked at 6, 25 and 30 million; G = 132 SMs x 8 blocks x 5 is a model"},
       {5280},
       [](auto& p) { return "all:cub_reduce(256,16,4," + n(p[0]) + ")"; }},
      {{"cub-sum(T,B)", "cub-sum(256,1024)",
        "an older model of CUB DeviceReduce::Sum (not CUDA 13's order: cub-reduce): per-thread fold, warp "
        "reduction pairing lanes 1,2,4,..,16 (shfl_up), warp aggregates in order, then a second fixed pass over the "
        "block partials"},
       {256, 1024},
       [](auto& p) {
         return "strided(" + n(p[0] * p[1]) + "):seq | contig(32):shfl_up | contig(" + n(p[0] / 32) +
                "):seq | strided(" + n(p[0]) + "):seq | contig(32):shfl_up | all:seq";
       }},
      {{"torch-sum(T,B)", "torch-sum(512,512)",
        "model of PyTorch's reduce kernel: 4 accumulators per thread (ILP), warp shfl_down, block shfl_down, "
        "global combine in block order"},
       {512, 512},
       [](auto& p) {
         return "strided(" + n(4 * p[0] * p[1]) + "):seq | contig(4):seq | contig(32):shfl_down | contig(" +
                n(p[0] / 32) + "):shfl_down | all:seq";
       }},
      {{"torch-cpu-sum(V)", "torch-cpu-sum(8)",
        "torch.sum of a contiguous float32 tensor on the CPU (ATen's cascade sum, one thread): V-lane vectors "
        "(8: AVX2, the default build, and torch 2.11 on AVX-512 CPUs; 16: an AVX-512 kernel) in four interleaved "
        "cascades of 16-row levels, the n mod V rest, then the lanes (checked bit for bit against torch 1.13 and "
        "2.11)"},
       {8},
       [](auto& p) { return "all:torch_cascade(" + n(p[0]) + ")"; }},
      {{"splitk(S)", "splitk(4)", "split-K: K cut into S parts, each an FMA chain, parts added in order"},
       {4},
       [](auto& p) { return "split(" + n(p[0]) + "):seq | all:seq"; }},
      {{"splitk-tree(S)", "splitk-tree(4)", "split-K, parts combined by a balanced tree"},
       {4},
       [](auto& p) { return "split(" + n(p[0]) + "):seq | all:tree"; }},
      {{"splitk-atomic(S)", "splitk-atomic(4)", "split-K, parts combined by atomics (nondeterministic)"},
       {4},
       [](auto& p) { return "split(" + n(p[0]) + "):seq | all:atomic"; }},
      {{"systolic(R)", "systolic(128)",
        "TPU-like systolic array: R-deep sequential accumulation per tile, tile results added in K order"},
       {128},
       [](auto& p) { return "contig(" + n(p[0]) + "):seq | all:seq"; }},
      {{"nccl-ring(R)", "nccl-ring(8)",
        "all-reduce over R workers, ring: local sums, then each chunk summed starting one rank later"},
       {8},
       [](auto& p) { return "split(" + n(p[0]) + "):seq | all:ring"; }},
      {{"nccl-tree(R)", "nccl-tree(8)", "all-reduce over R workers, tree: local sums, then a binary tree"},
       {8},
       [](auto& p) { return "split(" + n(p[0]) + "):seq | all:tree"; }},
  });
  return defs;
}

std::string base_name(const std::string& declared) { return declared.substr(0, declared.find('(')); }

}  // namespace

const std::vector<PresetInfo>& presets() {
  static const std::vector<PresetInfo> infos = [] {
    std::vector<PresetInfo> out;
    for (const auto& d : definitions()) out.push_back(d.info);
    return out;
  }();
  return infos;
}

std::optional<Schedule> expand_preset(std::string_view text) {
  std::string s;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) s += c;
  const std::string name = s.substr(0, s.find('('));
  for (const auto& d : definitions()) {
    if (base_name(d.info.name) != name) continue;
    std::vector<int64_t> params = d.defaults;
    if (name.size() < s.size()) {
      if (d.defaults.empty() || s.back() != ')')
        throw ScheduleError(
            "preset '" + std::string(text) + "' takes " +
                (d.defaults.empty() ? std::string("no parameters") : "parameters like " + d.info.example),
            name.size());
      params.clear();
      const char* p = s.data() + name.size() + 1;
      const char* end = s.data() + s.size() - 1;
      while (p < end) {
        int64_t v = 0;
        const auto [next, ec] = std::from_chars(p, end, v);
        if (ec != std::errc{} || v < 1 || v > (int64_t{1} << 30) || (next != end && *next != ','))
          throw ScheduleError(
              "preset '" + std::string(text) + "': parameters must be whole numbers >= 1, like " + d.info.example,
              static_cast<size_t>(p - s.data()));
        params.push_back(v);
        p = next == end ? end : next + 1;
      }
      if (params.size() != d.defaults.size())
        throw ScheduleError("preset '" + std::string(text) + "' takes " + std::to_string(d.defaults.size()) +
                                " parameter(s), like " + d.info.example,
                            name.size());
    }
    if ((name == "cuda-naive-sum" || name == "cub-sum" || name == "torch-sum") && params[0] % 32 != 0)
      throw ScheduleError("preset '" + std::string(text) + "': threads per block must be a multiple of 32",
                          name.size());
    try {
      return parse_schedule(d.expansion(params));
    } catch (const ScheduleError& e) {  // e.g. group sizes past the limit: blame the parameters
      throw ScheduleError("preset '" + std::string(text) + "': parameters out of range (" + e.what() + ")",
                          name.size());
    }
  }
  return std::nullopt;
}

}  // namespace fplab::sim
