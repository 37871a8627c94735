// gpu_mma_validate: the test sets and their generator: every tile from its own seeded stream
// (tool_rng.hpp), without libm, so that --replay re-creates a tile bit for bit anywhere.

#include <algorithm>
#include <cmath>
#include <thread>

#include "fp/round.hpp"
#include "tools/gpu/mma_validate.hpp"

using nlohmann::json;

namespace fplab::tools::gpu::mma {

// ---- test sets and the seeded generator

const std::vector<TestSet> kSets = {
    {"normal", Kind::normal, 0, 1 << 18, 1 << 11},
    {"mixed signs, 2^+-8", Kind::mixed, 0, 1 << 17, 1 << 11},
    {"wide exponents", Kind::wide, 0, 1 << 17, 1 << 11},
    {"acc alignment", Kind::align, 0, 1 << 17, 1 << 11},
    {"cancellation", Kind::cancel, 0, 1 << 17, 1 << 11},
    {"subnormals", Kind::subnormal, 0, 1 << 17, 1 << 11},
    {"zero/inf/NaN/max", Kind::edge, 0, 1 << 17, 1 << 11},
    {"chain K=256 normal", Kind::normal, 256, 1 << 12, 1 << 8},
    {"chain K=256 mixed", Kind::mixed, 256, 1 << 12, 1 << 8},
    {"chain K=64 cancellation", Kind::cancel, 64, 1 << 12, 1 << 8},
    {"chain K=64 acc alignment", Kind::align, 64, 1 << 12, 1 << 8},
};
size_t set_k(const TestSet& s, MmaInput in) { return s.k ? s.k : static_cast<size_t>(mma_k(in)); }

// Every tile has its own stream, keyed by (path, input, set, tile): any tile can be re-created
// alone (--replay) on any machine.
Rng tile_rng(MmaPath path, MmaInput in, size_t set, size_t tile) {
  return Rng({static_cast<uint64_t>(path), static_cast<uint64_t>(in), uint64_t{set}, uint64_t{tile}});
}

int top_field(const fp::Format& f) { return f.has_infinity() ? (1 << f.exp_bits) - 2 : (1 << f.exp_bits) - 1; }

// A finite code: random sign and fraction, biased exponent field in [lo, hi] (clamped).
uint32_t random_code(const fp::Format& f, int lo, int hi, Rng& rng) {
  lo = std::clamp(lo, 0, top_field(f));
  hi = std::clamp(hi, lo, top_field(f));
  for (;;) {
    const uint64_t field = lo + rng.below(hi - lo + 1), fraction = rng.next() & ((uint64_t{1} << f.man_bits) - 1);
    const uint64_t code = (rng.next() & 1) << (f.width() - 1) | field << f.man_bits | fraction;
    if (std::isfinite(f.decode(code))) return static_cast<uint32_t>(code);
  }
}

uint32_t draw(const fp::Format& f, Kind kind, Rng& rng) {
  const int bias = f.bias();
  switch (kind) {
    case Kind::normal:
      return code_of(f, rng.normal());
    case Kind::mixed:
      return random_code(f, bias - 8, bias + 8, rng);
    case Kind::wide:
      return f.exp_bits == 8 ? random_code(f, bias - 60, bias + 60, rng) : random_code(f, 0, top_field(f), rng);
    case Kind::align:
      return rng.below(8) == 0 ? 0 : random_code(f, bias - 2, bias + 2, rng);
    case Kind::cancel:
      return random_code(f, bias - 3, bias + 3, rng);
    case Kind::subnormal: {
      const uint64_t r = rng.below(6);
      if (r < 2) return random_code(f, 0, 0, rng);
      if (r == 2) return random_code(f, 1, 1, rng);
      if (r == 3 && f.exp_bits == 8) return random_code(f, 1, bias / 2, rng);
      return random_code(f, bias - 4, bias + 4, rng);
    }
    case Kind::edge: {
      const uint64_t r = rng.below(32);
      const bool negative = rng.next() & 1;
      if (r < 2) return static_cast<uint32_t>(uint64_t{negative} << (f.width() - 1));
      if (r == 2)
        return static_cast<uint32_t>(f.has_infinity() ? f.infinity_bits(negative) : f.max_finite_bits(negative));
      if (r == 3) return static_cast<uint32_t>(f.quiet_nan_bits(false));
      if (r < 6) return static_cast<uint32_t>(f.max_finite_bits(negative));
      return code_of(f, rng.normal());
    }
  }
  return 0;
}

// C for output (i, j): some sets place it relative to the largest product of that output.
float draw_c(Kind kind, Rng& rng, double largest_product, double sum) {
  const fp::Format f32 = fp::fp32();
  auto relative = [&](int lo, int hi) {
    if (largest_product == 0 || !std::isfinite(largest_product)) return static_cast<float>(rng.normal());
    const int e = std::clamp(std::ilogb(largest_product) + lo + static_cast<int>(rng.below(hi - lo + 1)), -149, 127);
    const double m = 1 + static_cast<double>(rng.next() >> 41) * 0x1p-23;
    return as_float(code_of(f32, (rng.next() & 1 ? -m : m) * p2(e)));
  };
  switch (kind) {
    case Kind::normal:
      return static_cast<float>(4 * rng.normal());
    case Kind::mixed:
      return as_float(random_code(f32, 127 - 10, 127 + 10, rng));
    case Kind::wide:
      return relative(-30, 6);
    case Kind::align:
      return relative(-34, 34);
    case Kind::cancel: {
      uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(-sum));
      if (rng.below(2) && u << 1) u ^= 1u << rng.below(3);  // near, not exact, cancellation
      return as_float(u);
    }
    case Kind::subnormal: {
      const uint64_t r = rng.below(4);
      if (r == 0) return as_float(random_code(f32, 0, 0, rng));
      if (r == 1) return as_float(random_code(f32, 1, 3, rng));
      if (r == 2) return rng.next() & 1 ? -0.0f : 0.0f;
      return relative(-10, 10);
    }
    case Kind::edge: {
      const uint64_t r = rng.below(16);
      const float sign = rng.next() & 1 ? -1.0f : 1.0f;
      if (r < 2) return sign * 0.0f;
      if (r == 2) return sign * INFINITY;
      if (r == 3) return NAN;
      if (r == 4) return sign * 0x1.fffffep127f;
      if (r == 5) return as_float(random_code(f32, 0, 0, rng));
      return static_cast<float>(4 * rng.normal());
    }
  }
  return 0;
}

// Tile `index` of a set: A (rows x K), B (K x 8), C (rows x 8), from its own seed.
void generate_tile(MmaPath path, MmaInput in, size_t set_index, size_t index, int rows, size_t K, uint32_t* A,
                   uint32_t* B, float* C) {
  const TestSet& set = kSets[set_index];
  const fp::Format& f = code_format(in);
  Rng rng = tile_rng(path, in, set_index, index);
  for (size_t i = 0; i < rows * K; ++i) A[i] = draw(f, set.kind, rng);
  for (size_t i = 0; i < K * 8; ++i) B[i] = draw(f, set.kind, rng);
  if (set.kind == Kind::cancel) {  // pairs of K indices whose products cancel, exactly or nearly
    const uint32_t sign = 1u << (f.width() - 1), unit = in == MmaInput::tf32 ? 1u << 13 : 1u;
    for (size_t kk = 0; kk + 1 < K; kk += 2) {
      if (rng.below(4) == 0) continue;
      for (int i = 0; i < rows; ++i) A[i * K + kk + 1] = A[i * K + kk];
      const bool near = rng.below(2);
      for (int j = 0; j < 8; ++j) {
        uint32_t code = B[kk * 8 + j] ^ sign;
        if (near && (code & (sign - 1)) > unit) code += rng.next() & 1 ? unit : 0u - unit;
        B[(kk + 1) * 8 + j] = code;
      }
    }
  }
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < 8; ++j) {
      double largest = 0, sum = 0;
      for (size_t kk = 0; kk < K; ++kk) {
        const double p = value(in, A[i * K + kk]) * value(in, B[kk * 8 + j]);
        if (std::isfinite(p)) largest = std::max(largest, std::fabs(p)), sum += p;
      }
      C[i * 8 + j] = draw_c(set.kind, rng, largest, sum);
    }
}

MmaTiles make_tiles(MmaPath path, MmaInput in, size_t set_index, size_t first, size_t count, int threads) {
  MmaTiles t;
  t.tiles = count;
  t.k = set_k(kSets[set_index], in);
  t.rows = mma_rows(path);
  t.a.resize(count * t.rows * t.k);
  t.b.resize(count * t.k * 8);
  t.c.resize(count * t.rows * 8);
  std::vector<std::thread> pool;
  for (int p = 0; p < threads; ++p)
    pool.emplace_back([&, p] {
      for (size_t i = p; i < count; i += threads)
        generate_tile(path, in, set_index, first + i, t.rows, t.k, &t.a[i * t.rows * t.k], &t.b[i * t.k * 8],
                      &t.c[i * t.rows * 8]);
    });
  for (auto& th : pool) th.join();
  return t;
}

}  // namespace fplab::tools::gpu::mma
