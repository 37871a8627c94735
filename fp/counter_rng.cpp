#include "fp/counter_rng.hpp"

namespace fplab::fp {

uint64_t mix_key(std::initializer_list<uint64_t> words) {
  uint64_t h = kMixKeyStart;
  for (uint64_t w : words) h = mix_word(h, w);
  return h;
}

}  // namespace fplab::fp
