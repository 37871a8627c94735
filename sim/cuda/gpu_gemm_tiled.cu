// The tiled FMA-chain GEMM kernels (gpu_gemm_tiled.hpp). Each output's chain is the 64 x 64
// kernel's: fmaf over its part of K in K order (or, products rounded, each product rounded and
// added: chain_step), nothing added for a K index outside the part. What differs is how the work is
// laid out, for speed.
// Wide tiles: a thread holds 8 x 8 outputs (rows ty*4 + 0..3 and BM/2 + ty*4 + 0..3, columns
// likewise), so that each shared-memory load of a K step (four float4) feeds 64 FMAs rather than
// 16; the A and B tiles of the next K step are loaded from global memory into registers while the
// current one is computed, and stored into the other of two shared buffers, one barrier a step.
// Thin tiles: 2 x 2 outputs a thread and a pipeline of their own (cp.async, three buffers, K 64 a
// stage), for GEMMs whose outputs are too few to fill the chip in wide tiles (below); medium tiles,
// 4 x 4 a thread in the same pipeline, K 32 a stage, where such a GEMM's parts give enough blocks
// of 32 x 64; and the medium tile for the convolutions' chains with their operand gathered
// (gather_fma_chains).
#include "sim/cuda/gpu_gemm_tiled.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/fast_divide.hpp"

namespace fplab::sim::gpu::detail {
namespace {

constexpr int kTileK = 8;

// Where the wide kernel's A comes from. A thread reads kLoads float4 of each K tile: float4 q is
// row `rows[q]` of the block's (a row outside the matrix reads zeros) at K offset `offset` of the
// tile (the same for every q), one fetch a tile, the tiles in K order from the part's start.
// DenseRows: A itself, m x k row-major (float4 loads).
struct DenseRows {
  const float* a;

  template <int kLoads>
  struct Reader {
    const float* p[kLoads];  // the row at K index k0 + offset
    bool inside[kLoads];
    int64_t kk;  // K index of the next fetch

    __device__ Reader(const DenseRows& s, const int (&rows)[kLoads], int m, int64_t k, int64_t k0, int offset) {
#pragma unroll
      for (int q = 0; q < kLoads; ++q) {
        inside[q] = rows[q] < m;
        p[q] = s.a + static_cast<int64_t>(inside[q] ? rows[q] : 0) * k + k0 + offset;
      }
      kk = k0 + offset;
    }
    __device__ void fetch(float4 (&out)[kLoads], int64_t k1) {
#pragma unroll
      for (int q = 0; q < kLoads; ++q) {
        if (inside[q] && kk + 4 <= k1) {
          out[q] = *reinterpret_cast<const float4*>(p[q]);
        } else {
          float v[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = inside[q] && kk + e < k1 ? p[q][e] : 0.0f;
          out[q] = make_float4(v[0], v[1], v[2], v[3]);
        }
        p[q] += kTileK;
      }
      kk += kTileK;
    }
  };
};

// Column kk of the columns (c, i, j) of a k x k kernel, as (c, i, j).
__device__ void split_column(int64_t kk, int kernel, int& c, int& i, int& j) {
  const int taps = kernel * kernel;
  c = static_cast<int>(kk / taps);
  const int tap = static_cast<int>(kk - int64_t{c} * taps);
  i = tap / kernel;
  j = tap - i * kernel;
}

// The fetch of a reader that steps through K one column at a time (advance()), each of its rows'
// entry there value(q): this thread's 4 columns of the tile (+0 past the part's end k1), then past
// the other thread's 4.
template <int kLoads, class Reader>
__device__ void fetch_by_column(Reader& r, float4 (&out)[kLoads], int64_t k1) {
  float v[kLoads][4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const bool column = r.kk + e < k1;
#pragma unroll
    for (int q = 0; q < kLoads; ++q) v[q][e] = column ? r.value(q) : 0.0f;
    r.advance();
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) r.advance();
#pragma unroll
  for (int q = 0; q < kLoads; ++q) out[q] = make_float4(v[q][0], v[q][1], v[q][2], v[q][3]);
  r.kk += kTileK;
}

// DgradTaps: the taps of a convolution's direct input gradient (gpu_gemm_tiled.hpp), gathered
// from the output gradient as they are read: row (b, y, x), column (c, i, j).
struct DgradTaps {
  ConvShape s;
  const float* gy;

  template <int kLoads>
  struct Reader {
    const float* image[kLoads];  // the row's image's output gradient
    int yp[kLoads], xp[kLoads];  // y + padding, x + padding
    bool inside[kLoads];
    int c, i, j;  // the column at K index kk
    int64_t kk;
    ConvShape s;

    __device__ Reader(const DgradTaps& t, const int (&rows)[kLoads], int m, int64_t, int64_t k0, int offset)
        : s(t.s) {
      const int planes = s.out_channels * s.out_h * s.out_w;
#pragma unroll
      for (int q = 0; q < kLoads; ++q) {
        inside[q] = rows[q] < m;
        const int r = inside[q] ? rows[q] : 0, b = r / (s.height * s.width), p = r - b * s.height * s.width;
        image[q] = t.gy + static_cast<int64_t>(b) * planes;
        yp[q] = p / s.width + s.padding;
        xp[q] = p % s.width + s.padding;
      }
      kk = k0 + offset;
      split_column(kk, s.kernel, c, i, j);
    }
    __device__ void advance() {
      if (++j == s.kernel) {
        j = 0;
        if (++i == s.kernel) i = 0, ++c;
      }
    }
    __device__ float value(int q) const {
      const int ys = yp[q] - i, xs = xp[q] - j;
      bool on = inside[q] && ys >= 0 && xs >= 0;
      int oy = ys, ox = xs;
      if (s.stride != 1) {
        on = on && ys % s.stride == 0 && xs % s.stride == 0;
        oy = ys / s.stride, ox = xs / s.stride;
      }
      on = on && oy < s.out_h && ox < s.out_w;
      return on ? image[q][(c * s.out_h + oy) * s.out_w + ox] : 0.0f;
    }
    __device__ void fetch(float4 (&out)[kLoads], int64_t k1) { fetch_by_column(*this, out, k1); }
  };
};

// Im2colTaps: a convolution's im2col columns (a forward's A), gathered from the input as they are
// read: row (b, oy, ox), column (c, i, j) = x[b, c, oy * stride + i - padding, ox * stride + j -
// padding], +0 in the padding. The kernel is at most 5 x 5: a row's offsets that fall inside the
// input are one 32-bit mask, and a column's place relative to a row's window corner is the same
// for every row (one running offset for all of a thread's rows).
struct Im2colTaps {
  ConvShape s;
  const float* x;

  template <int kLoads>
  struct Reader {
    int corner[kLoads];     // x's index of the row's window corner (b, 0, oy * stride - padding, ...)
    uint32_t mask[kLoads];  // bit i * kernel + j: that offset lies inside the input
    int c, i, j, at;        // the column at K index kk, and at = (c * height + i) * width + j
    int64_t kk;
    ConvShape s;
    const float* x;

    __device__ Reader(const Im2colTaps& t, const int (&rows)[kLoads], int m, int64_t, int64_t k0, int offset)
        : s(t.s), x(t.x) {
      const int positions = s.out_h * s.out_w, plane = s.channels * s.height * s.width;
#pragma unroll
      for (int q = 0; q < kLoads; ++q) {
        const bool inside = rows[q] < m;
        const int r = inside ? rows[q] : 0, b = r / positions, p = r - b * positions;
        const int y0 = p / s.out_w * s.stride - s.padding, x0 = p % s.out_w * s.stride - s.padding;
        corner[q] = b * plane + y0 * s.width + x0;
        mask[q] = 0;
        for (int u = 0; u < s.kernel; ++u)
          for (int v = 0; v < s.kernel; ++v)
            if (inside && y0 + u >= 0 && y0 + u < s.height && x0 + v >= 0 && x0 + v < s.width)
              mask[q] |= 1u << (u * s.kernel + v);
      }
      kk = k0 + offset;
      split_column(kk, s.kernel, c, i, j);
      at = (c * s.height + i) * s.width + j;
    }
    __device__ void advance() {
      ++at;
      if (++j == s.kernel) {
        j = 0, at += s.width - s.kernel;
        if (++i == s.kernel) i = 0, ++c, at += (s.height - s.kernel) * s.width;
      }
    }
    __device__ float value(int q) const { return mask[q] >> (i * s.kernel + j) & 1u ? x[corner[q] + at] : 0.0f; }
    __device__ void fetch(float4 (&out)[kLoads], int64_t k1) { fetch_by_column(*this, out, k1); }
  };
};

// Col2imTaps: the input gradient's terms in col2im's order (models/conv2d.cpp): row (b, y, x),
// column (t, o) = gy[b, o, oy, ox] for the t-th kernel offset from the last, (i, j) = (k - 1 -
// t / k, k - 1 - t % k), with y + padding - i = oy * stride and x + padding - j = ox * stride on
// the output, else +0. Whether offset t meets an output position at all is offset_masks' (col2im
// adds nothing for one that does not: not even the +0 chain, which a weight's infinity would make
// NaN). out_channels is a multiple of 8, so that the 4 columns a fetch reads share one offset: a
// row's output position is found once an offset, the fetches between step along the channels.
// The kernel is at most 16 x 16 (offset_masks' two 16-bit halves). Every division by the
// geometry is made once a row, not once an offset: with the divisions in each offset's test, the
// segmented kernel spent about a third of its instructions on them.
struct Col2imTaps {
  ConvShape s;
  const float* gy;

  // Where padded coordinate d (y + padding - i) meets an output coordinate below `out`: its index, else -1.
  __device__ static int output_at(const ConvShape& s, int d, int out) {
    if (d < 0) return -1;
    if (s.stride != 1) {
      if (d % s.stride) return -1;
      d /= s.stride;
    }
    return d < out ? d : -1;
  }
  // The kernel offsets from the last (t = a * k + b) that meet an output position for row `row`:
  // bit a of the high half and bit b of the low half both set.
  __device__ uint32_t offset_masks(int row) const {
    const int p = row % (s.height * s.width), y = p / s.width, x = p - y * s.width;
    uint32_t rows = 0, columns = 0;
    for (int a = 0; a < s.kernel; ++a) {
      const int i = s.kernel - 1 - a;  // the kernel row (and column) of offset index a
      if (output_at(s, y + s.padding - i, s.out_h) >= 0) rows |= 1u << a;
      if (output_at(s, x + s.padding - i, s.out_w) >= 0) columns |= 1u << a;
    }
    return rows << 16 | columns;
  }
  __device__ static bool meets(uint32_t masks, int a, int b) { return (masks >> (16 + a)) & (masks >> b) & 1u; }

  template <int kLoads>
  struct Reader {
    const float* image[kLoads];  // the row's image's output gradient
    int yp[kLoads], xp[kLoads];  // the row's y + padding and x + padding; yp -1 outside the matrix
    const float* at[kLoads];     // gy at (image, o, the offset's output position); null: none
    int t, o;                    // the column at K index kk
    int ta, tb;                  // t / kernel, t % kernel
    int64_t kk, plane;
    ConvShape s;

    __device__ void seek() {
      const int i = s.kernel - 1 - ta, j = s.kernel - 1 - tb;
#pragma unroll
      for (int q = 0; q < kLoads; ++q) {
        const int oy = yp[q] >= 0 ? output_at(s, yp[q] - i, s.out_h) : -1;
        const int ox = oy >= 0 ? output_at(s, xp[q] - j, s.out_w) : -1;
        at[q] = ox >= 0 ? image[q] + o * plane + oy * s.out_w + ox : nullptr;
      }
    }
    __device__ Reader(const Col2imTaps& g, const int (&rows)[kLoads], int m, int64_t, int64_t k0, int offset)
        : s(g.s) {
      const int pixels = s.height * s.width;
      plane = int64_t{s.out_h} * s.out_w;
#pragma unroll
      for (int q = 0; q < kLoads; ++q) {
        const int b = rows[q] / pixels, p = rows[q] - b * pixels, y = p / s.width;
        yp[q] = rows[q] < m ? y + s.padding : -1;
        xp[q] = p - y * s.width + s.padding;
        image[q] = g.gy + b * s.out_channels * plane;
      }
      kk = k0 + offset;
      t = static_cast<int>(kk / s.out_channels);
      o = static_cast<int>(kk - int64_t{t} * s.out_channels);
      ta = t / s.kernel, tb = t - ta * s.kernel;
      seek();
    }
    __device__ void fetch(float4 (&out)[kLoads], int64_t k1) {
#pragma unroll
      for (int q = 0; q < kLoads; ++q) {
        const float* p = at[q];
        out[q] = p && kk < k1 ? make_float4(p[0], p[plane], p[2 * plane], p[3 * plane]) : make_float4(0, 0, 0, 0);
        if (p) at[q] = p + kTileK * plane;
      }
      kk += kTileK;
      o += kTileK;
      if (o >= s.out_channels) {
        o -= s.out_channels, ++t;
        if (++tb == s.kernel) tb = 0, ++ta;
        seek();
      }
    }
  };
};

// At the end of a segment (the chains of kernel offset (a, b), Segmented below): each row's chains
// added to its totals where the offset meets an output position for the row (offset_masks), each
// addition rounded, and restarted from -0; then (a, b) moves to the next offset.
template <int R, int C>
__device__ __forceinline__ void end_segment(float (&acc)[R][C], float (&total)[R][C], const uint32_t (&masks)[R],
                                            int& a, int& b, int kernel) {
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const bool adds = Col2imTaps::meets(masks[i], a, b);
#pragma unroll
    for (int j = 0; j < C; ++j) {
      if (adds) total[i][j] = __fadd_rn(total[i][j], acc[i][j]);
      acc[i][j] = -0.0f;
    }
  }
  if (++b == kernel) b = 0, ++a;
}

// Segmented: K falls into segments of `segment` terms (a multiple of kTileK dividing the part), each
// its own chain from -0, and an output is the sum, from +0, in K order, each addition rounded
// (__fadd_rn), of the chains of the segments (kernel offsets) that meet an output position for its
// row (a.offset_masks): col2im's sums of a convolution's per-offset GEMMs (Col2imTaps).
// The wide kernel's planar stores: a thread's outputs, rows row0 + g * BM / 2 + ty * 4 + 0..3 and
// columns col0 + h * BN / 2 + tx * 4 + 0..3, into (image, column, position), the bias added.
template <int BM, int BN>
__device__ void store_planar(const float (&acc)[8][8], float* dst, int m, int n, int row0, int col0, int tx, int ty,
                             const PlanarRows& planar) {
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    const int r = row0 + g * (BM / 2) + ty * 4;  // m is a multiple of 4: all four rows inside or none
    if (r >= m) continue;
    const int image = r / planar.positions, position = r - image * planar.positions;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int c = col0 + (j / 4) * (BN / 2) + tx * 4 + j % 4;
      if (c >= n) continue;
      float v[4] = {acc[g * 4][j], acc[g * 4 + 1][j], acc[g * 4 + 2][j], acc[g * 4 + 3][j]};
      if (planar.bias) {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = __fadd_rn(v[e], planar.bias[c]);
      }
      *reinterpret_cast<float4*>(dst + (static_cast<int64_t>(image) * n + c) * planar.positions + position) =
          make_float4(v[0], v[1], v[2], v[3]);
    }
  }
}

// Planar: the rows (b, position) x n stored as (b, n, planar.positions), planar.bias[c] added (a
// float32 sum) where given; positions a multiple of 4 and out 16-byte aligned, so that a thread's
// 4 rows of a column that share an image (rows a multiple of 4 apart) are one float4. Two blocks
// of 128 x 128 an SM (128 registers a thread, 4 bytes spilled at most; not Segmented, whose 64
// running totals would spill): with one, the 128 x 128 tiles lost to 128 x 64 on most shapes.
// The 128 x 64 forms stay unbounded (143-245 registers, two or three blocks an SM): capped for
// four (three where Segmented) they spilled 24-260 bytes, and the ResNet-18 step's convolutions
// in them took 13.8 ms instead of 11.6 (H200, 2026-11-29).
template <int BM, int BN, bool Atomic, bool Rounded, class ARows = DenseRows, bool Segmented = false,
          bool Planar = false>
__global__ void __launch_bounds__((BM / 8) * (BN / 8), Segmented ? 1 : 2)
    wide_fma_chains(ARows a, const float* __restrict__ b, float* __restrict__ out, int m, int n, int64_t k,
                    KParts ks, int segment = 0, PlanarRows planar = {}) {
  constexpr int kThreads = (BM / 8) * (BN / 8);
  constexpr int kPad = 4;  // A's transposing stores: rows 4 apart land in other banks; float4 reads stay aligned
  constexpr int kALoads = BM * kTileK / 4 / kThreads, kBLoads = BN * kTileK / 4 / kThreads;
  static_assert(kALoads >= 1 && kBLoads >= 1, "every thread loads at least one float4 of A and of B");
  static_assert(kThreads % 2 == 0, "a thread's A loads share one K offset");
  __shared__ __align__(16) float as[2][kTileK][BM + kPad];
  __shared__ __align__(16) float bs[2][kTileK][BN];

  const int tx = threadIdx.x % (BN / 8), ty = threadIdx.x / (BN / 8);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int64_t k0 = ks.begin(blockIdx.z), k1 = ks.end(blockIdx.z, k);

  // Global to registers: A float4 q of this thread = row (idx / 2), K offset (idx % 2) * 4 of the
  // tile; B float4 q = K row idx / (BN / 4), column (idx % (BN / 4)) * 4. Outside the matrix or
  // the part: zeros, which the K loop never adds (it stops at the part's end).
  float4 a_next[kALoads], b_next[kBLoads];
  int a_rows[kALoads];
#pragma unroll
  for (int q = 0; q < kALoads; ++q) a_rows[q] = row0 + (threadIdx.x + kThreads * q) / 2;
  typename ARows::template Reader<kALoads> a_reader(a, a_rows, m, k, k0, (threadIdx.x % 2) * 4);
  const auto fetch = [&](int64_t kt) {
    a_reader.fetch(a_next, k1);
#pragma unroll
    for (int q = 0; q < kBLoads; ++q) {
      const int idx = threadIdx.x + kThreads * q, c = col0 + (idx % (BN / 4)) * 4;
      const int64_t kk = kt + idx / (BN / 4);
      const float* p = b + kk * n + c;
      if (kk < k1 && c + 4 <= n) {
        b_next[q] = *reinterpret_cast<const float4*>(p);
      } else {
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = kk < k1 && c + e < n ? p[e] : 0.0f;
        b_next[q] = make_float4(v[0], v[1], v[2], v[3]);
      }
    }
  };
  const auto stash = [&](int buf) {
#pragma unroll
    for (int q = 0; q < kALoads; ++q) {
      const int idx = threadIdx.x + kThreads * q, r = idx / 2, kq = (idx % 2) * 4;
      as[buf][kq + 0][r] = a_next[q].x;
      as[buf][kq + 1][r] = a_next[q].y;
      as[buf][kq + 2][r] = a_next[q].z;
      as[buf][kq + 3][r] = a_next[q].w;
    }
#pragma unroll
    for (int q = 0; q < kBLoads; ++q) {
      const int idx = threadIdx.x + kThreads * q;
      *reinterpret_cast<float4*>(&bs[buf][idx / (BN / 4)][(idx % (BN / 4)) * 4]) = b_next[q];
    }
  };

  float acc[8][8], total[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = -0.0f, total[i][j] = 0.0f;
  int segment_left = segment;
  // The segment's kernel offset index t as (t / kernel, t % kernel): Segmented kernels run one part
  // of K, from K index 0 (launch_conv_chains).
  int segment_a = 0, segment_b = 0;
  uint32_t offset_masks[8];          // Segmented: the thread's rows' offset_masks
  if constexpr (Segmented) {
#pragma unroll
    for (int i = 0; i < 8; ++i) offset_masks[i] = a.offset_masks(row0 + (i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + i - 4));
  }

  const auto step = [&](int buf, int kk) {
    const float4 a_lo = *reinterpret_cast<const float4*>(&as[buf][kk][ty * 4]);
    const float4 a_hi = *reinterpret_cast<const float4*>(&as[buf][kk][BM / 2 + ty * 4]);
    const float4 b_lo = *reinterpret_cast<const float4*>(&bs[buf][kk][tx * 4]);
    const float4 b_hi = *reinterpret_cast<const float4*>(&bs[buf][kk][BN / 2 + tx * 4]);
    const float av[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
    const float bv[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = chain_step<Rounded>(av[i], bv[j], acc[i][j]);
  };

  if (k0 < k1) {
    fetch(k0);
    stash(0);
    __syncthreads();
    int buf = 0;
    for (int64_t kt = k0; kt < k1; kt += kTileK) {
      const bool more = kt + kTileK < k1;
      if (more) fetch(kt + kTileK);
      if (kt + kTileK <= k1) {
#pragma unroll
        for (int kk = 0; kk < kTileK; ++kk) step(buf, kk);
      } else {
        const int len = static_cast<int>(k1 - kt);
        for (int kk = 0; kk < len; ++kk) step(buf, kk);
      }
      if constexpr (Segmented) {
        segment_left -= kTileK;
        if (segment_left == 0) {
          end_segment(acc, total, offset_masks, segment_a, segment_b, a.s.kernel);
          segment_left = segment;
        }
      }
      if (more) stash(buf ^ 1);
      __syncthreads();
      buf ^= 1;
    }
  }

  if constexpr (Segmented) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = total[i][j];
  }
  const int64_t mn = static_cast<int64_t>(m) * n;
  float* const dst = Atomic ? out : out + blockIdx.z * mn;
  if constexpr (Planar) {
    store_planar<BM, BN>(acc, dst, m, n, row0, col0, tx, ty, planar);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int r = row0 + (i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + i - 4);
      if (r >= m) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = col0 + h * (BN / 2) + tx * 4;
        float* const p = dst + static_cast<int64_t>(r) * n + c;
        if constexpr (Atomic) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (c + e < n) atomicAdd(p + e, acc[i][h * 4 + e]);
        } else if (c + 4 <= n) {
          *reinterpret_cast<float4*>(p) =
              make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (c + e < n) p[e] = acc[i][h * 4 + e];
        }
      }
    }
  }
}

// A chain's K steps follow one another, so a GEMM with few outputs and a long K is as fast as the
// number of chains running at once: a weight gradient of 576 x 64 outputs over K = 131072 in one
// chain (numpy's and h100-torch's `all:seq`) made 5 blocks of 128 x 64, 64 chains a thread, on 5
// of an H100's 132 SMs (10.9 ms). In 16 x 32 tiles it is 72 blocks of 128 threads with 4 chains
// each, one warp a scheduler, so nothing hides a latency but the warp's own instructions: K is
// staged 64 at a time by cp.async into kThinStages buffers, two of them in flight while one is
// computed, and every per-stage address is a pointer moved by a constant (no 64-bit index
// arithmetic between the FMAs). Where the time goes (H200, 576 x 64 x 131072, docs/results/
// torch_emulate.md): the FMA chains alone 0.38 ms, with the copies and barriers 0.68 ms, with the
// shared-memory reads 1.1 ms; 32 a stage in six buffers with indices computed each stage was 1.55 ms.
constexpr int kThinStages = 3;

// One 16-byte asynchronous copy into shared memory; zeros where `inside` is false (nothing read).
__device__ __forceinline__ void copy16_async(float* to, const float* from, bool inside) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(from), "r"(inside ? 16 : 0));
}

// A batch of GEMMs of one shape in one launch (launch_thin_batched): gridDim.z runs over the
// batch, entry z's operands at a + z * a_step and b + z * b_step, its one chain an output over
// all of K into out + z * m * n. Off (the default): gridDim.z runs over the K parts.
struct ThinBatch {
  int64_t a_step = 0, b_step = 0;
  bool on = false;
};

// TM x TN outputs a thread, 128 threads a block as 8 rows of 16 (BM = 8 TM rows, BN = 16 TN
// columns), K staged KT at a time. The thin tile (2 x 2, KT 64) for the fewest outputs; the
// medium tile (4 x 4, KT 32) where a long-K GEMM's split-K parts give enough blocks of 32 x 64:
// a K step's shared-memory loads feed 16 FMAs instead of 4 (the thin tile keeps the L1 95% busy
// with them on a ResNet-18's 576 x 64 weight gradient in 16 parts: H200, 2026-12-01).
template <bool Atomic, bool Rounded, int TM, int TN, int KT>
__global__ void __launch_bounds__(128)
    thin_fma_chains(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, int m, int n,
                    int64_t k, KParts ks, ThinBatch batch) {
  static_assert((TN == 2 || TN == 4) && TM % 2 == 0 && KT % 4 == 0, "float2 or float4 rows of B, float4 of A");
  constexpr int kThreads = 128, BM = 8 * TM, BN = 16 * TN, S = kThinStages;
  constexpr int kLdA = KT + 4;  // A's rows KT + 4 floats apart: the rows a warp reads fall in other banks
  constexpr int kACopies = BM * KT / 4 / kThreads, kBCopies = KT * BN / 4 / kThreads;
  static_assert(kACopies * kThreads * 4 == BM * KT && kBCopies * kThreads * 4 == KT * BN, "whole copies a thread");
  __shared__ __align__(16) float as[S][BM][kLdA];
  __shared__ __align__(16) float bs[S][KT][BN];
  using BRow = std::conditional_t<TN == 4, float4, float2>;

  const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);  // columns tx*TN + .., rows ty*TM + ..
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int64_t part = batch.on ? 0 : blockIdx.z;
  if (batch.on) {
    a += blockIdx.z * batch.a_step;
    b += blockIdx.z * batch.b_step;
  }
  const int64_t k0 = ks.begin(part), k1 = ks.end(part, k);
  const int64_t stages = k1 > k0 ? (k1 - k0 + KT - 1) / KT : 0;

  // This thread's copies: A's row q / (KT / 4) at K offset (q % (KT / 4)) * 4 and B's K row
  // q / (BN / 4) at columns (q % (BN / 4)) * 4, for q = threadIdx.x + 128 j. n, k and every part's
  // bounds are multiples of 4 (chain_tile_fits), so a copy is all inside or all outside; outside:
  // zeros, which the K loop never adds. Rows and columns outside read from a row or column inside
  // (never used).
  const float* from_a[kACopies];
  const float* from_b[kBCopies];
  int to_a[kACopies], to_b[kBCopies], k_of_a[kACopies], k_of_b[kBCopies];
  bool row_in[kACopies], col_in[kBCopies];
#pragma unroll
  for (int j = 0; j < kACopies; ++j) {
    const int q = threadIdx.x + kThreads * j, r = q / (KT / 4), kq = (q % (KT / 4)) * 4;
    row_in[j] = row0 + r < m;
    from_a[j] = a + static_cast<int64_t>(row_in[j] ? row0 + r : row0) * k + k0 + kq;
    to_a[j] = r * kLdA + kq;
    k_of_a[j] = kq;
  }
#pragma unroll
  for (int j = 0; j < kBCopies; ++j) {
    const int q = threadIdx.x + kThreads * j, kr = q / (BN / 4), c = (q % (BN / 4)) * 4;
    col_in[j] = col0 + c < n;
    from_b[j] = b + (k0 + kr) * n + (col_in[j] ? col0 + c : col0);
    to_b[j] = kr * BN + c;
    k_of_b[j] = kr;
  }
  const int64_t b_step = int64_t{KT} * n;
  int64_t next_k = k0;  // the next stage to copy: its first K index, and its buffer
  int next_buf = 0;
  // Past the last stage: an empty group, so that the waits below count alike.
  const auto issue = [&]() {
    if (next_k < k1) {
#pragma unroll
      for (int j = 0; j < kACopies; ++j) {
        const bool inside = row_in[j] && next_k + k_of_a[j] < k1;
        copy16_async(&as[next_buf][0][0] + to_a[j], inside ? from_a[j] : a, inside);
        from_a[j] += KT;
      }
#pragma unroll
      for (int j = 0; j < kBCopies; ++j) {
        const bool inside = col_in[j] && next_k + k_of_b[j] < k1;
        copy16_async(&bs[next_buf][0][0] + to_b[j], inside ? from_b[j] : b, inside);
        from_b[j] += b_step;
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    next_k += KT;
    next_buf = next_buf + 1 == S ? 0 : next_buf + 1;
  };
  // B's TN columns of this thread at K row kk of a stage
  const auto b_row = [&](const float* b_cols, int kk, float(&v)[TN]) {
    const BRow r = *reinterpret_cast<const BRow*>(b_cols + kk * BN);
    v[0] = r.x, v[1] = r.y;
    if constexpr (TN == 4) v[2] = r.z, v[3] = r.w;
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = -0.0f;
  for (int i = 0; i < S - 1; ++i) issue();
  int buf = 0;
  for (int64_t i = 0; i < stages; ++i) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 2) : "memory");  // stage i has landed
    __syncthreads();  // ... for every thread; and the buffer of stage i - 1 is free again
    issue();
    const float* const a_rows = &as[buf][ty * TM][0];
    const float* const b_cols = &bs[buf][0][tx * TN];
    const int64_t kt = k0 + i * KT;
    if (kt + KT <= k1) {
      // Four K steps at a time: A's rows as float4, B's columns as one float2 or float4 a step.
#pragma unroll
      for (int kk = 0; kk < KT; kk += 4) {
        float r[TM][4];
#pragma unroll
        for (int row = 0; row < TM; ++row) {
          const float4 v = *reinterpret_cast<const float4*>(a_rows + row * kLdA + kk);
          r[row][0] = v.x, r[row][1] = v.y, r[row][2] = v.z, r[row][3] = v.w;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float bv[TN];
          b_row(b_cols, kk + e, bv);
#pragma unroll
          for (int row = 0; row < TM; ++row)
#pragma unroll
            for (int c = 0; c < TN; ++c) acc[row][c] = chain_step<Rounded>(r[row][e], bv[c], acc[row][c]);
        }
      }
    } else {
      const int len = static_cast<int>(k1 - kt);
      for (int kk = 0; kk < len; ++kk) {
        float bv[TN];
        b_row(b_cols, kk, bv);
#pragma unroll
        for (int row = 0; row < TM; ++row) {
          const float x = a_rows[row * kLdA + kk];
#pragma unroll
          for (int c = 0; c < TN; ++c) acc[row][c] = chain_step<Rounded>(x, bv[c], acc[row][c]);
        }
      }
    }
    buf = buf + 1 == S ? 0 : buf + 1;
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");

  const int64_t mn = static_cast<int64_t>(m) * n;
  float* const dst = Atomic ? out : out + blockIdx.z * mn;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + ty * TM + i, c = col0 + tx * TN;
    if (r >= m || c >= n) continue;  // n is a multiple of 4: a thread's columns all inside or all outside
    float* const p = dst + static_cast<int64_t>(r) * n + c;
    if constexpr (Atomic) {
#pragma unroll
      for (int j = 0; j < TN; ++j) atomicAdd(p + j, acc[i][j]);
    } else if constexpr (TN == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    } else {
      *reinterpret_cast<float2*>(p) = make_float2(acc[i][0], acc[i][1]);
    }
  }
}

// The thin tile: 16 x 32 outputs a block, K 64 a stage. The medium tile: 32 x 64, K 32 a stage
// (its three stages in the same 38 KB of shared memory).
template <bool Atomic, bool Rounded>
constexpr auto thin_kernel = thin_fma_chains<Atomic, Rounded, 2, 2, 64>;
template <bool Atomic, bool Rounded>
constexpr auto medium_kernel = thin_fma_chains<Atomic, Rounded, 4, 4, 32>;

// Thread (row r, column c): +0 plus, in col2im's order, the parts (kernel offsets) that meet the
// row's output positions, each addition rounded (__fadd_rn): launch_col2im_dgrad_chains' sums from
// the chains launch_col2im_dgrad_parts stored (part t at parts + t * m * n). Threads run along a
// row's columns, so that the parts' reads are coalesced; planar stores go to (image, c, position).
__global__ void fold_col2im_parts(Col2imTaps taps, const float* __restrict__ parts, int m, int n,
                                  float* __restrict__ out, PlanarRows planar) {
  const int64_t mn = static_cast<int64_t>(m) * n;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= mn) return;
  const int r = static_cast<int>(e / n), c = static_cast<int>(e - static_cast<int64_t>(r) * n);
  const uint32_t masks = taps.offset_masks(r);
  const int kernel = taps.s.kernel;
  float total = 0.0f;  // col2im's start: dx's fill
  for (int a = 0; a < kernel; ++a)
    for (int b = 0; b < kernel; ++b)
      if (Col2imTaps::meets(masks, a, b)) total = __fadd_rn(total, parts[(a * kernel + b) * mn + e]);
  if (planar.positions > 0) {
    const int image = r / planar.positions, position = r - image * planar.positions;
    out[(static_cast<int64_t>(image) * n + c) * planar.positions + position] = total;
  } else {
    out[e] = total;
  }
}

// Medium tiles for the convolutions' one-chain sums (launch_forward_chains, launch_col2im_dgrad_chains
// with tile t32x64): the medium GEMM tile's 32 x 64 outputs a block, 4 x 4 a thread, three stages of
// 32 terms of K, with A's entries gathered from the tensor by 4-byte cp.async copies (zeros where
// an entry is +0: padding, an offset that meets no output). A thread copies 8 consecutive columns
// of one row a stage; A is stored K-major (as[kk][row]), so that a warp's 32 rows of one column
// land in 32 banks and a thread reads its 4 rows of a column as one float4.

// One 4-byte asynchronous copy into shared memory; zero where `inside` is false (nothing read).
__device__ __forceinline__ void copy4_async(float* to, const float* from, bool inside) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(from), "r"(inside ? 4 : 0));
}

// The forward's im2col columns (Im2colTaps' entries): per row its window corner and the offsets
// inside the input; columns (c, i, j) found from K index k0 by two divisions a stage.
struct Im2colColumns {
  ConvShape s;
  const float* x;
  FastDivide taps, kernel;  // k·k and k

  struct Row {
    int corner;     // x's index of the window corner (b, 0, oy * stride - padding, ...)
    uint32_t mask;  // bit i * kernel + j: that offset lies inside the input (none outside the matrix)
  };
  __device__ Row row(int r, int m) const {
    const int positions = s.out_h * s.out_w, plane = s.channels * s.height * s.width;
    const bool inside = r < m;
    const int q = inside ? r : 0, b = q / positions, p = q - b * positions;
    const int y0 = p / s.out_w * s.stride - s.padding, x0 = p % s.out_w * s.stride - s.padding;
    uint32_t mask = 0;
    for (int u = 0; u < s.kernel; ++u)
      for (int v = 0; v < s.kernel; ++v)
        if (inside && y0 + u >= 0 && y0 + u < s.height && x0 + v >= 0 && x0 + v < s.width)
          mask |= 1u << (u * s.kernel + v);
    return {b * plane + y0 * s.width + x0, mask};
  }
  // Columns k0 .. k0 + 7 of the row: their entries' addresses, null for +0.
  __device__ void columns(const Row& row, uint32_t k0, const float* (&p)[8]) const {
    const uint32_t c = taps.quotient(k0);
    uint32_t tap = k0 - c * taps.divisor();
    int i = static_cast<int>(kernel.quotient(tap)), j = static_cast<int>(tap) - i * s.kernel;
    int at = (static_cast<int>(c) * s.height + i) * s.width + j;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      p[e] = row.mask >> tap & 1u ? x + row.corner + at : nullptr;
      ++at, ++tap;
      if (++j == s.kernel) {
        j = 0, at += s.width - s.kernel;
        if (++i == s.kernel) i = 0, tap = 0, at += (s.height - s.kernel) * s.width;
      }
    }
  }
};

// The input gradient's columns in col2im's order (Col2imTaps' entries): column (t, o) is gy[b, o,
// oy, ox] for the t-th kernel offset from the last. out_channels is a multiple of 8, so that a
// thread's 8 columns share one offset: one output position a stage.
struct Col2imColumns {
  Col2imTaps taps;
  FastDivide out_channels, kernel;

  struct Row {
    const float* image;  // the row's image's output gradient
    int yp, xp;          // y + padding, x + padding; yp -1 outside the matrix
  };
  __device__ Row row(int r, int m) const {
    const ConvShape& s = taps.s;
    const int pixels = s.height * s.width, q = r < m ? r : 0, b = q / pixels, p = q - b * pixels, y = p / s.width;
    return {taps.gy + static_cast<int64_t>(b) * s.out_channels * s.out_h * s.out_w, r < m ? y + s.padding : -1,
            p - y * s.width + s.padding};
  }
  __device__ void columns(const Row& row, uint32_t k0, const float* (&p)[8]) const {
    const ConvShape& s = taps.s;
    const uint32_t t = out_channels.quotient(k0), o = k0 - t * out_channels.divisor();
    const uint32_t ta = kernel.quotient(t), tb = t - ta * kernel.divisor();
    const int i = s.kernel - 1 - static_cast<int>(ta), j = s.kernel - 1 - static_cast<int>(tb);
    const int oy = row.yp >= 0 ? Col2imTaps::output_at(s, row.yp - i, s.out_h) : -1;
    const int ox = oy >= 0 ? Col2imTaps::output_at(s, row.xp - j, s.out_w) : -1;
    const int64_t plane = int64_t{s.out_h} * s.out_w;
    const float* const base = ox >= 0 ? row.image + o * plane + oy * s.out_w + ox : nullptr;
#pragma unroll
    for (int e = 0; e < 8; ++e) p[e] = base ? base + e * plane : nullptr;
  }
};

// Rows x n outputs, one FMA chain each over K (Segmented: col2im's sums of the offsets' chains,
// segments of `segment` terms, a multiple of 32), as wide_fma_chains computes them.
template <class Columns, bool Segmented, bool Planar>
__global__ void __launch_bounds__(128)
    gather_fma_chains(Columns g, const float* __restrict__ b, float* __restrict__ out, int m, int n, int k, int segment,
                      PlanarRows planar) {
  constexpr int BM = 32, BN = 64, KT = 32, S = kThinStages, kThreads = 128, kBCopies = KT * BN / 4 / kThreads;
  __shared__ __align__(16) float as[S][KT][BM];
  __shared__ __align__(16) float bs[S][KT][BN];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;  // columns tx * 4 + 0..3, rows ty * 4 + 0..3
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

  // A: this thread copies row a_row of the block, columns a_col .. a_col + 7 of each stage.
  const int a_row = threadIdx.x % BM, a_col = (threadIdx.x / BM) * 8;
  const typename Columns::Row row = g.row(row0 + a_row, m);
  // B: as the thin kernel's, K row q / 16 at columns (q % 16) * 4 for q = threadIdx.x + 128 j.
  const float* from_b[kBCopies];
  int to_b[kBCopies], k_of_b[kBCopies];
  bool col_in[kBCopies];
#pragma unroll
  for (int j = 0; j < kBCopies; ++j) {
    const int q = threadIdx.x + kThreads * j, kr = q / (BN / 4), c = (q % (BN / 4)) * 4;
    col_in[j] = col0 + c < n;
    from_b[j] = b + static_cast<int64_t>(kr) * n + (col_in[j] ? col0 + c : col0);
    to_b[j] = kr * BN + c;
    k_of_b[j] = kr;
  }
  const int64_t b_step = int64_t{KT} * n;
  int next_k = 0, next_buf = 0;
  const auto issue = [&]() {
    if (next_k < k) {
      const float* p[8];
      g.columns(row, static_cast<uint32_t>(next_k + a_col), p);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const bool inside = p[e] != nullptr && next_k + a_col + e < k;
        copy4_async(&as[next_buf][a_col + e][a_row], inside ? p[e] : b, inside);
      }
#pragma unroll
      for (int j = 0; j < kBCopies; ++j) {
        const bool inside = col_in[j] && next_k + k_of_b[j] < k;
        copy16_async(&bs[next_buf][0][0] + to_b[j], inside ? from_b[j] : b, inside);
        from_b[j] += b_step;
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    next_k += KT;
    next_buf = next_buf + 1 == S ? 0 : next_buf + 1;
  };

  float acc[4][4], total[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = -0.0f, total[i][j] = 0.0f;
  uint32_t offset_masks[4];  // Segmented: the thread's rows' offsets that meet an output position
  if constexpr (Segmented) {
#pragma unroll
    for (int i = 0; i < 4; ++i) offset_masks[i] = g.taps.offset_masks(row0 + ty * 4 + i);
  }
  int segment_left = segment, segment_a = 0, segment_b = 0;
  const auto step = [&](int buf, int kk) {
    const float4 av = *reinterpret_cast<const float4*>(&as[buf][kk][ty * 4]);
    const float4 bv = *reinterpret_cast<const float4*>(&bs[buf][kk][tx * 4]);
    const float a4[4] = {av.x, av.y, av.z, av.w}, b4[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = __fmaf_rn(a4[i], b4[j], acc[i][j]);
  };

  for (int i = 0; i < S - 1; ++i) issue();
  int buf = 0;
  for (int kt = 0; kt < k; kt += KT) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 2) : "memory");  // this stage has landed
    __syncthreads();  // ... for every thread; and the buffer of the stage before is free again
    issue();
    if (kt + KT <= k) {
#pragma unroll
      for (int kk = 0; kk < KT; ++kk) step(buf, kk);
    } else {
      for (int kk = 0; kk < k - kt; ++kk) step(buf, kk);
    }
    if constexpr (Segmented) {
      segment_left -= KT;
      if (segment_left == 0) {
        end_segment(acc, total, offset_masks, segment_a, segment_b, g.taps.s.kernel);
        segment_left = segment;
      }
    }
    buf = buf + 1 == S ? 0 : buf + 1;
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  if constexpr (Segmented) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = total[i][j];
  }

  const int r = row0 + ty * 4, c = col0 + tx * 4;  // m and n are multiples of 4 where planar; n always
  if (c >= n) return;
  if constexpr (Planar) {
    if (r >= m) return;
    const int image = r / planar.positions, position = r - image * planar.positions;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float v[4] = {acc[0][j], acc[1][j], acc[2][j], acc[3][j]};
      if (planar.bias) {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = __fadd_rn(v[e], planar.bias[c + j]);
      }
      *reinterpret_cast<float4*>(out + (static_cast<int64_t>(image) * n + c + j) * planar.positions + position) =
          make_float4(v[0], v[1], v[2], v[3]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (r + i < m)
        *reinterpret_cast<float4*>(out + static_cast<int64_t>(r + i) * n + c) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
  }
}

unsigned tiles_over(int64_t extent, int tile) { return static_cast<unsigned>((extent + tile - 1) / tile); }

template <int BM, int BN, bool Rounded>
void launch(bool atomic, const float* a, const float* b, float* out, int m, int n, int64_t k, KParts ks,
            unsigned parts) {
  const dim3 grid(tiles_over(n, BN), tiles_over(m, BM), parts);
  constexpr int threads = (BM / 8) * (BN / 8);
  if (atomic)
    wide_fma_chains<BM, BN, true, Rounded><<<grid, threads>>>(DenseRows{a}, b, out, m, n, k, ks);
  else
    wide_fma_chains<BM, BN, false, Rounded><<<grid, threads>>>(DenseRows{a}, b, out, m, n, k, ks);
  FPLAB_CUDA_LAUNCHED("wide_fma_chains");
}

// The thin tile (medium: false) or the medium one.
template <bool Rounded>
void launch_thin(bool medium, bool atomic, const float* a, const float* b, float* out, int m, int n, int64_t k,
                 KParts ks, unsigned parts) {
  const int bm = medium ? 32 : 16, bn = medium ? 64 : 32;
  const dim3 grid(tiles_over(n, bn), tiles_over(m, bm), parts);
  const auto kernel = medium ? (atomic ? medium_kernel<true, Rounded> : medium_kernel<false, Rounded>)
                             : (atomic ? thin_kernel<true, Rounded> : thin_kernel<false, Rounded>);
  kernel<<<grid, 128>>>(a, b, out, m, n, k, ks, ThinBatch{});
  FPLAB_CUDA_LAUNCHED(medium ? "thin_fma_chains (32 x 64)" : "thin_fma_chains");
}

template <bool Rounded>
void launch_tile(ChainTile tile, bool atomic, const float* a, const float* b, float* out, int m, int n, int64_t k,
                 const KParts& ks, unsigned parts) {
  if (tile == ChainTile::t128x128)
    launch<128, 128, Rounded>(atomic, a, b, out, m, n, k, ks, parts);
  else if (tile == ChainTile::t16x32 || tile == ChainTile::t32x64)
    launch_thin<Rounded>(tile == ChainTile::t32x64, atomic, a, b, out, m, n, k, ks, parts);
  else
    launch<128, 64, Rounded>(atomic, a, b, out, m, n, k, ks, parts);
}

bool aligned16(const float* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

const char* chain_tile_name(ChainTile tile) {
  switch (tile) {
    case ChainTile::none:
      return "64x64";
    case ChainTile::t128x128:
      return "128x128";
    case ChainTile::t128x64:
      return "128x64";
    case ChainTile::t16x32:
      return "16x32";
    case ChainTile::t32x64:
      return "32x64";
  }
  return "?";
}

bool chain_tile_shape(ChainTile tile, int64_t m, int64_t n, int64_t k, const KParts& ks) {
  if (tile == ChainTile::none) return true;
  if (n % 4 || k % 4 || !ks.aligned4()) return false;
  const bool thin = tile == ChainTile::t16x32 || tile == ChainTile::t32x64;
  if (tiles_over(m, tile == ChainTile::t16x32 ? 16 : tile == ChainTile::t32x64 ? 32 : 128) > 65535u) return false;
  if (thin) return true;
  return tile == ChainTile::t128x64 ? n >= 48 : n >= 96;
}

bool chain_tile_fits(ChainTile tile, const float* a, const float* b, int64_t m, int64_t n, int64_t k,
                     const KParts& ks) {
  return chain_tile_shape(tile, m, n, k, ks) && (tile == ChainTile::none || (aligned16(a) && aligned16(b)));
}

namespace {

struct Device {
  int64_t sms, wide_slots, wide_per_sm;  // SMs; blocks of the 128 x 128 kernel resident at once, an SM
};

// The current device's (fplab.torch may drive several GPUs from one process).
Device device_slots() {
  static std::mutex held;
  static std::map<int, Device> devices;
  const int id = gpu::current_device();
  const std::lock_guard<std::mutex> lock(held);
  auto found = devices.find(id);
  if (found == devices.end()) {
    int per_sm = 0;
    FPLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, wide_fma_chains<128, 128, false, false>, 256, 0));
    const int64_t sms = current_sm_count();
    found = devices.emplace(id, Device{sms, std::max<int64_t>(per_sm * sms, 1), per_sm}).first;
  }
  return found->second;
}

}  // namespace

// Measured on an H100 (docs/results/torch_emulate.md: gpu_gemm_bench --tiles): 128 x 64 tiles beat
// 64 x 64 on every shape they take, by 1.3-2x, even where their grid leaves SMs without a block;
// 128 x 128 tiles beat 128 x 64 by 7-40% where their grid fills the device's resident slots for
// four waves or more, or one wave almost exactly, and lose by 12-14% where a last, mostly empty
// wave of large blocks is the tail (2.2 waves). That was with two 128 x 128 blocks an SM; where one
// fits (161 registers a thread from 2026-11-28 to 2026-11-29, KParts' 64-bit division), on an H200
// they lost at 4.4-39 waves by 3-19% and won at 0.97 and 1.94 waves (by 9% and 34%: the 128 x 64
// grid's last wave is then mostly empty). 16 x 32 tiles beat 128 x 64 where the latter's
// grid has blocks for at most 80 of the 132 SMs (by 1.2x at 72-80 blocks, 3.5x at 18, 7x at 5)
// and lose by 1.4x at 128 blocks (nothing measured in between: the rule keeps to 80 of 132).
ChainTile wide_tile_for(const float* a, const float* b, int64_t m, int64_t n, int64_t k, const KParts& ks,
                        int64_t parts) {
  if (!chain_tile_fits(ChainTile::t16x32, a, b, m, n, k, ks)) return ChainTile::none;
  const Device device = device_slots();
  // 128 x 64 blocks for at most 61% of the SMs: the others would idle while each thread steps 64 chains.
  const int64_t narrow_blocks = int64_t{tiles_over(m, 128)} * tiles_over(n, 64) * parts;
  if (100 * narrow_blocks <= 61 * device.sms) return ChainTile::t16x32;
  if (!chain_tile_fits(ChainTile::t128x64, a, b, m, n, k, ks)) return ChainTile::none;
  const double waves = static_cast<double>(int64_t{tiles_over(m, 128)} * tiles_over(n, 128) * parts) / device.wide_slots;
  const bool whole_waves = (waves >= 0.9 && waves <= 1) || (device.wide_per_sm == 1 && waves >= 1.85 && waves <= 2);
  const bool many_waves = device.wide_per_sm >= 2 && waves >= 4;
  if (chain_tile_fits(ChainTile::t128x128, a, b, m, n, k, ks) && (whole_waves || many_waves))
    return ChainTile::t128x128;
  return ChainTile::t128x64;
}

// The 32 x 64 tile against the others on a ResNet-18 step's GEMMs (H200, 2026-12-01, gpu_gemm_bench
// --tiles; docs/results/torch_emulate.md): 0.27-0.28 ms on every 9.7-GFLOP shape whose grid gives
// it 1.5 blocks an SM or more (288 to 16384 blocks), where 128 x 64 took 0.28-0.38 and 16 x 32
// 0.47-0.49 (the stage-1 weight gradient in 16 parts: 0.39 against 0.49); 128 x 128 where the waves
// favour it stayed ahead (0.24-0.31). With fewer blocks (64-72) the thin tile's 16 x 32 won.
ChainTile chain_tile_for(const float* a, const float* b, int64_t m, int64_t n, int64_t k, const KParts& ks,
                         int64_t parts) {
  const ChainTile wide = wide_tile_for(a, b, m, n, k, ks, parts);
  if (wide == ChainTile::none || wide == ChainTile::t128x128) return wide;
  const int64_t medium_blocks = int64_t{tiles_over(m, 32)} * tiles_over(n, 64) * parts;
  return 2 * medium_blocks >= 3 * int64_t{current_sm_count()} ? ChainTile::t32x64 : wide;
}

void launch_tiled_chains(ChainTile tile, bool atomic, bool rounded, const float* a, const float* b, float* out, int m,
                         int n, int64_t k, const KParts& ks, unsigned parts) {
  if (rounded)
    launch_tile<true>(tile, atomic, a, b, out, m, n, k, ks, parts);
  else
    launch_tile<false>(tile, atomic, a, b, out, m, n, k, ks, parts);
}

void launch_thin_batched(bool rounded, const float* a, const float* b, float* out, int m, int n, int64_t k,
                         unsigned batches, int64_t a_step, int64_t b_step) {
  if (batches > 65535) throw std::invalid_argument("launch_thin_batched: at most 65535 GEMMs a launch");
  const dim3 grid(tiles_over(n, 32), tiles_over(m, 16), batches);
  const KParts whole{k > 0 ? k : 1};
  const ThinBatch batch{a_step, b_step, true};
  if (rounded)
    thin_kernel<false, true><<<grid, 128>>>(a, b, out, m, n, k, whole, batch);
  else
    thin_kernel<false, false><<<grid, 128>>>(a, b, out, m, n, k, whole, batch);
  FPLAB_CUDA_LAUNCHED("thin_fma_chains (batched)");
}

// One chain (Segmented: chains) an output over A's K from `taps`, in 128 x 128 or 128 x 64 tiles;
// `planar`: the rows' images `positions` rows each.
void check_planar(const PlanarRows& planar, int m, const float* rows) {
  if (planar.positions < 0 || planar.positions % 4 || reinterpret_cast<uintptr_t>(rows) % 16 ||
      (planar.positions > 0 && m % planar.positions))
    throw std::invalid_argument("wide_fma_chains: planar rows need images of a multiple of 4 rows, 16-byte aligned");
}

// The medium tile's chains (gather_fma_chains) over `columns`, into rows or planar.
template <bool Segmented, class Columns>
void launch_gather_chains(const Columns& columns, const float* b, float* rows, int m, int n, int64_t k, int segment,
                          const PlanarRows& planar) {
  check_planar(planar, m, rows);
  // K below 2^31 with room for the pipeline's stages past it (int indices); segments that end with
  // the 32-deep stages and divide K (else a segment's chains would never be added)
  if (k >= (int64_t{1} << 31) - 128 || n % 4 || reinterpret_cast<uintptr_t>(b) % 16 || tiles_over(m, 32) > 65535u)
    throw std::invalid_argument("gather_fma_chains: K from 2^31, B's rows not whole float4s, or too many rows");
  if (Segmented && (segment <= 0 || segment % 32 || k % segment))
    throw std::invalid_argument("gather_fma_chains: segments not a positive multiple of 32 dividing K");
  const dim3 grid(tiles_over(n, 64), tiles_over(m, 32), 1);
  const int kk = static_cast<int>(k);
  if (planar.positions > 0)
    gather_fma_chains<Columns, Segmented, true><<<grid, 128>>>(columns, b, rows, m, n, kk, segment, planar);
  else
    gather_fma_chains<Columns, Segmented, false><<<grid, 128>>>(columns, b, rows, m, n, kk, segment, planar);
}

template <bool Segmented, class ARows>
void launch_conv_chains(ChainTile tile, const ARows& taps, const float* b, float* rows, int m, int n, int64_t k,
                        int segment, const PlanarRows& planar) {
  check_planar(planar, m, rows);
  const KParts one{k > 0 ? k : 1};
  const auto run = [&](auto planar_form) {
    constexpr bool kPlanar = decltype(planar_form)::value;
    if (tile == ChainTile::t128x128) {
      const dim3 grid(tiles_over(n, 128), tiles_over(m, 128), 1);
      wide_fma_chains<128, 128, false, false, ARows, Segmented, kPlanar>
          <<<grid, 256>>>(taps, b, rows, m, n, k, one, segment, planar);
    } else {
      const dim3 grid(tiles_over(n, 64), tiles_over(m, 128), 1);
      wide_fma_chains<128, 64, false, false, ARows, Segmented, kPlanar>
          <<<grid, 128>>>(taps, b, rows, m, n, k, one, segment, planar);
    }
  };
  if (planar.positions > 0)
    run(std::true_type{});
  else
    run(std::false_type{});
}

void launch_direct_dgrad_chains(ChainTile tile, const ConvShape& shape, const float* gy, const float* w_taps,
                                float* rows, const PlanarRows& planar) {
  const int m = shape.batch * shape.height * shape.width, n = shape.channels;
  launch_conv_chains<false>(tile, DgradTaps{shape, gy}, w_taps, rows, m, n,
                            int64_t{shape.out_channels} * shape.kernel * shape.kernel, 0, planar);
  FPLAB_CUDA_LAUNCHED("wide_fma_chains<DgradTaps>");
}

void launch_forward_chains(ChainTile tile, const ConvShape& shape, const float* x, const float* w_t, float* rows,
                           const PlanarRows& planar) {
  const int m = shape.batch * shape.out_h * shape.out_w, n = shape.out_channels;
  const int64_t k = int64_t{shape.channels} * shape.kernel * shape.kernel;
  if (tile == ChainTile::t32x64) {
    const auto taps = static_cast<uint32_t>(shape.kernel * shape.kernel);
    launch_gather_chains<false>(Im2colColumns{shape, x, FastDivide(taps), FastDivide(shape.kernel)}, w_t, rows, m, n, k,
                                0, planar);
    FPLAB_CUDA_LAUNCHED("gather_fma_chains<Im2colColumns>");
    return;
  }
  launch_conv_chains<false>(tile, Im2colTaps{shape, x}, w_t, rows, m, n, k, 0, planar);
  FPLAB_CUDA_LAUNCHED("wide_fma_chains<Im2colTaps>");
}

void launch_col2im_dgrad_chains(ChainTile tile, const ConvShape& shape, const float* gy, const float* w_offsets,
                                float* rows, const PlanarRows& planar) {
  // Segments of whole K tiles (a segment that is not would never end: every output +0)
  if (shape.out_channels <= 0 || shape.out_channels % kTileK)
    throw std::invalid_argument("launch_col2im_dgrad_chains: output channels not a positive multiple of 8");
  if (shape.kernel < 1 || shape.kernel > 16)  // Col2imTaps::offset_masks: 16 offsets a side
    throw std::invalid_argument("launch_col2im_dgrad_chains: kernel size outside 1..16");
  const int m = shape.batch * shape.height * shape.width, n = shape.channels;
  const int64_t k = int64_t{shape.out_channels} * shape.kernel * shape.kernel;
  if (tile == ChainTile::t32x64) {
    if (shape.out_channels % 32)  // the medium tile's segments end with its stages of 32
      throw std::invalid_argument("launch_col2im_dgrad_chains: 32 x 64 tiles need output channels a multiple of 32");
    const Col2imColumns columns{Col2imTaps{shape, gy}, FastDivide(static_cast<uint32_t>(shape.out_channels)),
                                FastDivide(static_cast<uint32_t>(shape.kernel))};
    launch_gather_chains<true>(columns, w_offsets, rows, m, n, k, shape.out_channels, planar);
    FPLAB_CUDA_LAUNCHED("gather_fma_chains<Col2imColumns>");
    return;
  }
  launch_conv_chains<true>(tile, Col2imTaps{shape, gy}, w_offsets, rows, m, n, k, shape.out_channels, planar);
  FPLAB_CUDA_LAUNCHED("wide_fma_chains<Col2imTaps>");
}

void launch_col2im_dgrad_parts(ChainTile tile, const ConvShape& shape, const float* gy, const float* w_offsets,
                               float* parts) {
  if (shape.out_channels <= 0 || shape.out_channels % kTileK)
    throw std::invalid_argument("launch_col2im_dgrad_parts: output channels not a positive multiple of 8");
  if (shape.kernel < 1 || shape.kernel > 16)
    throw std::invalid_argument("launch_col2im_dgrad_parts: kernel size outside 1..16");
  const int m = shape.batch * shape.height * shape.width, n = shape.channels;
  const int64_t k = int64_t{shape.out_channels} * shape.kernel * shape.kernel;
  const KParts offsets{shape.out_channels};  // a part a kernel offset
  const auto count = static_cast<unsigned>(shape.kernel * shape.kernel);
  const Col2imTaps taps{shape, gy};
  if (tile == ChainTile::t128x128)
    wide_fma_chains<128, 128, false, false, Col2imTaps>
        <<<dim3(tiles_over(n, 128), tiles_over(m, 128), count), 256>>>(taps, w_offsets, parts, m, n, k, offsets);
  else
    wide_fma_chains<128, 64, false, false, Col2imTaps>
        <<<dim3(tiles_over(n, 64), tiles_over(m, 128), count), 128>>>(taps, w_offsets, parts, m, n, k, offsets);
  FPLAB_CUDA_LAUNCHED("wide_fma_chains<Col2imTaps> (parts)");
}

void launch_col2im_fold(const ConvShape& shape, const float* parts, float* rows, const PlanarRows& planar) {
  const int m = shape.batch * shape.height * shape.width, n = shape.channels;
  const int64_t mn = static_cast<int64_t>(m) * n;
  if (planar.positions < 0 || (planar.positions > 0 && m % planar.positions))
    throw std::invalid_argument("launch_col2im_fold: planar rows need whole images");
  constexpr int kThreads = 256;
  fold_col2im_parts<<<static_cast<unsigned>((mn + kThreads - 1) / kThreads), kThreads>>>(Col2imTaps{shape, nullptr},
                                                                                         parts, m, n, rows, planar);
  FPLAB_CUDA_LAUNCHED("fold_col2im_parts");
}

}  // namespace fplab::sim::gpu::detail
