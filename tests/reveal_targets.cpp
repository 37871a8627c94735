// Sums and dot products whose addition orders are known, for fplab reveal's tests: the library a
// user would point --so at, with orders a real BLAS or framework uses (a loop, eight SIMD-like
// lanes then a tree, recursive halving, a double accumulator, an FMA chain), and two that are not
// one tree of float additions (compensated, not a sum). C symbols; built with -ffp-contract=off.
#include <cmath>
#include <cstddef>

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
