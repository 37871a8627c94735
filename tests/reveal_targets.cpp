// Sums and dot products whose addition orders are known, for fplab reveal's tests: the library a
// user would point --so at, with orders a real BLAS or framework uses (a loop, eight SIMD-like
// lanes then a tree, recursive halving, a double accumulator, an FMA chain), and two that are not
// one tree of float additions (compensated, not a sum). C symbols; built with -ffp-contract=off.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {

float seq_sum(const float* x, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; ++i) s += x[i];
  return s;
}

float reverse_sum(const float* x, size_t n) {
  float s = 0.0f;
  for (size_t i = n; i-- > 0;) s += x[i];
  return s;
}

/* Eight accumulators over strided lanes, then ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). */
float lanes8_sum(const float* x, size_t n) {
  float l[8] = {};
  for (size_t i = 0; i < n; ++i) l[i % 8] += x[i];
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* The first half (n / 2 terms) and the rest, each the same way. */
float pairwise_sum(const float* x, size_t n) {
  if (n == 1) return x[0];
  return pairwise_sum(x, n / 2) + pairwise_sum(x + n / 2, n - n / 2);
}

/* A loop into a double, rounded to float once. */
float double_sum(const float* x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += x[i];
  return static_cast<float>(s);
}

/* The partial sums added in the order of a fresh random permutation of order[0..count) (Fisher-Yates
   with an LCG whose state lives in the caller), as atomicAdds arrive on a GPU. */
static float sum_in_a_fresh_order(const float* partial, size_t* order, size_t count, uint64_t* state) {
  for (size_t b = count; b > 1; --b) {
    *state = *state * 6364136223846793005u + 1442695040888963407u;
    const size_t k = (*state >> 33) % b, t = order[b - 1];
    order[b - 1] = order[k];
    order[k] = t;
  }
  float s = 0.0f;
  for (size_t b = 0; b < count; ++b) s += partial[order[b]];
  return s;
}

/* Blocks of eight summed in a loop, then added to the result in an order that changes at every
   call, as blocks' atomicAdds arrive on a GPU: a fresh random permutation (an LCG) each time. */
float blocks_any_order_sum(const float* x, size_t n) {
  static uint64_t state = 12345;
  float partial[4096];
  const size_t blocks = (n + 7) / 8 < 4096 ? (n + 7) / 8 : 4096;
  size_t order[4096];
  for (size_t b = 0; b < blocks; ++b) {
    partial[b] = 0.0f;
    for (size_t i = 8 * b; i < 8 * b + 8 && i < n; ++i) partial[b] += x[i];
    order[b] = b;
  }
  return sum_in_a_fresh_order(partial, order, blocks, &state);
}

/* Images of 20 terms, each cut into tiles of 8 that restart at the image (8, 8, 4), each tile
   summed in a loop, the tiles added in an order that changes at every call: cuDNN's weight
   gradient (tiles of 512 pixels per image of 784) in small. */
float image_tiles_any_order_sum(const float* x, size_t n) {
  static uint64_t state = 777;
  float partial[4096];
  size_t order[4096], tiles = 0;
  for (size_t image = 0; image < n && tiles < 4096; image += 20)
    for (size_t from = image; from < image + 20 && from < n && tiles < 4096; from += 8) {
      partial[tiles] = 0.0f;
      for (size_t i = from; i < from + 8 && i < image + 20 && i < n; ++i) partial[tiles] += x[i];
      order[tiles] = tiles;
      ++tiles;
    }
  return sum_in_a_fresh_order(partial, order, tiles, &state);
}

/* BLAS's signatures (cblas_sdot, cblas_sgemm), as fplab reveal --signature calls a real BLAS:
   eight lanes of rounded products added in lane order, then ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7));
   and a row-major GEMM whose every output is an FMA chain over K (order 101 = CblasRowMajor, no
   transposes; other layouts are not modelled). */
float lanes8_cblas_sdot(int n, const float* x, int incx, const float* y, int incy) {
  float l[8] = {};
  for (int i = 0; i < n; ++i) {
    const float p = x[i * incx] * y[i * incy];
    l[i % 8] += p;
  }
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

void fma_chain_cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float* a,
                           int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (order != 101 || transa != 111 || transb != 111) return;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int t = 0; t < k; ++t) s = std::fma(a[i * lda + t], b[t * ldb + j], s);
      c[i * ldc + j] = beta == 0.0f ? alpha * s : alpha * s + beta * c[i * ldc + j];
    }
}

float fma_dot(const float* a, const float* b, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; ++i) s = std::fma(a[i], b[i], s);
  return s;
}

float rounded_dot(const float* a, const float* b, size_t n) {
  float s = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float p = a[i] * b[i];
    s += p;
  }
  return s;
}

/* Float products into a double, as OpenBLAS's sdot adds fewer than 32 terms. */
float float_products_double_sum_dot(const float* a, const float* b, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float p = a[i] * b[i];
    s += p;
  }
  return static_cast<float>(s);
}

/* An H100's TF32 GEMM as docs/reveal.md found it, written out independently of sim/tensor_core:
   factors rounded to tf32 (10 fraction bits, ties away), then steps of eight products and the
   running sum, each term cut toward zero to the grid 2^(E - 25) of the largest term's exponent E
   (a product's: the sum of its factors' exponents), the exact sum rounded toward zero to float.
   Every value here is exact in a double: products of 11-bit significands, sums of nine terms on
   one grid spanning under 30 bits. Normal, finite inputs only. */
static float tf32_rounded(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = (u + 0x1000u) & ~0x1fffu;
  std::memcpy(&x, &u, sizeof u);
  return x;
}

static double toward_zero_float(double v) {
  float f = static_cast<float>(v);  // nearest
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return f;
}

float tf32_mma8_dot(const float* a, const float* b, size_t n) {
  double acc = 0.0;
  for (size_t start = 0; start < n; start += 8) {
    const size_t end = start + 8 < n ? start + 8 : n;
    double term[9];
    int exponent[9], count = 0;
    if (acc != 0.0) {
      term[count] = acc;
      exponent[count++] = std::ilogb(acc);
    }
    for (size_t i = start; i < end; ++i) {
      const float x = tf32_rounded(a[i]), y = tf32_rounded(b[i]);
      if (x == 0.0f || y == 0.0f) continue;
      term[count] = static_cast<double>(x) * y;
      exponent[count++] = std::ilogb(x) + std::ilogb(y);
    }
    int top = exponent[0];
    for (int k = 1; k < count; ++k) top = exponent[k] > top ? exponent[k] : top;
    double sum = 0.0;
    for (int k = 0; k < count; ++k) {
      const double grid = std::ldexp(1.0, top - 25);
      sum += std::trunc(term[k] / grid) * grid;
    }
    acc = count ? toward_zero_float(sum) : acc;
  }
  return static_cast<float>(acc);
}

float kahan_sum(const float* x, size_t n) {
  float s = 0.0f, c = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float y = x[i] - c, t = s + y;
    c = (t - s) - y;
    s = t;
  }
  return s;
}

float twice_the_first(const float* x, size_t n) { return n ? 2.0f * x[0] : 0.0f; }

}  // extern "C"
