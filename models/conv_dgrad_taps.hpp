// The terms of a convolution's direct input gradient (profiles::ConvDgrad::direct), gathered from
// the output gradient: one row per input pixel, the (channel, kernel row, kernel column) terms
// that a GEMM with the rearranged weight then adds in that order. Shared by models/conv2d.cpp and
// fplab.torch's CPU engine (python/src/conv_columns.cpp).
#pragma once

#include <cstddef>

namespace fplab::models {

// g is (batch, c_total, ho, wo) C-contiguous, the output gradient of an h x w input; channels
// [c0, c0 + channels) are gathered.
struct ConvTaps {
  size_t batch, c_total, c0, channels, h, w, ho, wo;
  long kh, kw, sh, sw, ph, pw, dh, dw;
};

// out, (batch·h·w) x (channels·kh·kw): row (b, y, x), column (c, i, j) holds g[b, c0 + c, oy, ox]
// where y + ph - i·dh = oy·sh and x + pw - j·dw = ox·sw lie on the output, else +0.
template <class T>
void dgrad_taps(const T* g, const ConvTaps& s, T* out);

}  // namespace fplab::models
