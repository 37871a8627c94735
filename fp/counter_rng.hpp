// A counter-based random stream: the n-th number depends only on (key, n), so any draw can be
// replayed in isolation and streams for different keys never interact.
//
// The generator is Philox4x32-10 (Salmon et al., SC'11), which passes BigCrush; it is used
// here for reproducibility, not for cryptography.
#pragma once

#include <array>
#include <cstdint>

namespace fplab::fp {

// Philox4x32 with 10 rounds: 128-bit counter, 64-bit key -> 128 random bits.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

class CounterRng {
 public:
  // The key identifies the stream (e.g. a seed, or a seed mixed with an op id, call, tile);
  // `stream` selects one of 2^64 independent sub-streams of that key.
  explicit CounterRng(uint64_t key, uint64_t stream = 0) : key_(key), stream_(stream) {}

  uint64_t next() { return at(position_++); }
  // The n-th number of the stream, without moving it.
  uint64_t at(uint64_t n) const;
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  // Uniform in [0, bound) without modulo bias; bound > 0.
  uint64_t below(uint64_t bound);

  uint64_t position() const { return position_; }
  void seek(uint64_t n) { position_ = n; }

 private:
  uint64_t key_;
  uint64_t stream_;
  uint64_t position_ = 0;
};

// Mixes several words into one 64-bit key (e.g. impl seed, op id, call number, tile).
uint64_t mix_key(std::initializer_list<uint64_t> words);

}  // namespace fplab::fp
