#include "fp/counter_rng.hpp"

namespace fplab::fp {

uint64_t mix_key(std::initializer_list<uint64_t> words) {
  // SplitMix64 finaliser folded over the words: distinct tuples give unrelated keys.
  uint64_t h = 0x6A09E667F3BCC909ull;
  for (uint64_t w : words) {
    h ^= w + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  return h;
}

}  // namespace fplab::fp
