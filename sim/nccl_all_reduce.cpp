#include "sim/nccl_all_reduce.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <stdexcept>

#include "fp/arithmetic.hpp"
#include "fp/number_text.hpp"
#include "fp/round.hpp"

namespace fplab::sim {
namespace {

// NCCL's names are read in any case (NCCL_ALGO=ring is NCCL's Ring).
std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

size_t divide_up(size_t a, size_t b) { return (a + b - 1) / b; }

// NCCL_STEPS: a connection's buffer is cut into 8 steps.
constexpr size_t kSteps = 8;
// Every channel's share is a whole number of cells, sized so that each carries 16 KiB of traffic.
constexpr size_t kTrafficPerCell = 16384;

void check_ring(const std::vector<int>& ring, int ranks) {
  std::vector<char> seen(static_cast<size_t>(ranks), 0);
  if (ring.size() != static_cast<size_t>(ranks))
    throw std::invalid_argument("a ring of " + std::to_string(ring.size()) + " ranks for an all-reduce over " +
                                std::to_string(ranks));
  for (int r : ring) {
    if (r < 0 || r >= ranks || seen[static_cast<size_t>(r)])
      throw std::invalid_argument("a ring must hold each rank 0 .. " + std::to_string(ranks - 1) + " once");
    seen[static_cast<size_t>(r)] = 1;
  }
}

}  // namespace

std::string nccl_protocol_name(NcclProtocol p) {
  switch (p) {
    case NcclProtocol::simple:
      return "Simple";
    case NcclProtocol::ll:
      return "LL";
    case NcclProtocol::ll128:
      return "LL128";
  }
  return "?";
}

NcclProtocol parse_nccl_protocol(const std::string& name) {
  const std::string lower = lowercase(name);
  if (lower == "simple") return NcclProtocol::simple;
  if (lower == "ll") return NcclProtocol::ll;
  if (lower == "ll128") return NcclProtocol::ll128;
  throw std::invalid_argument("unknown NCCL protocol '" + name + "' (Simple, LL or LL128)");
}

NcclRingLayout nccl_ring_layout(const NcclCall& call) {
  const size_t E = call.element_bytes;
  if (call.ranks < 1) throw std::invalid_argument("an all-reduce needs at least one rank");
  if (call.comm_channels < 1 || call.comm_channels > 64)
    throw std::invalid_argument("NCCL has 1 to 64 channels, not " + std::to_string(call.comm_channels));
  if (E != 1 && E != 2 && E != 4 && E != 8) throw std::invalid_argument("elements of 1, 2, 4 or 8 bytes");
  for (const auto& ring : call.rings) check_ring(ring, call.ranks);
  const auto R = static_cast<size_t>(call.ranks);
  const auto C = static_cast<size_t>(call.comm_channels);
  const bool ll = call.protocol == NcclProtocol::ll, ll128 = call.protocol == NcclProtocol::ll128;

  // The channels this call takes: fewer for a small message (a block of threads per channel,
  // each thread worth `threshold` bytes before another channel pays).
  const size_t threads = call.threads ? static_cast<size_t>(call.threads) : (ll128 ? 640 : 512);
  const size_t threshold = ll ? 8 * R : ll128 ? 8 : 64;
  const size_t bytes = call.count * E;
  size_t channels = C;
  while (bytes < channels * threads * threshold && channels >= 2) --channels;

  // The host's partition: the traffic (2 bytes a byte for an all-reduce, 4 times that in LL's
  // half-used lines) shared between the channels in whole cells; the first channel's part, the
  // middle ones', the last's.
  const size_t traffic_per_byte = ll ? 8 : 2;
  const size_t traffic = std::max<size_t>(kTrafficPerCell, bytes * traffic_per_byte);
  const size_t per_channel = std::max<size_t>(kTrafficPerCell, traffic / channels);
  const size_t cell_bytes = divide_up(divide_up(kTrafficPerCell, traffic_per_byte), 16) * 16;
  const size_t per_cell = cell_bytes / E;
  const size_t cells = divide_up(bytes, cell_bytes);
  size_t cells_per_channel = std::min(cells, divide_up(per_channel, kTrafficPerCell));
  const size_t cells_lo = C == 1 ? cells : std::min(cells, divide_up(per_channel, kTrafficPerCell));
  size_t mid = cells_per_channel ? (cells - cells_lo) / cells_per_channel : 0;
  size_t cells_hi = cells_per_channel ? (cells - cells_lo) % cells_per_channel : 0;
  if ((cells_lo ? 1 : 0) + mid + (cells_hi ? 1 : 0) > C) {
    mid = C - 2;
    cells_per_channel = (cells - cells_lo) / (mid + 1);
    cells_hi = cells_per_channel + (cells - cells_lo) % (mid + 1);
  }
  if (cells_hi == 0 && mid > 0) {
    --mid;
    cells_hi = cells_per_channel;
  }
  size_t count_lo = cells_lo * per_cell, count_mid = mid ? cells_per_channel * per_cell : 0,
         count_hi = cells_hi * per_cell;
  const size_t excess = cells * per_cell - call.count;
  (count_hi ? count_hi : count_lo) -= excess;

  // A chunk: 4 of a buffer's 8 steps in Simple, half a step in LL, 15/16 of one in LL128, in
  // whole grains (512, 16 and 1920 bytes).
  const size_t buffer = call.buffer_bytes ? call.buffer_bytes
                        : ll              ? 8 * 512 * 8 * 16
                        : ll128           ? 120 * 640 * 8 * 8
                                          : 4 << 20;
  const size_t step = buffer / kSteps;
  const size_t grain = ll ? 16 : ll128 ? 1920 : 512;
  size_t chunk_bytes = ll ? step / 2 : ll128 ? step * 15 / 16 : step * 4;
  chunk_bytes = chunk_bytes / grain * grain;
  if (chunk_bytes < E)
    throw std::invalid_argument("an NCCL buffer of " + std::to_string(buffer) + " bytes is too small");

  NcclRingLayout layout;
  layout.ranks = call.ranks;
  layout.count = call.count;
  std::vector<int> identity(R);
  for (size_t r = 0; r < R; ++r) identity[r] = static_cast<int>(r);
  size_t offset = 0;
  auto add = [&](size_t count) {
    const size_t id = layout.channels.size();
    NcclRingChannel ch;
    ch.offset = offset;
    ch.count = count;
    ch.chunk = chunk_bytes / E;
    // The last loop, shorter than R chunks, cuts what is left into R chunks of whole 16 bytes.
    const size_t loop = R * ch.chunk, left = count % loop;
    ch.last_chunk =
        left ? divide_up(divide_up(left, R), 16 / std::min<size_t>(E, 16)) * (16 / std::min<size_t>(E, 16)) : ch.chunk;
    ch.ring = call.rings.empty() ? identity : call.rings[id % call.rings.size()];
    layout.channels.push_back(std::move(ch));
    offset += count;
  };
  if (call.count == 0) return layout;
  add(count_lo);
  for (size_t k = 0; k < mid; ++k) add(count_mid);
  if (count_hi) add(count_hi);
  return layout;
}

std::vector<int> ring_order(const NcclRingLayout& layout, size_t e) {
  if (e >= layout.count)
    throw std::out_of_range("element " + std::to_string(e) + " of " + std::to_string(layout.count));
  // The channels tile [0, count) in order: the last that starts at or before e holds it.
  const auto after = std::upper_bound(layout.channels.begin(), layout.channels.end(), e,
                                      [](size_t x, const NcclRingChannel& c) { return x < c.offset; });
  const NcclRingChannel* ch = &*std::prev(after);
  const auto R = static_cast<size_t>(layout.ranks);
  const size_t o = e - ch->offset, loop = R * ch->chunk;
  const size_t base = o / loop * loop;
  const size_t chunk = ch->count - base >= loop ? ch->chunk : ch->last_chunk;
  const size_t c = (o - base) / chunk;
  std::vector<int> order(R);
  for (size_t k = 0; k < R; ++k) order[k] = ch->ring[(c + 1 + k) % R];
  return order;
}

std::vector<int> tree_chain_order(std::span<const int> chain) { return {chain.rbegin(), chain.rend()}; }

AdditionTree chain_tree(std::span<const int> order) {
  AdditionTree t;
  t.terms = order.size();
  if (order.empty()) return t;
  size_t acc = static_cast<size_t>(order[0]);
  for (size_t k = 1; k < order.size(); ++k) acc = t.add({acc, static_cast<size_t>(order[k])});
  t.root = acc;
  return t;
}

std::optional<std::vector<int>> chain_order(const AdditionTree& t) {
  std::vector<int> reversed;
  size_t node = t.root;
  while (node >= t.terms) {
    const auto& kids = t.nodes[node - t.terms];
    if (kids.size() != 2) return std::nullopt;
    const bool left_leaf = kids[0] < t.terms, right_leaf = kids[1] < t.terms;
    if (left_leaf && right_leaf) {
      reversed.push_back(static_cast<int>(std::max(kids[0], kids[1])));
      reversed.push_back(static_cast<int>(std::min(kids[0], kids[1])));
      break;
    }
    if (!left_leaf && !right_leaf) return std::nullopt;
    reversed.push_back(static_cast<int>(left_leaf ? kids[0] : kids[1]));
    node = left_leaf ? kids[1] : kids[0];
  }
  if (t.terms == 1) reversed.push_back(static_cast<int>(t.root));
  return std::vector<int>(reversed.rbegin(), reversed.rend());
}

double fold_in_order(const std::vector<std::vector<double>>& in, size_t e, std::span<const int> order,
                     const fp::Format& format) {
  const fp::RoundingOptions rne(fp::Mode::rne);
  double acc = in[static_cast<size_t>(order[0])][e];
  for (size_t k = 1; k < order.size(); ++k) acc = fp::add(acc, in[static_cast<size_t>(order[k])][e], format, rne);
  return acc;
}

NcclAlgorithm parse_nccl_algorithm(const std::string& name) {
  const std::string lower = lowercase(name);
  if (lower == "ring") return NcclAlgorithm::ring;
  if (lower == "tree") return NcclAlgorithm::tree;
  throw std::invalid_argument("unknown NCCL algorithm '" + name + "' (Ring or Tree)");
}

std::vector<double> emulate_nccl_all_reduce(const std::vector<std::vector<double>>& in, NcclAlgorithm algorithm,
                                            NcclCall call, const fp::Format& format) {
  if (in.empty()) throw std::invalid_argument("an all-reduce needs at least one rank's buffer");
  for (const auto& buffer : in)
    if (buffer.size() != in[0].size())
      throw std::invalid_argument("the ranks' buffers differ in length (" + std::to_string(in[0].size()) + " and " +
                                  std::to_string(buffer.size()) + " elements)");
  if (format == fp::fp32())
    call.element_bytes = 4;
  else if (format == fp::bf16() || format == fp::fp16())
    call.element_bytes = 2;
  else
    throw std::invalid_argument("NCCL all-reduces fp32, bf16 or fp16 buffers here, not " + format.name);
  call.count = in[0].size();
  call.ranks = static_cast<int>(in.size());
  // A value the buffer's type cannot hold would be rounded once more than NCCL rounds it.
  const fp::RoundingOptions rne(fp::Mode::rne);
  for (size_t r = 0; r < in.size(); ++r)
    for (size_t e = 0; e < call.count; ++e) {
      const double v = in[r][e];
      if (!std::isnan(v) && fp::round_double(v, format, rne).value != v)
        throw std::invalid_argument("buffer " + std::to_string(r) + ", element " + std::to_string(e) + ": " +
                                    fp::format_double(v) + " is not a value of " + format.name +
                                    ", the buffers' type (round them to it first)");
    }
  // The tree takes no layout, but a call NCCL would refuse is refused for it too.
  (void)nccl_ring_layout(NcclCall{.count = 0, .element_bytes = call.element_bytes, .ranks = call.ranks,
                                  .comm_channels = call.comm_channels, .protocol = call.protocol});
  std::vector<double> out(call.count);
  if (algorithm == NcclAlgorithm::tree) {
    std::vector<int> chain(in.size());
    for (size_t r = 0; r < chain.size(); ++r) chain[r] = static_cast<int>(r);
    const std::vector<int> order = tree_chain_order(chain);
    for (size_t e = 0; e < call.count; ++e) out[e] = fold_in_order(in, e, order, format);
    return out;
  }
  const NcclRingLayout layout = nccl_ring_layout(call);
  for (size_t e = 0; e < call.count; ++e) out[e] = fold_in_order(in, e, ring_order(layout, e), format);
  return out;
}

}  // namespace fplab::sim
