// Implementation noise: every nondeterministic step (atomic arrival orders, shuffles, stochastic
// rounding) draws from a counter-based stream keyed by (impl seed, op id, call number, tile), so
// one reduction can be replayed in isolation and the same impl seed replays a run bit for bit.
#pragma once

#include <cstdint>

#include "fp/counter_rng.hpp"

namespace fplab::sim {

struct NoiseKey {
  uint64_t impl_seed = 0;
  uint64_t op_id = 0;
  uint64_t call = 0;
  uint64_t tile = 0;  // output tile of a batched reduction: its outputs share atomic/shuffle orders
  uint64_t lane = 0;  // the output within the batch: stochastic rounding draws per output

  // The stream for one step: stage `stage`, group `group` of that stage. Streams of different
  // steps, tiles, calls, ops or seeds are independent.
  fp::CounterRng stream(uint64_t stage, uint64_t group) const {
    return fp::CounterRng(fp::mix_key({impl_seed, op_id, call, tile}), (stage << 40) ^ group);
  }
  // The stream stochastic rounding draws from: one per output, consumed in the order of its
  // additions.
  fp::CounterRng rounding_stream() const {
    return fp::CounterRng(fp::mix_key({impl_seed, op_id, call, tile, lane, 0x5352}), 0);
  }
};

}  // namespace fplab::sim
