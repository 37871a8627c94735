// Which schedules the GPU kernels of sim/cuda/ realise, and how: a schedule is mapped onto a
// kernel's launch shape and its order at each level (thread, warp, block, grid), or rejected
// with one line saying why. Plain C++ with no CUDA in it, so it is tested on every machine.
//
// The reduction kernel realises (docs/gpu.md):
//   PASS [| GRID]          PASS := FOLD [| ACCS] | contig(32):WARP [| BLOCK]
//   FOLD  := strided(V*T*B):seq  (grid-stride loop, V accumulators a thread)
//          | contig(G):seq       (each thread a run of G consecutive terms; B follows from n)
//   ACCS  := contig(V):seq       (a thread's V accumulators hold V consecutive terms: vector loads)
//          | strided(T*B):seq    (they hold terms T*B apart, as PyTorch's reduction over a strided
//                                 dimension keeps them), V = 2, 4 or 8
//   WARP  := shfl_down | shfl_up | shfl_xor              (32 lanes)
//          | seq                 (lane 0 folds the 32 lanes in lane order, as TF's column reduce)
//   BLOCK := contig(W):{seq|shfl_down|shfl_up|shfl_xor}  (W = T/32 warps; warp 0 combines)
//   GRID  := all:seq      (the last block to finish folds the block partials in block order)
//          | all:atomic   (atomicAdd of every block partial: arrival order)
//          | strided(V2*T2):seq [| contig(V2):seq] | contig(32):WARP | all:BLOCK
//                         (a second, one-block pass over the block partials, as CUB does)
// A PASS whose block stage is `all:BLOCK` runs in one block and needs no GRID. Two short forms
// name one-block passes too: `strided(P*V):seq [| ACCS] | all:WARP` with P <= 32 threads (one
// warp: an `all:` stage over at most 32 partials orders them as `contig(32):` does, the idle lanes
// of fewer than 32 threads holding -0) and
// `all:seq` alone (one thread folds every term in order; the other lanes hold -0).
//
// The GEMM kernel realises `all:seq` (one FMA chain over K per output) and
// `{split(S)|contig(G)}:seq | all:{seq|tree|atomic}` (split-K: FMA chains over consecutive
// parts of K, combined in order, by a balanced tree, or by atomicAdd), the same with parts
// that restart every R terms, `each(R)[contig(G):seq] | all:{seq|tree|atomic}` (k_parts.hpp),
// and with parts of every P-th term, `strided(P):seq | all:{seq|tree|atomic}` (cuDNN's input
// gradient of one chain per kernel position: the operands gathered part by part, gpu_k_order.hpp).
// Before any of these, or before a tensor-core schedule, a deterministic schedule may start with a
// stage that only reorders K (cols(R), perm(...), each(S)[...] of such: an NHWC kernel's terms by
// kernel position): plan_ordered_gemm.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "sim/cuda/k_parts.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim::gpu {

// A schedule outside the family a kernel realises; what() is one line naming the schedule.
struct NotRealisable : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

enum class WarpOrder : uint8_t { shfl_down, shfl_up, shfl_xor, seq };
// How warp 0 combines the block's W warp results.
enum class BlockOrder : uint8_t { seq, shfl_down, shfl_up, shfl_xor };

// One kernel pass: every thread folds its terms, each warp reduces by shuffles, warp 0 combines
// the block's warps. Lanes, accumulators and warps with no terms hold -0, the identity of
// round-to-nearest addition, so a partly empty grid computes exactly what the schedule says.
struct BlockPass {
  bool contiguous = false;   // contig(G):seq first; otherwise strided(V*T*B):seq
  int64_t chunk = 0;         // G (contiguous only); 0: all terms (`all:seq`, one thread)
  int64_t grid_threads = 0;  // P = T*B (strided only); in a one-warp pass P may be under 32
  int vector = 1;            // V accumulators a thread (strided only): 1, 2, 4 or 8
  bool interleaved = false;  // the accumulators hold terms P apart (ACCS strided), not V consecutive
  WarpOrder warp = WarpOrder::shfl_down;
  int warps = 1;  // W warps a block, 1..32
  BlockOrder block = BlockOrder::seq;

  int threads_per_block() const { return 32 * warps; }
  int64_t blocks(int64_t n) const;  // the grid for n terms
};

enum class GridCombine : uint8_t {
  single_block,  // the pass runs in one block; its result is the answer
  seq,           // block partials folded in block order by the last block to finish
  atomic,        // every block partial atomicAdd-ed into the result, in arrival order
  second_pass,   // a one-block pass over the block partials
};

struct ReductionPlan {
  BlockPass first;
  GridCombine combine = GridCombine::single_block;
  BlockPass second;  // second_pass only: strided, one block

  bool deterministic() const { return combine != GridCombine::atomic; }
  std::string describe(int64_t n) const;  // launch shape and orders, for tables and logs
};

// Throws NotRealisable: "schedule 'X' is not realisable by the GPU reduction kernel: <why>".
ReductionPlan plan_reduction(const Schedule& schedule);

struct GemmPlan {
  enum class Parts : uint8_t { one, split, contig, strided, dealt };
  enum class Combine : uint8_t { seq, tree, atomic };
  Parts parts = Parts::one;
  int64_t size = 0;   // S of split(S), G of contig(G), P of strided(P) and of deal(P,B)
  int64_t block = 0;  // B of deal(P,B)
  int64_t run = 0;   // R of each(R)[contig(G):seq] (parts contig, restarting every R terms); 0: none
  Combine combine = Combine::seq;
  // Not the schedule's but the arithmetic's (products = "rounded": cpu-seq, tpu-v3): every
  // product rounded to fp32 before it is added, where the chains otherwise fuse it (FMA).
  bool rounded_products = false;

  int64_t chunk(int64_t k) const;  // terms of K a part holds (the last may hold fewer; strided: the first more)
  KParts k_parts(int64_t k) const;  // strided: the parts of the gathered operands
  // The order in which the operands' K is gathered for the kernel (strided parts: cols(P), part by
  // part; dealt parts: hand by hand); empty where they are read as they are.
  std::vector<size_t> k_order(int64_t k) const;
  int64_t part_count(int64_t k) const;
  bool deterministic() const { return combine != Combine::atomic; }
};

// Throws NotRealisable: "schedule 'X' is not realisable by the GPU GEMM kernel: <why>".
GemmPlan plan_gemm(const Schedule& schedule);

// The tensor-core GEMM (gpu_tensor_core_gemm.hpp) realises `all:fused(N,F,IN)`,
// `{split(S)|contig(G)}:fused(N,F,IN) | all:{seq|atomic}` and
// `deal(P,B)[all:fused(N,F,IN)] | [perm(...) or cols(R) stages |] all:seq` (split-K slices that take
// every P-th tile of B terms, folded in the order the reorderings give). On the GPU's own tensor cores where the
// step is one mma.sync instruction of a Hopper GPU (docs/results/tensor-cores-h100.md): F = 25 and IN
// tf32, tf32rne or tf32rna (N = 8), bf16 or fp16 (N = 16) — tc-h100-tf32, -tf32-rne, -tf32-rna,
// -bf16, -fp16; every other model with N in 1, 2, 4, 8, 16, F <= 25 and IN one of those or none
// (tc-a100*, tc-v100, tc-turing-unconverted) as fused steps in software on CUDA cores
// (gpu_fused_gemm.hpp, cuda_cores). Chained along K as the instructions chain; split-K parts added
// in order in fp32, or by atomics in the order the impl seed draws (run_seeded_on_device).
struct TensorCoreGemmPlan {
  Reducer::Input factors = Reducer::Input::tf32;  // tf32, tf32rne, tf32rna, bf16 or fp16 (none: CUDA cores)
  GemmPlan parts;  // Parts::one, or split/contig/dealt parts combined by Combine::seq or ::atomic
  // The perm/cols stages between dealt parts and their fold: the parts are added in their order.
  std::vector<Stage> fold_reorders;
  // A model no H100 mma instruction computes (another N or F, or unconverted factors): its fused
  // steps in software on CUDA cores (gpu_fused_gemm.hpp), step_products and fraction_bits its own.
  bool cuda_cores = false;
  int step_products = 8, fraction_bits = 25;

  // The products an H100 mma.sync adds in one step for these factors.
  int products() const { return factors == Reducer::Input::bf16 || factors == Reducer::Input::fp16 ? 16 : 8; }
  // The parts of a sum of k terms in the order they are added (empty: 0, 1, 2, ...).
  std::vector<size_t> fold_order(int64_t k) const;
};

// Throws NotRealisable: "schedule 'X' is not realisable by the GPU tensor-core GEMM kernel: <why>".
TensorCoreGemmPlan plan_tensor_core_gemm(const Schedule& schedule);

// Why the fused steps on CUDA cores (gpu_fused_gemm.hpp) cannot take fused(N,F,INPUT) ("" where
// they can): N one of 1, 2, 4, 8, 16; F at most 25 (a step's cut terms then sum exactly in 64
// bits); INPUT tf32, tf32rne, tf32rna, bf16, fp16 or none.
std::string fused_steps_why_not(int products, int fraction_bits, Reducer::Input factors);

// A GEMM schedule's kernel: FMA chains on CUDA cores (GpuGemm) or tensor-core instructions
// (GpuTensorCoreGemm). Throws NotRealisable: the tensor-core kernel's line for schedules whose
// first stage is fused(...), else the CUDA-core kernel's.
using GemmRoute = std::variant<GemmPlan, TensorCoreGemmPlan>;
GemmRoute plan_any_gemm(const Schedule& schedule);

// A GEMM schedule whose first stage only reorders K — cols(R), perm(...), each(S)[...] of such:
// cuDNN's TF32 kernels take a 3x3 convolution's terms by kernel position in blocks of channels,
// each(288)[cols(9)] — realised on operands gathered in that order (A's columns, B's rows:
// gpu_k_order.hpp), the rest of the schedule on a kernel above; as sim::gemm does on the CPU, and
// like it for deterministic schedules only (an atomic step's stream is keyed by its stage number,
// which the gathered rest would not keep). Any other schedule: no order, plan_any_gemm's route.
struct OrderedGemmRoute {
  std::optional<Stage> order;  // the first stage, when it only reorders K
  GemmRoute rest;              // the kernel's route for the rest (the whole schedule without an order)

  // K's order for `order` (sim::detail::fixed_order); empty without one.
  std::vector<size_t> k_order(int64_t k) const;
};

// True for a stage that only reorders its list (sim::detail::fixed_order has an order for it).
bool only_reorders(const Stage& stage);

// Throws NotRealisable (plan_any_gemm's line, or the rest's after a reordering stage).
OrderedGemmRoute plan_ordered_gemm(const Schedule& schedule);

// Whether the exact kernels (gpu_exact.hpp) take the schedule: one exact reduction of every term
// (`all:exact`, shuffles and reorderings before it changing nothing). For a GEMM the caller also
// checks that the products are not rounded first (the kernels add them exact).
bool exact_sum_schedule(const Schedule& schedule);

// The seeded-order kernel (gpu_seeded.hpp) realises `GROUPS:R1 [| all:R2]`, R1 and R2 each `seq`
// or `atomic`, GROUPS any grouping (all, contig(G), strided(P), split(S)): the emulation's own
// orders, an atomic step drawing the impl seed's permutation (sim/schedule_walk.hpp) on the device.
struct SeededPlan {
  Grouping first;            // the first stage's groups
  bool first_atomic = false;
  bool two_stages = false;   // an `all:` stage over the first stage's partials follows
  bool second_atomic = false;
};

// Throws NotRealisable: "schedule 'X' is not realisable by the GPU seeded-order kernel: <why>".
SeededPlan plan_seeded(const Schedule& schedule);

}  // namespace fplab::sim::gpu
