// A `tree` stage over groups whose member counts are all powers of two adds in exactly the pairs
// of `shfl_up` (tree_reduce halves 2^k members into two 2^(k-1) halves, as shfl_up's offsets 1, 2,
// 4, ... pair them): the GPU reduction kernel, which realises shuffles and not trees, then runs
// that schedule for that many terms. cuDNN's singleread BatchNorm backward sums as
// `strided(512):seq | contig(32):tree | all:tree`, whose groups are powers of two for most n.
#pragma once

#include <cstddef>
#include <optional>

#include "sim/schedule.hpp"

namespace fplab::sim {

// The schedule with every tree stage as shfl_up, where for n terms each tree stage's groups all
// hold a power of two of partials; nullopt where one does not, where the schedule has no tree
// stage, or where it is not plain (Schedule::plain: the stages the GPU planner knows). The same
// additions, in another order of evaluation: the same bits under a deterministic rounding (the GPU
// kernels' round to nearest), not under stochastic rounding, whose draws follow that order.
std::optional<Schedule> trees_as_shuffles(const Schedule& schedule, size_t n);

}  // namespace fplab::sim
