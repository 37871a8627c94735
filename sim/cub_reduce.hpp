// CUB's DeviceReduce::Sum of a contiguous array, as an order of additions: the reducer
// `cub_reduce(T,I,V,G)`. Revealed with fplab reveal on CUDA 13.0's CUB (CCCL 3.0) on an H200
// (docs/reveal.md, "CUB"), read against AgentReduce, BlockReduceWarpReductions and GridEvenShare.
//
// A block of T threads consumes tiles of T·I items. A full tile is read as vectors of V: thread t
// holds the I/V vectors at (v·T + t)·V of the tile and reduces them by CUB's pairing (element j
// takes element j + o for o = 1, 2, 4, … and j a multiple of 2o: a balanced tree in register order
// when I is a power of two); a later full tile's items are reduced the same way with the thread's
// running sum in front of them (ThreadReduce with a prefix: [sum, r0 … r15] is tree(sum, r0 … r14)
// + r15). A partial tile is read striped, item t + k·T to thread t, each added in turn (the first
// item starts the sum where the tile is the block's first). Each warp then adds its lanes by the
// same pairing (shuffles at offsets 1, 2, 4, 8, 16), only lanes that hold items taking part, and
// thread 0 adds the warps' sums in order.
// n <= T·I: one block over everything. Else the tiles are dealt out to min(tiles, G) blocks
// strip-mine fashion (block b takes tiles b, b + blocks, b + 2·blocks, ...; the last, partial
// tile falls to whichever block it reaches), and one more block reduces the blocks' sums in block
// order as above. G is the grid CUB's dispatch caps the first pass at (SMs × blocks an SM × 5,
// 5280 on an H200 by the preset's default): past G tiles (21.6 million floats) blocks take
// several tiles. CUB's values were met on one array each at 6, 25 and 30 million terms
// (docs/reveal.md).
#pragma once

#include <cstddef>

#include "sim/addition_steps.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

// The additions of cub_reduce over n >= 1 terms.
AdditionSteps cub_reduce_steps(size_t n, const Reducer::CubShape& shape);

}  // namespace fplab::sim
