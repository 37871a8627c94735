// NCCL's all-reduce orders, element by element, and the all-reduce emulated in them.
//
// A ring all-reduce (NCCL_ALGO=Ring) gives each channel a contiguous range of the buffer and cuts
// it into loops of R chunks; chunk c of a loop is finished by the rank at ring position c, so its
// sum starts one position later and goes round the ring: x[ring[c+1]] + x[ring[c+2]] + ... +
// x[ring[c]], one rounding per addition. Two elements of one buffer are summed in different
// orders when they lie in chunks finished by different positions, or in channels with different
// rings. The layout (ranges, chunk sizes, rings) is what NCCL's host code chooses per call;
// nccl_ring_layout models it, and `tools/gpu/nccl_order` reveals it on real GPUs and checks the
// model (docs/results/nccl.md). Within one node NCCL's tree is a chain (tree_chain_order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fp/format.hpp"
#include "sim/addition_tree.hpp"

namespace fplab::sim {

struct NcclRingChannel {
  size_t offset = 0, count = 0;      // the channel's elements: [offset, offset + count)
  size_t chunk = 0, last_chunk = 0;  // elements a chunk holds; in the last, short loop last_chunk
  std::vector<int> ring;             // ring position -> rank
};

struct NcclRingLayout {
  int ranks = 0;
  size_t count = 0;
  std::vector<NcclRingChannel> channels;
};

enum class NcclProtocol { simple, ll, ll128 };
enum class NcclAlgorithm { ring, tree };

// What NCCL's host code is given for one all-reduce call.
struct NcclCall {
  size_t count = 0;          // elements
  size_t element_bytes = 4;  // 4 fp32, 2 bf16/fp16
  int ranks = 2;
  int comm_channels = 1;  // the communicator's channels (pinned by NCCL_MIN/MAX_NCHANNELS)
  NcclProtocol protocol = NcclProtocol::simple;
  size_t buffer_bytes = 0;              // NCCL_BUFFSIZE (or _LL_/_LL128_); 0: NCCL's default for the protocol
  int threads = 0;                      // NCCL_NTHREADS; 0: NCCL's default on NVLink (512, LL128 640)
  std::vector<std::vector<int>> rings;  // per channel (repeated when fewer); empty: 0, 1, ..., ranks - 1
};

// NCCL 2.28's layout for a ring all-reduce (its host partition into channel parts of 8 KiB cells,
// its chunk per protocol, and the channels a call of this size takes: docs/results/nccl.md says
// what was read in NCCL's source and what was measured). Throws std::invalid_argument on a call
// NCCL cannot make (no ranks, a ring that is not a permutation of the ranks, ...).
NcclRingLayout nccl_ring_layout(const NcclCall& call);
// NCCL's name of a protocol ("Simple", "LL", "LL128") and back (case-insensitive; throws).
std::string nccl_protocol_name(NcclProtocol protocol);
NcclProtocol parse_nccl_protocol(const std::string& name);

// An algorithm from NCCL's name of it ("Ring", "Tree"; case-insensitive; throws).
NcclAlgorithm parse_nccl_algorithm(const std::string& name);

// The ranks in the order element `e`'s sum takes them (the first two commute).
std::vector<int> ring_order(const NcclRingLayout& layout, size_t e);

// NCCL's tree all-reduce within one node: a chain from the root chain[0] to the leaf; the leaf's
// value goes up first, each rank adds its own: the order chain[R-1], chain[R-2], ..., chain[0].
std::vector<int> tree_chain_order(std::span<const int> chain);

// A chain: order[0] + order[1], then + order[2], ... (the tree of a fold).
AdditionTree chain_tree(std::span<const int> order);

// The order of a chain (chain_tree's inverse; the first two, which commute, by index), or
// nothing for a tree of another shape.
std::optional<std::vector<int>> chain_order(const AdditionTree& tree);

// The fold of in[order[0]][e], in[order[1]][e], ... in `format`, correctly rounded at every
// addition (NCCL's sum of fp32, bf16 or fp16: each step one rounding to the buffer's type).
double fold_in_order(const std::vector<std::vector<double>>& in, size_t e, std::span<const int> order,
                     const fp::Format& format);

// The all-reduce NCCL computes from `in` (one buffer per rank, all of one length): every element
// folded in its order, ring_order of `call`'s layout (ring) or the one-node chain 0, 1, ..., R - 1
// (tree), each addition rounded to nearest even in `format`, the buffers' type (fp32, bf16 or
// fp16; the values must already be that type's). call.count and call.ranks are taken from `in`;
// call.element_bytes from `format`. Measured equal to NCCL 2.28 on 2 and 4 GPUs, bit for bit
// (docs/results/nccl.md). Throws std::invalid_argument on buffers of unequal lengths, no buffers,
// or another format.
std::vector<double> emulate_nccl_all_reduce(const std::vector<std::vector<double>>& in, NcclAlgorithm algorithm,
                                            NcclCall call, const fp::Format& format);

}  // namespace fplab::sim
