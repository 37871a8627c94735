#include "models/conv_dgrad_taps.hpp"

#include <vector>

namespace fplab::models {

template <class T>
void dgrad_taps(const T* g, const ConvTaps& s, T* out) {
  const size_t taps = s.channels * static_cast<size_t>(s.kh * s.kw);
  const long ho = static_cast<long>(s.ho), wo = static_cast<long>(s.wo);
  // Per input row y, the output row each (channel, kernel row) meets, or none.
  std::vector<const T*> lines(s.channels * static_cast<size_t>(s.kh));
  for (size_t b = 0; b < s.batch; ++b)
    for (size_t y = 0; y < s.h; ++y) {
      for (size_t c = 0; c < s.channels; ++c)
        for (long i = 0; i < s.kh; ++i) {
          const long ys = static_cast<long>(y) + s.ph - i * s.dh;
          const bool on = ys >= 0 && ys % s.sh == 0 && ys / s.sh < ho;
          lines[c * static_cast<size_t>(s.kh) + static_cast<size_t>(i)] =
              on ? g + ((b * s.c_total + s.c0 + c) * s.ho + static_cast<size_t>(ys / s.sh)) * s.wo : nullptr;
        }
      for (size_t x = 0; x < s.w; ++x) {
        T* tap = out + ((b * s.h + y) * s.w + x) * taps;
        for (const T* line : lines) {
          for (long j = 0; j < s.kw; ++j) {
            const long xs = static_cast<long>(x) + s.pw - j * s.dw;
            tap[j] = line && xs >= 0 && xs % s.sw == 0 && xs / s.sw < wo ? line[xs / s.sw] : T(0);
          }
          tap += s.kw;
        }
      }
    }
}

template void dgrad_taps<float>(const float*, const ConvTaps&, float*);
template void dgrad_taps<double>(const double*, const ConvTaps&, double*);

}  // namespace fplab::models
