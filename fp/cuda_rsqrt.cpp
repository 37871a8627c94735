#include "fp/cuda_rsqrt.hpp"

#include <zlib.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <vector>

namespace fplab::fp {

extern const unsigned char kCudaRsqrtDeltaGz[];  // cuda_rsqrt_table.cpp, generated at build time
extern const std::size_t kCudaRsqrtDeltaGz_size;

namespace {

constexpr uint32_t kOne = 0x3F800000;   // the bits of 1.0f: [1, 4) is kOne .. kOne + 2^24 - 1
constexpr size_t kSpan = size_t{1} << 24;

// The table's 2^24 differences + 2, two bits each, four to a byte from the low bits up.
const std::vector<uint8_t>& packed_table() {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> out(kSpan / 4);
    z_stream z{};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error("cuda_rsqrt: zlib would not start");
    z.next_in = const_cast<Bytef*>(kCudaRsqrtDeltaGz);
    z.avail_in = static_cast<uInt>(kCudaRsqrtDeltaGz_size);
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    const int status = inflate(&z, Z_FINISH);
    const bool whole = status == Z_STREAM_END && z.avail_out == 0;
    inflateEnd(&z);
    if (!whole) throw std::runtime_error("cuda_rsqrt: the embedded table does not unpack to 2^24 entries");
    return out;
  }();
  return table;
}

// Whether 1/sqrt(m) > h for m, h > 0 given by float bits, decided exactly: h^2 m against 1.
// m = M 2^(e - 23) (M < 2^24, e = 0 or 1) and h = H 2^-s (H <= 2^26 for s = 26): H^2 M against
// 2^(2s + 23 - e), at most 2^76, in 128-bit integers.
int compare_midpoint(uint32_t m_bits, uint64_t h_units, int h_shift) {
  const unsigned __int128 m_units = (m_bits & 0x7FFFFF) | 0x800000;  // m = m_units 2^(e - 23)
  const int m_exponent = static_cast<int>(m_bits >> 23) - 127;        // 0 or 1 on [1, 4)
  const unsigned __int128 lhs = static_cast<unsigned __int128>(h_units) * h_units * m_units;
  const int power = 2 * h_shift + 23 - m_exponent;                     // 1 = 2^power units of lhs
  const unsigned __int128 one = static_cast<unsigned __int128>(1) << power;
  return lhs < one ? 1 : lhs > one ? -1 : 0;  // 1: 1/sqrt(m) above h
}

// The correctly rounded rsqrt of m in [1, 4): float64's 1/sqrt is within 2^-51 relative, so the
// float32 nearest it is right unless it lies near a float32 midpoint; there, exact integers decide.
float rsqrt_of_significand(float m) {
  const double approx = 1.0 / std::sqrt(static_cast<double>(m));
  const float y = static_cast<float>(approx);
  for (const float other : {std::nextafter(y, 2.0f), std::nextafter(y, 0.0f)}) {
    const double middle = (static_cast<double>(y) + other) / 2;
    if (std::abs(approx - middle) > approx * 0x1p-40) continue;
    // middle = H 2^-26 exactly: the results lie in (0.5, 1], on a grid of 2^-25 at the finest.
    const uint64_t h_units = static_cast<uint64_t>(std::ldexp(middle, 26));
    const int side = compare_midpoint(std::bit_cast<uint32_t>(m), h_units, 26);
    const float above = std::max(y, other), below = std::min(y, other);
    if (side != 0) return side > 0 ? above : below;
    return (std::bit_cast<uint32_t>(below) & 1) ? above : below;  // on the midpoint: the even one
  }
  return y;
}

// x > 0 finite as m 4^k, m in [1, 4) (subnormals normalised first).
float significand_of(float x, int& k) {
  int e = 0;
  const float f = std::frexp(x, &e);  // x = f 2^e, f in [0.5, 1)
  const int exponent = e - 1;         // x = (2f) 2^exponent, 2f in [1, 2)
  k = exponent >= 0 ? exponent / 2 : -((1 - exponent) / 2);  // floor(exponent / 2)
  return std::ldexp(f, e - 2 * k);                           // in [1, 4)
}

}  // namespace

std::span<const uint8_t> cuda_rsqrt_packed_table() { return packed_table(); }

int cuda_rsqrt_delta(uint32_t index) {
  return static_cast<int>((packed_table()[index >> 2] >> (2 * (index & 3))) & 3) - 2;
}

float rsqrt_correctly_rounded(float x) {
  int k = 0;
  const float m = significand_of(x, k);
  return std::ldexp(rsqrt_of_significand(m), -k);  // exact: the results are normal
}

float cuda_rsqrt(float x) {
  if (std::isnan(x) || x < 0) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0) return std::copysign(std::numeric_limits<float>::infinity(), x);
  if (std::isinf(x)) return 0.0f;
  int k = 0;
  const float m = significand_of(x, k);
  const uint32_t index = std::bit_cast<uint32_t>(m) - kOne;
  const uint32_t bits = std::bit_cast<uint32_t>(rsqrt_of_significand(m)) + cuda_rsqrt_delta(index);
  return std::ldexp(std::bit_cast<float>(bits), -k);
}

}  // namespace fplab::fp
