// A reduction order as a value: a pipeline of stages, each cutting the current list of partial
// results into groups and reducing every group (docs/schedules.md is the public contract).
//
//   schedule := stage (" | " stage)*
//   stage    := "shuffle" | "perm(" p0 "," p1 ... ")" | "cols(" R ")" | "body(" M ")[" schedule "]"
//             | "each(" S ")[" schedule "]" | "deal(" P "," B ")[" schedule "]"
//             | grouping ":" reducer ["@" FORMAT [">" HOLD]]
//   grouping := "contig(" G ")" | "strided(" P ")" | "split(" S ")" | "all"
//   reducer  := seq | rev | tree | shfl_down | shfl_up | shfl_xor | atomic | ring | kahan
//             | neumaier | exact | binned | numpy_pairwise | torch_cascade(V) | cub_reduce(T,I,V,G) | fused(N,F)
//             | fused(N,F,INPUT)
//   INPUT    := tf32 | bf16 | fp16 | e4m3 | e5m2 | tf32rne | tf32rna   (the tensor core's input format;
//               | mxe4m3 | mxe5m2 | mxe3m2 | mxe2m3 | mxe2m1            default: none, products of the
//                                                                      values as they are)
//
// perm(p0,...,p(L-1)) reorders every block of L partials (position k takes the block's p_k-th);
// cols(R) reads the list as rows of R partials (the last row may be shorter) column by column:
// 0, R, 2R, ..., 1, R + 1, ... (a convolution kernel in NHWC that takes an im2col row's terms,
// fplab's (channel, kernel row, kernel column), in the order (kernel row, kernel column, channel):
// cols(9) for 3 x 3);
// body(M)[...] runs its stages on the first floor(n/M)*M partials and puts what they leave after
// the other n mod M, which pass through; each(S)[...] runs its stages on every run of S consecutive
// partials (the last may be shorter) on its own and lists what they leave, run after run (a kernel
// whose tiles restart at every image: cuDNN's weight gradient, per image in tiles of 512 pixels,
// is each(784)[contig(512):seq] | all:atomic at 28 x 28); deal(P,B)[...] deals blocks of B
// consecutive partials to P hands in turn (block i to hand i mod P) and runs its stages on every hand
// on its own, its blocks in order, listing what they leave hand after hand (split-K slices that take
// every P-th tile of K: cuDNN's TF32 weight gradient at 14 x 14 on an H200 is
// deal(90,64)[all:fused(8,25,tf32rna)] | cols(89) | all:seq); "@FORMAT" makes a stage add in FORMAT
// (its results are held in it) instead of the arithmetic's format.
//
// The canonical text has single spaces around '|' and no other spaces; parse(print(s)) == s.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fp/format.hpp"

namespace fplab::sim {

// A malformed schedule: the message names the offending token, `position` is its offset.
struct ScheduleError : std::invalid_argument {
  ScheduleError(const std::string& message, size_t position) : std::invalid_argument(message), position(position) {}
  size_t position;
};

struct Grouping {
  enum class Kind : uint8_t { contig, strided, split, all };
  Kind kind = Kind::all;
  int64_t size = 0;  // G for contig, P for strided, S for split
  bool operator==(const Grouping&) const = default;
};

struct Reducer {
  enum class Kind : uint8_t {
    seq,
    rev,
    tree,
    shfl_down,
    shfl_up,
    shfl_xor,
    atomic,
    ring,
    kahan,
    neumaier,
    exact,
    binned,
    numpy_pairwise,
    torch_cascade,
    cub_reduce,
    fused
  };
  // fused(N,F,INPUT): the factors converted to INPUT before the fused step (tf32 truncated, as
  // the H100's tensor cores read fp32 operands; the others rounded to nearest even, as a
  // framework's cast); none: no conversion.
  // tf32: the factors' 13 low bits ignored, as the MMA instruction does; tf32rne / tf32rna:
  // rounded to tf32 by the kernel first, to nearest even or ties away (cuBLAS and cuDNN on an
  // H100 do both: docs/results/reveal_torch.md).
  // mx*: OCP MX block scaling (fp/mx_block.hpp): a dot product's or GEMM's factors quantized in
  // blocks of 32 along K, A's rows and B's columns each with their own e8m0 scales, before the
  // schedule runs (sim/mx_factors.hpp); the fused steps then add products of the dequantized
  // values. Only dots and GEMMs have factors: a reduction of values refuses them.
  enum class Input : uint8_t {
    none,
    tf32,
    bf16,
    fp16,
    e4m3,
    e5m2,
    tf32rne,
    tf32rna,
    mxe4m3,
    mxe5m2,
    mxe3m2,
    mxe2m3,
    mxe2m1
  };
  // cub_reduce(T,I,V,G) (sim/cub_reduce.hpp): threads a block, items a thread, their vector
  // width, and the most blocks of the first pass.
  struct CubShape {
    int threads = 0, items = 0, vector = 0, grid = 0;
    bool operator==(const CubShape&) const = default;
  };
  Kind kind = Kind::seq;
  int cascade_lanes = 0;        // V of torch_cascade(V) (sim/torch_cascade.hpp)
  CubShape cub{};               // of cub_reduce
  int fused_products = 0;       // N of fused(N,F)
  int fused_fraction_bits = 0;  // F of fused(N,F)
  Input fused_input = Input::none;
  bool operator==(const Reducer&) const = default;
  // Reducers whose result depends on the implementation-noise stream.
  bool random() const { return kind == Kind::atomic; }
};

struct Stage {
  bool shuffle = false;  // a "shuffle" stage permutes the list; grouping/reducer unused
  // perm(...): a lane permutation of every block of perm.size() partials (position k takes the
  // block's perm[k]-th; a last, shorter block keeps the indices it has, in that order).
  std::vector<int64_t> perm;
  // cols(R): the list as rows of R partials read column by column (0: none).
  int64_t cols = 0;
  // body(M)[inner]: inner runs on the first floor(n/M)*M partials; the n mod M after them pass
  // through, and the body's results follow them (a kernel's remainder loop before its result).
  int64_t body = 0;
  // each(S)[inner]: inner runs on every run of S consecutive partials apart (the last may be
  // shorter), their results listed run after run. Its stages are deterministic (no atomic or
  // shuffle: one order serves every run).
  int64_t each = 0;
  // deal(P,B)[inner]: blocks of deal_block consecutive partials dealt to `deal` hands in turn, inner
  // run on every hand apart (its blocks in order), their results listed hand after hand.
  // Deterministic stages only, as in each(S).
  int64_t deal = 0, deal_block = 0;
  std::vector<Stage> inner;  // of body(M), each(S) or deal(P,B)
  Grouping grouping;
  Reducer reducer;
  // "@FORMAT": the format this stage adds in and holds its results in; none: the arithmetic's.
  std::optional<fp::Format> format;
  // ">HOLD" after "@FORMAT": the format the stage's partials are held in, each addition rounded to
  // FORMAT and then to it; only for reducers of single additions (sequential_from_zero() ones
  // and tree, shfl_*, numpy_pairwise, torch_cascade, cub_reduce).
  std::optional<fp::Format> hold;
  bool operator==(const Stage&) const = default;
  // A grouping:reducer stage (not shuffle, perm, cols, body, each or deal).
  bool reduces() const { return !shuffle && !reorders() && !nests(); }
  // body(M)[...], each(S)[...] or deal(P,B)[...]: stages of its own on parts of the list.
  bool nests() const { return body > 0 || each > 0 || deal > 0; }
  // perm(...) or cols(R): a fixed reordering of the list.
  bool reorders() const { return !perm.empty() || cols > 0; }
  // A held sequential reduction starts from zero: acc = 0, then acc = HOLD(FORMAT(acc + x)) per
  // member, the first member included (a loop over a float16 accumulator).
  bool sequential_from_zero() const {
    using K = Reducer::Kind;
    const K k = reducer.kind;
    return hold && (k == K::seq || k == K::rev || k == K::atomic || k == K::ring);
  }
};

struct Schedule {
  std::vector<Stage> stages;
  bool operator==(const Schedule& other) const { return stages == other.stages; }
  // True if any step draws from the implementation-noise stream (atomic or shuffle).
  bool nondeterministic() const;
  // True if the result cannot depend on the order (only exact / binned reductions).
  bool order_independent() const;
  // True if a stage, at any depth, adds in a format of its own ("@FORMAT").
  bool has_stage_formats() const;
  // True if it uses only the stages the GPU planner and CUDA kernels know: no perm, cols, body, each,
  // deal or @.
  bool plain() const;
};

// Canonical text.
std::string to_string(const Schedule& schedule);
std::string to_string(const Stage& stage);
std::string to_string(const Reducer& reducer);
const char* to_string(Reducer::Input input);  // "none", "tf32", ..., "tf32rna", "mxe4m3", ..., "mxe2m1"

// Parses a schedule or a preset name (see presets.hpp); throws ScheduleError.
Schedule parse_schedule(std::string_view text);

// A comma-separated list of schedules or presets cut at the commas outside parentheses, since a
// preset's parameters and fused(N,F) hold commas of their own: "numpy,cuda-naive-sum(256,64)" is
// two items. Items come back unparsed, without the spaces around them; "" gives one empty item.
std::vector<std::string> split_schedule_list(std::string_view comma_separated);

}  // namespace fplab::sim
