// A counter-based random stream: the n-th number depends only on (key, n), so any draw can be
// replayed in isolation and streams for different keys never interact.
//
// The generator is Philox4x32-10 (Salmon et al., SC'11), which passes BigCrush; it is used
// here for reproducibility, not for cryptography. The stream is header-only and, compiled by
// nvcc, callable on the device too: sim/cuda/gpu_seeded.cu draws the CPU engine's orders there.
#pragma once

#include <cstdint>
#include <initializer_list>

#if defined(__CUDACC__)
#define FPLAB_HOST_DEVICE __host__ __device__
#else
#define FPLAB_HOST_DEVICE
#endif

namespace fplab::fp {

// Philox4x32 with 10 rounds on the 128-bit counter (c0, c1, c2, c3) and the 64-bit key (k0, k1):
// the first two of the four output words, as one number (the other two are not used).
FPLAB_HOST_DEVICE inline uint64_t philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                                uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0;
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0, n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1, n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return (uint64_t{c0} << 32) | c1;
}

class CounterRng {
 public:
  // The key identifies the stream (e.g. a seed, or a seed mixed with an op id, call, tile);
  // `stream` selects one of 2^64 independent sub-streams of that key.
  FPLAB_HOST_DEVICE explicit CounterRng(uint64_t key, uint64_t stream = 0) : key_(key), stream_(stream) {}

  FPLAB_HOST_DEVICE uint64_t next() { return at(position_++); }
  // The n-th number of the stream, without moving it: Philox on the counter (n, stream).
  FPLAB_HOST_DEVICE uint64_t at(uint64_t n) const {
    return philox4x32_10(static_cast<uint32_t>(n), static_cast<uint32_t>(n >> 32), static_cast<uint32_t>(stream_),
                         static_cast<uint32_t>(stream_ >> 32), static_cast<uint32_t>(key_),
                         static_cast<uint32_t>(key_ >> 32));
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  // Uniform in [0, bound) without modulo bias; bound > 0. Lemire's multiply-shift with
  // rejection of the biased low range: the threshold 2^64 mod bound (a 64-bit division, costly
  // on a GPU) is below bound, so a low product of at least bound is taken without computing it.
  FPLAB_HOST_DEVICE uint64_t below(uint64_t bound) {
    uint64_t draw;
    while (!lemire(next(), bound, draw)) {
    }
    return draw;
  }
  // One try of below's draw from the number x: true and draw = x·bound / 2^64 where x is taken,
  // false where it is rejected (probability below bound / 2^64; below() then takes the next number).
  // For callers that draw from known positions of the stream in parallel (sim/cuda/gpu_seeded.cu).
  FPLAB_HOST_DEVICE static bool lemire(uint64_t x, uint64_t bound, uint64_t& draw) {
    const uint64_t low = x * bound;
    draw = high_product(x, bound);
    return low >= bound || low >= (0 - bound) % bound;
  }

  FPLAB_HOST_DEVICE uint64_t position() const { return position_; }
  FPLAB_HOST_DEVICE void seek(uint64_t n) { position_ = n; }

 private:
  FPLAB_HOST_DEVICE static uint64_t high_product(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
    return __umul64hi(a, b);
#else
    return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
  }

  uint64_t key_;
  uint64_t stream_;
  uint64_t position_ = 0;
};

// Mixes several words into one 64-bit key (e.g. impl seed, op id, call number, tile): the
// SplitMix64 finaliser folded over the words from kMixKeyStart, so that distinct tuples give
// unrelated keys. mix_key({a, b, c}) == mix_word(mix_word(mix_word(kMixKeyStart, a), b), c): a
// prefix can be mixed once and finished elsewhere (on the device, one tile per thread).
uint64_t mix_key(std::initializer_list<uint64_t> words);

inline constexpr uint64_t kMixKeyStart = 0x6A09E667F3BCC909ull;

FPLAB_HOST_DEVICE inline uint64_t mix_word(uint64_t h, uint64_t w) {
  h ^= w + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 27;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 31;
  return h;
}

}  // namespace fplab::fp
