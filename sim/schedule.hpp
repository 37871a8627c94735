// A reduction order as a value: a pipeline of stages, each cutting the current list of partial
// results into groups and reducing every group (docs/schedules.md is the public contract).
//
//   schedule := stage (" | " stage)*
//   stage    := "shuffle" | grouping ":" reducer
//   grouping := "contig(" G ")" | "strided(" P ")" | "split(" S ")" | "all"
//   reducer  := seq | rev | tree | shfl_down | shfl_up | shfl_xor | atomic | ring | kahan
//             | neumaier | exact | binned | numpy_pairwise | fused(N,F) | fused(N,F,INPUT)
//   INPUT    := tf32 | bf16 | fp16 | e4m3 | e5m2   (the tensor core's input format; default: none,
//                                                  products of the values as they are)
//
// The canonical text has single spaces around '|' and no other spaces; parse(print(s)) == s.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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
    fused
  };
  // fused(N,F,INPUT): the factors converted to INPUT before the fused step (tf32 truncated, as
  // the H100's tensor cores read fp32 operands; the others rounded to nearest even, as a
  // framework's cast); none: no conversion.
  // tf32: the factors' 13 low bits ignored, as the MMA instruction does; tf32rne / tf32rna:
  // rounded to tf32 by the kernel first, to nearest even or ties away (cuBLAS and cuDNN on an
  // H100 do both: docs/results/reveal_torch.md).
  enum class Input : uint8_t { none, tf32, bf16, fp16, e4m3, e5m2, tf32rne, tf32rna };
  Kind kind = Kind::seq;
  int fused_products = 0;       // N of fused(N,F)
  int fused_fraction_bits = 0;  // F of fused(N,F)
  Input fused_input = Input::none;
  bool operator==(const Reducer&) const = default;
  // Reducers whose result depends on the implementation-noise stream.
  bool random() const { return kind == Kind::atomic; }
};

struct Stage {
  bool shuffle = false;  // a "shuffle" stage permutes the list; grouping/reducer unused
  Grouping grouping;
  Reducer reducer;
  bool operator==(const Stage&) const = default;
};

struct Schedule {
  std::vector<Stage> stages;
  bool operator==(const Schedule& other) const { return stages == other.stages; }
  // True if any step draws from the implementation-noise stream (atomic or shuffle).
  bool nondeterministic() const;
  // True if the result cannot depend on the order (only exact / binned reductions).
  bool order_independent() const;
};

// Canonical text.
std::string to_string(const Schedule& schedule);
std::string to_string(const Stage& stage);
std::string to_string(const Reducer& reducer);
const char* to_string(Reducer::Input input);  // "none", "tf32", "bf16", "fp16", "e4m3", "e5m2", "tf32rne", "tf32rna"

// Parses a schedule or a preset name (see presets.hpp); throws ScheduleError.
Schedule parse_schedule(std::string_view text);

// A comma-separated list of schedules or presets cut at the commas outside parentheses, since a
// preset's parameters and fused(N,F) hold commas of their own: "numpy,cuda-naive-sum(256,64)" is
// two items. Items come back unparsed, without the spaces around them; "" gives one empty item.
std::vector<std::string> split_schedule_list(std::string_view comma_separated);

}  // namespace fplab::sim
