#include "sim/channel_dots.hpp"

#include <stdexcept>
#include <vector>

#include "sim/engine.hpp"

namespace fplab::sim {

void channel_dots(const Schedule& schedule, const Arithmetic& arithmetic, const float* a, const float* b,
                  ChannelLayout layout, std::span<const NoiseKey> keys, float* out) {
  if (keys.size() != layout.channels) throw std::invalid_argument("channel_dots: one noise key per channel");
  const size_t n = layout.outer * layout.inner;
  std::vector<float> ac(n), bc(n);
  for (size_t c = 0; c < layout.channels; ++c) {
    for (size_t o = 0; o < layout.outer; ++o)
      for (size_t i = 0; i < layout.inner; ++i) {
        const size_t from = (o * layout.channels + c) * layout.inner + i;
        ac[o * layout.inner + i] = a[from];
        bc[o * layout.inner + i] = b[from];
      }
    gemm(schedule, ac.data(), bc.data(), out + c, {1, 1, n}, arithmetic, keys[c]);
  }
}

}  // namespace fplab::sim
