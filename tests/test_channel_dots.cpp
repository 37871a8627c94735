// sim::channel_dots against the slow reference: for every channel, the dot product of its terms in
// the order o * inner + i must be dot_reference's over the same terms with the channel's own key
// (gemm_output_key of it, as a 1 x 1 GEMM's), in the layouts both callers use ((n, C): inner 1;
// (B, C, P)), for cuDNN's BatchNorm orders, an atomic one (each channel its own draw) and rounded
// products.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "sim/channel_dots.hpp"
#include "sim/engine.hpp"
#include "sim/reference_evaluator.hpp"

using namespace fplab;
using namespace fplab::sim;

TEST_CASE("channel_dots: each channel is dot_reference of its gathered terms under its own key") {
  std::mt19937_64 g(21);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (const char* text : {"strided(512):seq | contig(32):shfl_down | all:shfl_down",
                           "strided(512):seq | contig(32):tree | all:tree", "strided(16):seq | all:atomic"}) {
    for (const bool rounded : {false, true}) {
      Arithmetic arithmetic;
      arithmetic.products = rounded ? Products::rounded : Products::fused;
      for (const ChannelLayout layout : {ChannelLayout{700, 3, 1}, ChannelLayout{5, 4, 49}}) {
        const size_t size = layout.outer * layout.channels * layout.inner, n = layout.outer * layout.inner;
        std::vector<float> a(size), b(size);
        for (auto& v : a) v = d(g);
        for (auto& v : b) v = d(g);
        std::vector<NoiseKey> keys;
        for (size_t c = 0; c < layout.channels; ++c) keys.push_back({7, 100 + c, 3});
        std::vector<float> out(layout.channels);
        const Schedule schedule = parse_schedule(text);
        channel_dots(schedule, arithmetic, a.data(), b.data(), layout, keys, out.data());
        for (size_t c = 0; c < layout.channels; ++c) {
          std::vector<double> ac, bc;
          for (size_t o = 0; o < layout.outer; ++o)
            for (size_t i = 0; i < layout.inner; ++i) {
              ac.push_back(a[(o * layout.channels + c) * layout.inner + i]);
              bc.push_back(b[(o * layout.channels + c) * layout.inner + i]);
            }
          REQUIRE(ac.size() == n);
          const float expected =
              static_cast<float>(dot_reference(schedule, ac, bc, arithmetic, gemm_output_key(keys[c], 0, 0, 1)));
          INFO(text << (rounded ? " rounded" : " fused") << ", channel " << c << " of " << layout.channels);
          CHECK(out[c] == expected);
        }
      }
    }
  }
  std::vector<float> x(6), out(2);
  const std::vector<NoiseKey> one_key(1);
  CHECK_THROWS_AS(channel_dots(parse_schedule("all:seq"), Arithmetic{}, x.data(), x.data(), {3, 2, 1}, one_key,
                               out.data()),
                  std::invalid_argument);
}
