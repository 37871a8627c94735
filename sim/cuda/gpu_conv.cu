// im2col and col2im kernels (gpu_conv.hpp). im2col copies, one thread an entry of the columns.
// col2im is a gather, one thread an input element, no atomics: the element's sum is formed in one
// thread in a fixed order, the order of Conv2d::backward's CPU loop, so the bits are the CPU's.
//
// That order: the CPU loop runs over (b, oy, ox) outside and (c, i, j) inside and adds
// dcols[(b, oy, ox), (c, i, j)] into dx[b, c, oy·stride + i − padding, ox·stride + j − padding].
// For one element dx[b, c, y, x] and one output position (oy, ox), i = y + padding − oy·stride and
// j = x + padding − ox·stride are fixed: at most one term per position. So the element receives
// its terms ordered by (oy, ox), oy outer, both ascending, over the positions whose window holds
// it (0 ≤ i, j < kernel), and it starts from the +0 that dx was filled with: the kernel starts from
// +0.0f (so a lone −0 term gives +0, as on the CPU) and adds with __fadd_rn (compiled without FTZ
// or contraction: sim/cuda/CMakeLists.txt).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/fast_divide.hpp"
#include "sim/cuda/gpu_conv.hpp"
#include "sim/cuda/gpu_gemm_tiled.hpp"

namespace fplab::sim::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid-stride loops beyond

struct Dims {
  int64_t batch, channels, height, width, kernel, stride, padding, out_h, out_w, taps;
};

Dims dims_of(const ConvGeometry& g) {
  if (g.kernel == 0 || g.stride == 0 || g.kernel > g.height + 2 * g.padding || g.kernel > g.width + 2 * g.padding)
    throw std::invalid_argument("convolution: kernel " + std::to_string(g.kernel) + ", stride " +
                                std::to_string(g.stride) + " and padding " + std::to_string(g.padding) +
                                " do not fit a " + std::to_string(g.height) + " x " + std::to_string(g.width) +
                                " input");
  auto i = [](size_t v) { return static_cast<int64_t>(v); };
  return {i(g.batch),  i(g.channels), i(g.height),  i(g.width),   i(g.kernel),
          i(g.stride), i(g.padding),  i(g.out_h()), i(g.out_w()), i(g.taps())};
}

unsigned blocks_for(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
}

// Transposed: cols is taps x rows (the weight gradient's left operand), written in its own order.
// One thread a column entry; its six divisions by the geometry's sizes are FastDivides (an
// integer division is a long instruction sequence on a GPU; with them the copy was bound by them).
// The entries are numbered in 32 bits (launch_im2col: where they all fit).
struct Im2colDivisors {
  FastDivide taps, rows, out_w, out_h, kernel, kernel_square;
};

template <bool Transposed>
__global__ void im2col_kernel(const float* __restrict__ x, float* __restrict__ cols, Dims dims, Im2colDivisors div,
                              uint32_t count, const uint32_t* __restrict__ tap_order) {
  const auto stride = static_cast<int32_t>(dims.stride), padding = static_cast<int32_t>(dims.padding);
  const auto height = static_cast<int32_t>(dims.height), width = static_cast<int32_t>(dims.width);
  const auto channels = static_cast<uint32_t>(dims.channels);
  for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < count; e += gridDim.x * blockDim.x) {
    uint32_t row, tap;
    if constexpr (Transposed) {
      tap = div.rows.quotient(e), row = e - tap * div.rows.divisor();
    } else {
      row = div.taps.quotient(e), tap = e - row * div.taps.divisor();
    }
    if (tap_order) tap = tap_order[tap];
    const uint32_t rest = div.out_w.quotient(row), ox = row - rest * div.out_w.divisor();
    const uint32_t b = div.out_h.quotient(rest), oy = rest - b * div.out_h.divisor();
    const uint32_t c = div.kernel_square.quotient(tap), within = tap - c * div.kernel_square.divisor();
    const uint32_t i = div.kernel.quotient(within), j = within - i * div.kernel.divisor();
    const int32_t y = static_cast<int32_t>(oy) * stride + static_cast<int32_t>(i) - padding;
    const int32_t xx = static_cast<int32_t>(ox) * stride + static_cast<int32_t>(j) - padding;
    const bool inside = y >= 0 && y < height && xx >= 0 && xx < width;
    cols[e] = inside ? x[((b * channels + c) * static_cast<uint32_t>(height) + static_cast<uint32_t>(y)) *
                             static_cast<uint32_t>(width) +
                         static_cast<uint32_t>(xx)]
                     : 0.0f;
  }
}

// Four consecutive entries a thread, stored as one float4 (cols 16-byte aligned): the first
// entry's coordinates come from the divisions, the next three's by stepping them (the divisions
// once per four entries; one thread an entry was bound by its index arithmetic, not by memory).
// Rows order (b, oy, ox) and taps (c, i, j), the last fastest; transposed, rows run fastest.
template <bool Transposed>
__global__ void im2col_kernel4(const float* __restrict__ x, float* __restrict__ cols, Dims dims, Im2colDivisors div,
                               uint32_t count) {
  const auto stride = static_cast<int32_t>(dims.stride), padding = static_cast<int32_t>(dims.padding);
  const auto height = static_cast<int32_t>(dims.height), width = static_cast<int32_t>(dims.width);
  const auto channels = static_cast<uint32_t>(dims.channels), kernel = static_cast<uint32_t>(dims.kernel);
  const auto out_w = static_cast<uint32_t>(dims.out_w), out_h = static_cast<uint32_t>(dims.out_h);
  const auto batch = static_cast<uint32_t>(dims.batch);
  const uint32_t quads = (count + 3) / 4;
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
    const uint32_t e = q * 4;
    uint32_t row, tap;
    if constexpr (Transposed) {
      tap = div.rows.quotient(e), row = e - tap * div.rows.divisor();
    } else {
      row = div.taps.quotient(e), tap = e - row * div.taps.divisor();
    }
    const uint32_t rest = div.out_w.quotient(row);
    uint32_t ox = row - rest * out_w, b = div.out_h.quotient(rest), oy = rest - b * out_h;
    uint32_t c = div.kernel_square.quotient(tap), within = tap - c * div.kernel_square.divisor();
    uint32_t i = div.kernel.quotient(within), j = within - i * kernel;
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int32_t y = static_cast<int32_t>(oy) * stride + static_cast<int32_t>(i) - padding;
      const int32_t xx = static_cast<int32_t>(ox) * stride + static_cast<int32_t>(j) - padding;
      const bool inside = e + u < count && y >= 0 && y < height && xx >= 0 && xx < width;
      v[u] = inside ? x[((b * channels + c) * static_cast<uint32_t>(height) + static_cast<uint32_t>(y)) *
                            static_cast<uint32_t>(width) +
                        static_cast<uint32_t>(xx)]
                    : 0.0f;
      const auto next_row = [&] {
        if (++ox == out_w) {
          ox = 0;
          if (++oy == out_h) oy = 0, ++b;
        }
      };
      const auto next_tap = [&] {
        if (++j == kernel) {
          j = 0;
          if (++i == kernel) i = 0, ++c;
        }
      };
      if constexpr (Transposed) {
        next_row();
        if (b == batch) b = 0, next_tap();
      } else {
        next_tap();
        if (c == channels) c = 0, next_row();
      }
    }
    if (e + 4 <= count) {
      reinterpret_cast<float4*>(cols)[q] = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      for (uint32_t u = 0; e + u < count; ++u) cols[e + u] = v[u];
    }
  }
}

// Beyond 32-bit indices (columns or input of 2^31 - 2^30 elements or more): the plain form.
template <bool Transposed>
__global__ void im2col_kernel_wide(const float* __restrict__ x, float* __restrict__ cols, Dims dims, int64_t count,
                                   const uint32_t* __restrict__ tap_order) {
  const int64_t rows = count / dims.taps;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = Transposed ? e % rows : e / dims.taps;
    int64_t tap = Transposed ? e / rows : e % dims.taps;
    if (tap_order) tap = tap_order[tap];
    const int64_t ox = row % dims.out_w, oy = row / dims.out_w % dims.out_h, b = row / (dims.out_w * dims.out_h);
    const int64_t j = tap % dims.kernel, i = tap / dims.kernel % dims.kernel, c = tap / (dims.kernel * dims.kernel);
    const int64_t y = oy * dims.stride + i - dims.padding, xx = ox * dims.stride + j - dims.padding;
    const bool inside = y >= 0 && y < dims.height && xx >= 0 && xx < dims.width;
    cols[e] = inside ? x[((b * dims.channels + c) * dims.height + y) * dims.width + xx] : 0.0f;
  }
}

// im2col on the device's default stream, with 32-bit indices where the columns and the input both
// have fewer than 2^31 - 2^30 elements (the grid-stride loop's index stays below 2^31); column t
// the tap tap_order[t] where that is given (one thread an entry then).
void launch_im2col(const float* x, float* cols, const Dims& d, int64_t count, bool transposed,
                   const uint32_t* tap_order) {
  constexpr int64_t kNarrow = int64_t{1} << 30;
  const bool narrow = count < kNarrow && d.batch * d.channels * d.height * d.width < kNarrow;
  const unsigned blocks = blocks_for(count);
  if (narrow) {
    const auto u = [](int64_t v) { return FastDivide(static_cast<uint32_t>(v)); };
    const Im2colDivisors div{u(d.taps), u(count / d.taps), u(d.out_w), u(d.out_h), u(d.kernel), u(d.kernel * d.kernel)};
    const bool aligned = reinterpret_cast<uintptr_t>(cols) % 16 == 0 && !tap_order;
    const unsigned quad_blocks = blocks_for((count + 3) / 4);
    if (aligned && transposed)
      im2col_kernel4<true><<<quad_blocks, kThreads>>>(x, cols, d, div, static_cast<uint32_t>(count));
    else if (aligned)
      im2col_kernel4<false><<<quad_blocks, kThreads>>>(x, cols, d, div, static_cast<uint32_t>(count));
    else if (transposed)
      im2col_kernel<true><<<blocks, kThreads>>>(x, cols, d, div, static_cast<uint32_t>(count), tap_order);
    else
      im2col_kernel<false><<<blocks, kThreads>>>(x, cols, d, div, static_cast<uint32_t>(count), tap_order);
  } else if (transposed) {
    im2col_kernel_wide<true><<<blocks, kThreads>>>(x, cols, d, count, tap_order);
  } else {
    im2col_kernel_wide<false><<<blocks, kThreads>>>(x, cols, d, count, tap_order);
  }
  FPLAB_CUDA_LAUNCHED("im2col_kernel");
}

// The output positions along one axis whose window holds input coordinate `at` (padded: at +
// padding): those o with 0 <= at + padding - o * stride < kernel, as [lo, hi] (empty when lo > hi).
__device__ void covering(int64_t at, int64_t out, const Dims& d, int64_t& lo, int64_t& hi) {
  const int64_t padded = at + d.padding;
  lo = padded >= d.kernel ? (padded - d.kernel) / d.stride + 1 : 0;
  hi = min(out - 1, padded / d.stride);
}

__global__ void col2im_gather(const float* __restrict__ dcols, float* __restrict__ dx, Dims d, int64_t count) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t xx = e % d.width, y = e / d.width % d.height, c = e / (d.width * d.height) % d.channels;
    const int64_t b = e / (d.width * d.height * d.channels);
    int64_t oy_lo, oy_hi, ox_lo, ox_hi;
    covering(y, d.out_h, d, oy_lo, oy_hi);
    covering(xx, d.out_w, d, ox_lo, ox_hi);
    float sum = 0.0f;  // +0: dx's fill on the CPU
    for (int64_t oy = oy_lo; oy <= oy_hi; ++oy) {
      const int64_t i = y + d.padding - oy * d.stride;
      for (int64_t ox = ox_lo; ox <= ox_hi; ++ox) {
        const int64_t j = xx + d.padding - ox * d.stride;
        sum = __fadd_rn(sum, dcols[((b * d.out_h + oy) * d.out_w + ox) * d.taps + (c * d.kernel + i) * d.kernel + j]);
      }
    }
    dx[e] = sum;
  }
}

// The same gather with 32-bit indices and the divisions by the geometry's sizes as FastDivides (as
// im2col's: with 64-bit divisions, five an element and two more a window, they bound the kernel).
struct Col2imDivisors {
  FastDivide width, height, channels, stride;
};

__global__ void col2im_gather_narrow(const float* __restrict__ dcols, float* __restrict__ dx, Dims d,
                                     Col2imDivisors div, uint32_t count) {
  const auto kernel = static_cast<uint32_t>(d.kernel), padding = static_cast<uint32_t>(d.padding);
  const auto stride = static_cast<uint32_t>(d.stride), taps = static_cast<uint32_t>(d.taps);
  const auto out_h = static_cast<uint32_t>(d.out_h), out_w = static_cast<uint32_t>(d.out_w);
  for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < count; e += gridDim.x * blockDim.x) {
    const uint32_t r0 = div.width.quotient(e), xx = e - r0 * div.width.divisor();
    const uint32_t r1 = div.height.quotient(r0), y = r0 - r1 * div.height.divisor();
    const uint32_t b = div.channels.quotient(r1), c = r1 - b * div.channels.divisor();
    // covering(): the output positions whose window holds the (padded) coordinate
    const uint32_t py = y + padding, px = xx + padding;
    const uint32_t oy_lo = py >= kernel ? div.stride.quotient(py - kernel) + 1 : 0;
    const uint32_t ox_lo = px >= kernel ? div.stride.quotient(px - kernel) + 1 : 0;
    const uint32_t oy_hi = min(out_h - 1, div.stride.quotient(py)), ox_hi = min(out_w - 1, div.stride.quotient(px));
    float sum = 0.0f;  // +0: dx's fill on the CPU
    for (uint32_t oy = oy_lo; oy <= oy_hi; ++oy) {
      const uint32_t i = py - oy * stride;
      const uint32_t row_base = (b * out_h + oy) * out_w, tap_base = (c * kernel + i) * kernel;
      for (uint32_t ox = ox_lo; ox <= ox_hi; ++ox) {
        const uint32_t j = px - ox * stride;
        sum = __fadd_rn(sum, dcols[(row_base + ox) * taps + tap_base + j]);
      }
    }
    dx[e] = sum;
  }
}

// col2im on the default stream: 32-bit indices where the columns and the input both have fewer
// than 2^30 elements (the grid-stride loop's index stays below 2^31).
void launch_col2im(const float* dcols, float* dx, const Dims& d, int64_t count) {
  constexpr int64_t kNarrow = int64_t{1} << 30;
  if (count < kNarrow && d.batch * d.out_h * d.out_w * d.taps < kNarrow) {
    const auto u = [](int64_t v) { return FastDivide(static_cast<uint32_t>(v)); };
    const Col2imDivisors div{u(d.width), u(d.height), u(d.channels), u(d.stride)};
    col2im_gather_narrow<<<blocks_for(count), kThreads>>>(dcols, dx, d, div, static_cast<uint32_t>(count));
  } else {
    col2im_gather<<<blocks_for(count), kThreads>>>(dcols, dx, d, count);
  }
  FPLAB_CUDA_LAUNCHED("col2im_gather");
}

// conv_dgrad "direct"'s terms: row (b, y, x), column (c, i, j) = gy[b, c, oy, ox] with oy = (y +
// padding − i) / stride and ox likewise where both divide and lie on the output, else +0. Indices in
// 32 bits (dgrad_taps_on_device checks that they fit).
__global__ void dgrad_taps_kernel(const float* __restrict__ gy, float* __restrict__ taps, uint32_t count,
                                  uint32_t columns, uint32_t kernel, uint32_t kk, uint32_t width, uint32_t pixels,
                                  uint32_t out_w, uint32_t out_h, uint32_t out_channels, uint32_t stride,
                                  uint32_t padding) {
  for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < count; e += gridDim.x * blockDim.x) {
    const uint32_t row = e / columns, column = e - row * columns;
    const uint32_t c = column / kk, tap = column - c * kk, i = tap / kernel, j = tap - i * kernel;
    const uint32_t b = row / pixels, p = row - b * pixels, y = p / width, x = p - y * width;
    const int ys = static_cast<int>(y + padding) - static_cast<int>(i);
    const int xs = static_cast<int>(x + padding) - static_cast<int>(j);
    float term = 0.0f;
    if (ys >= 0 && xs >= 0 && ys % stride == 0 && xs % stride == 0) {
      const uint32_t oy = ys / stride, ox = xs / stride;
      if (oy < out_h && ox < out_w) term = gy[((b * out_channels + c) * out_h + oy) * out_w + ox];
    }
    taps[e] = term;
  }
}

// The weight (out_channels, channels, k·k) as the col2im pass reads it: w_offsets[(t, o) · channels
// + c] = weight[(o · channels + c) · k·k + k·k − 1 − t], kernel offsets from the last to the first.
__global__ void col2im_weight_kernel(const float* __restrict__ weight, float* __restrict__ w_offsets, uint32_t count,
                                     uint32_t channels, uint32_t out_channels, uint32_t kk) {
  for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < count; e += gridDim.x * blockDim.x) {
    const uint32_t c = e % channels, to = e / channels, o = to % out_channels, t = to / out_channels;
    w_offsets[e] = weight[(o * channels + c) * kk + kk - 1 - t];
  }
}

void copy(float* to, const float* from, size_t count) {  // host or device, either way (unified addressing)
  if (count) FPLAB_CUDA(cudaMemcpy(to, from, count * sizeof(float), cudaMemcpyDefault));
}

}  // namespace

const float* GpuConv::im2col(const ConvGeometry& geometry, const float* x, float* cols) {
  const Dims d = dims_of(geometry);
  const size_t count = geometry.rows() * geometry.taps();
  float* const device_x = x_.reserve<float>(geometry.input_size());
  float* const device_cols = cols_.reserve<float>(count);
  copy(device_x, x, geometry.input_size());
  if (count) {
    launch_im2col(device_x, device_cols, d, static_cast<int64_t>(count), false, nullptr);
  }
  if (cols) copy(cols, device_cols, count);
  return device_cols;
}

float* GpuConv::dcols_buffer(const ConvGeometry& geometry) {
  return dcols_.reserve<float>(geometry.rows() * geometry.taps());
}

void GpuConv::col2im(const ConvGeometry& geometry, const float* dcols, float* dx) {
  const Dims d = dims_of(geometry);
  const size_t count = geometry.input_size();
  float* const device_dcols = dcols_buffer(geometry);
  if (dcols != device_dcols) copy(device_dcols, dcols, geometry.rows() * geometry.taps());
  float* const device_dx = dx_.reserve<float>(count);
  if (count) {
    launch_col2im(device_dcols, device_dx, d, static_cast<int64_t>(count));
  }
  copy(dx, device_dx, count);
}

void GpuConv::im2col_on_device(const ConvGeometry& geometry, const float* x, float* cols, bool transposed,
                               const uint32_t* tap_order) {
  const Dims d = dims_of(geometry);
  const auto count = static_cast<int64_t>(geometry.rows() * geometry.taps());
  if (count == 0) return;
  launch_im2col(x, cols, d, count, transposed, tap_order);
}

void GpuConv::col2im_on_device(const ConvGeometry& geometry, const float* dcols, float* dx) {
  const Dims d = dims_of(geometry);
  const auto count = static_cast<int64_t>(geometry.input_size());
  if (count == 0) return;
  launch_col2im(dcols, dx, d, count);
}

void GpuConv::dgrad_taps_on_device(const ConvGeometry& geometry, size_t out_channels, const float* gy, size_t images,
                                   float* taps) {
  const size_t kk = geometry.kernel * geometry.kernel, columns = out_channels * kk;
  const size_t pixels = geometry.height * geometry.width;
  const size_t count = images * pixels * columns;
  if (count == 0) return;
  if (count >= (size_t{1} << 31) || images * out_channels * geometry.out_h() * geometry.out_w() >= (size_t{1} << 31))
    throw std::invalid_argument("dgrad_taps_on_device: more than 2^31 terms or gradients at once (a smaller slab)");
  const auto u = [](size_t v) { return static_cast<uint32_t>(v); };
  dgrad_taps_kernel<<<blocks_for(static_cast<int64_t>(count)), kThreads>>>(
      gy, taps, u(count), u(columns), u(geometry.kernel), u(kk), u(geometry.width), u(pixels), u(geometry.out_w()),
      u(geometry.out_h()), u(out_channels), u(geometry.stride), u(geometry.padding));
  FPLAB_CUDA_LAUNCHED("dgrad_taps");
}

namespace {

std::optional<detail::ChainTile> forced_tile;  // GpuConv::force_tile's

// The tile for m x n outputs over k terms in one part: the wide one wide_tile_for picks, or the
// medium one where `medium` (the pass has that form) and the wide tile would be 128 x 64 blocks
// fewer than the SMs (a ResNet-18's 4 x 4 layers at batch 128: 128 blocks on an H200's 132; where
// they would fill 61 % of the SMs or fewer, wide_tile_for's thin choice, none: the caller makes the
// columns and runs the GEMM, whose own medium or thin tiles take such shapes). The
// medium tile gathers its operand by 4-byte copies, which cost it about a third against the dense
// GEMM's 16-byte ones: on a ResNet-18's 3 x 3 layers at batch 128 (H200, 2026-12-01,
// gpu_gemm_bench --tiles) it took 0.35-0.38 ms on every layer, the wide tiles 0.29-0.34 where
// their grid fills the device and 0.37-0.44 at 4 x 4. None where no tile takes the shape or the
// indices of the input, the output gradient or the outputs pass 32 bits.
detail::ChainTile conv_tile(const ConvGeometry& g, size_t out_channels, const float* b, size_t m, size_t n, size_t k,
                            bool medium) {
  using detail::ChainTile;
  constexpr size_t kLimit = size_t{1} << 31;
  if (m == 0 || n == 0 || k == 0 || m >= kLimit || g.input_size() >= kLimit ||
      g.batch * out_channels * g.out_h() * g.out_w() >= kLimit)
    return ChainTile::none;
  const auto mi = static_cast<int64_t>(m), ni = static_cast<int64_t>(n), ki = static_cast<int64_t>(k);
  const ChainTile wide = detail::wide_tile_for(b, b, mi, ni, ki, KParts{ki}, 1);
  if (wide == ChainTile::none) return wide;  // operands no tiled kernel takes
  if (forced_tile) {                         // a tile the pass has and the shape takes; else chosen by shape
    if (*forced_tile == ChainTile::t32x64 && medium) return ChainTile::t32x64;
    if ((*forced_tile == ChainTile::t128x64 || *forced_tile == ChainTile::t128x128) &&
        detail::chain_tile_fits(*forced_tile, b, b, mi, ni, ki, KParts{ki}))
      return *forced_tile;
  }
  if (medium && wide == ChainTile::t128x64) {
    if ((m + 127) / 128 * ((n + 63) / 64) < static_cast<size_t>(current_sm_count())) return ChainTile::t32x64;
  }
  return wide == ChainTile::t128x64 || wide == ChainTile::t128x128 ? wide : ChainTile::none;
}

detail::PlanarRows planar_rows(const RowsOut& out, size_t positions, const float* to) {
  if (!out.planar) return {};
  if (!GpuConv::planar_fits(positions, to))
    throw std::invalid_argument("GpuConv: planar rows need images of a multiple of 4 positions, 16-byte aligned");
  return {static_cast<int>(positions), out.bias};
}

detail::ConvShape conv_shape(const ConvGeometry& g, size_t out_channels) {
  const auto i = [](size_t v) { return static_cast<int>(v); };
  return {i(g.batch),      i(g.channels), i(g.height), i(g.width),  i(out_channels),
          i(g.out_h()),    i(g.out_w()),  i(g.kernel), i(g.stride), i(g.padding)};
}

// A host-memory wrapper of the functions above for the tests: `a` (a_count floats), `b`
// (b_count) and `bias` (bias_count, where not null) uploaded, run(device a, device b, device rows,
// device bias or null), rows (rows_count) downloaded when it ran.
template <class Run>
bool on_host(const float* a, size_t a_count, const float* b, size_t b_count, float* rows, size_t rows_count,
             const Run& run, const float* bias = nullptr, size_t bias_count = 0) {
  DeviceBuffer a_device, b_device, rows_device, bias_device;
  float* const d_a = a_device.reserve<float>(a_count);
  float* const d_b = b_device.reserve<float>(b_count);
  float* const d_rows = rows_device.reserve<float>(rows_count);
  float* const d_bias = bias ? bias_device.reserve<float>(bias_count) : nullptr;
  copy(d_a, a, a_count);
  copy(d_b, b, b_count);
  if (bias) copy(d_bias, bias, bias_count);
  if (!run(d_a, d_b, d_rows, d_bias)) return false;
  copy(rows, d_rows, rows_count);  // waits for the chains
  return true;
}

}  // namespace

void GpuConv::force_tile(std::optional<detail::ChainTile> tile) { forced_tile = tile; }

bool GpuConv::planar_fits(size_t positions, const float* to) {
  return positions > 0 && positions % 4 == 0 && positions < (size_t{1} << 31) &&
         reinterpret_cast<uintptr_t>(to) % 16 == 0;
}

bool GpuConv::direct_dgrad_on_device(const ConvGeometry& geometry, size_t out_channels, const float* gy,
                                     const float* w_taps, float* rows, const RowsOut& out) {
  const size_t m = geometry.batch * geometry.height * geometry.width;
  const size_t k = out_channels * geometry.kernel * geometry.kernel;
  const detail::ChainTile tile = conv_tile(geometry, out_channels, w_taps, m, geometry.channels, k, false);
  if (tile == detail::ChainTile::none) return false;
  detail::launch_direct_dgrad_chains(tile, conv_shape(geometry, out_channels), gy, w_taps, rows,
                                     planar_rows(out, geometry.height * geometry.width, rows));
  return true;
}

bool GpuConv::direct_dgrad(const ConvGeometry& geometry, size_t out_channels, const float* gy, const float* w_taps,
                           float* rows, bool planar) {
  return on_host(gy, geometry.batch * out_channels * geometry.out_h() * geometry.out_w(), w_taps,
                 out_channels * geometry.taps(), rows, geometry.input_size(),
                 [&](const float* d_gy, const float* d_w, float* d_rows, const float*) {
                   return direct_dgrad_on_device(geometry, out_channels, d_gy, d_w, d_rows, {planar, nullptr});
                 });
}

bool GpuConv::forward_on_device(const ConvGeometry& geometry, size_t out_channels, const float* x, const float* w_t,
                                float* rows, const RowsOut& out) {
  if (geometry.kernel > 5) return false;  // Im2colTaps: a window's offsets as one 32-bit mask
  const detail::ChainTile tile =
      conv_tile(geometry, out_channels, w_t, geometry.rows(), out_channels, geometry.taps(), true);
  if (tile == detail::ChainTile::none) return false;
  detail::launch_forward_chains(tile, conv_shape(geometry, out_channels), x, w_t, rows,
                                planar_rows(out, geometry.out_h() * geometry.out_w(), rows));
  return true;
}

bool GpuConv::forward(const ConvGeometry& geometry, size_t out_channels, const float* x, const float* w_t,
                      float* rows, bool planar, const float* bias) {
  return on_host(
      x, geometry.input_size(), w_t, geometry.taps() * out_channels, rows, geometry.rows() * out_channels,
      [&](const float* d_x, const float* d_w, float* d_rows, const float* d_bias) {
        return forward_on_device(geometry, out_channels, d_x, d_w, d_rows, {planar, d_bias});
      },
      bias, out_channels);
}

namespace {

// Whether the offsets' chains go apart (Col2imParts): where the workspace holds them and the
// one-pass grid gives the device fewer than 6 warps an SM (a deep layer's input gradient: on an
// H200's 132 SMs, ResNet-18's 4x4 layers, 3.9 warps an SM; its 8x8 ones, 7.8, take as long either
// way), or always. With more warps, the parts' extra traffic (k*k x rows x channels floats
// written, then read by the fold) costs more than the blocks gain (docs/results/torch_emulate.md,
// 2026-11-30).
bool col2im_in_parts(detail::ChainTile tile, const ConvGeometry& g, size_t m, const Col2imParts& parts) {
  const size_t needed = g.kernel * g.kernel * m * g.channels;
  if (!parts.workspace || parts.floats < needed) return false;
  if (parts.always) return true;
  // Blocks of 128 rows x `columns`, a thread 8 x 8 of them: columns / 16 warps a block
  const size_t columns = tile == detail::ChainTile::t128x128 ? 128 : 64;
  const size_t warps = (m + 127) / 128 * ((g.channels + columns - 1) / columns) * (columns / 16);
  return g.kernel > 1 && warps < 6 * static_cast<size_t>(current_sm_count());
}

}  // namespace

bool GpuConv::col2im_dgrad_on_device(const ConvGeometry& geometry, size_t out_channels, const float* gy,
                                     const float* weight, float* w_scratch, float* rows, const RowsOut& out,
                                     const Col2imParts& parts) {
  const size_t m = geometry.batch * geometry.height * geometry.width;
  const size_t k = geometry.kernel * geometry.kernel * out_channels;
  if (out_channels % 8) return false;  // Col2imTaps: a fetch's 4 columns under one kernel offset
  if (geometry.kernel > 16) return false;  // Col2imTaps::offset_masks: 16 offsets a side
  if (k * geometry.channels >= (size_t{1} << 32)) return false;  // the weight's copy indexes in 32 bits
  // The medium tile only where the offsets' chains would not go apart, which on grids short of
  // blocks are the faster form (0.28 ms against 0.35 at a ResNet-18's 4 x 4 layers).
  const detail::ChainTile wide = conv_tile(geometry, out_channels, w_scratch, m, geometry.channels, k, false);
  if (wide == detail::ChainTile::none) return false;
  const bool apart = col2im_in_parts(wide, geometry, m, parts);
  const detail::ChainTile tile =
      apart ? wide : conv_tile(geometry, out_channels, w_scratch, m, geometry.channels, k, out_channels % 32 == 0);
  if (tile == detail::ChainTile::none) return false;
  const auto count = static_cast<uint32_t>(k * geometry.channels);
  col2im_weight_kernel<<<blocks_for(count), kThreads>>>(weight, w_scratch, count,
                                                        static_cast<uint32_t>(geometry.channels),
                                                        static_cast<uint32_t>(out_channels),
                                                        static_cast<uint32_t>(geometry.kernel * geometry.kernel));
  FPLAB_CUDA_LAUNCHED("col2im_weight");
  const detail::ConvShape shape = conv_shape(geometry, out_channels);
  const detail::PlanarRows planar = planar_rows(out, geometry.height * geometry.width, rows);
  if (apart) {
    detail::launch_col2im_dgrad_parts(tile, shape, gy, w_scratch, parts.workspace);
    detail::launch_col2im_fold(shape, parts.workspace, rows, planar);
  } else {
    detail::launch_col2im_dgrad_chains(tile, shape, gy, w_scratch, rows, planar);
  }
  return true;
}

bool GpuConv::col2im_dgrad(const ConvGeometry& geometry, size_t out_channels, const float* gy, const float* weight,
                           float* rows, bool planar, bool parts) {
  DeviceBuffer scratch, workspace;
  float* const w_scratch = scratch.reserve<float>(geometry.taps() * out_channels);
  const size_t part_floats = parts ? geometry.kernel * geometry.kernel * geometry.input_size() : 0;
  const Col2imParts apart{parts ? workspace.reserve<float>(part_floats) : nullptr, part_floats, parts};
  return on_host(gy, geometry.batch * out_channels * geometry.out_h() * geometry.out_w(), weight,
                 out_channels * geometry.taps(), rows, geometry.input_size(),
                 [&](const float* d_gy, const float* d_w, float* d_rows, const float*) {
                   return col2im_dgrad_on_device(geometry, out_channels, d_gy, d_w, w_scratch, d_rows,
                                                 {planar, nullptr}, apart);
                 });
}

}  // namespace fplab::sim::gpu
