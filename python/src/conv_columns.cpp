// fplab._core.im2col, col2im and the (B·P, C) <-> (B, C, P) layout changes of fplab.torch's
// convolutions and batch norms: copies and the col2im additions in C++, without the GIL, so that a
// convolution's data movement costs about what the C++ Conv2d's does (models/conv2d.cpp) instead
// of F.unfold, strided torch copies and a Python loop of strided additions.
//
// Layouts are those of models/conv2d.cpp: x is (B, C, H, W) C-contiguous float32; the columns
// ("rows") are (B·Ho·Wo) x (C·kh·kw), row (b, oy, ox), column (c, i, j), padding taps +0; the
// transposed columns are (C·kh·kw) x (B·Ho·Wo), the weight gradient's left operand. col2im adds,
// into every input element starting from +0, its terms in the order of the rows (b, oy, ox)
// (kernel offsets from the last to the first), one float32 addition each: Conv2d::backward's
// order, and that of the Python loop it replaces. Nothing here rounds except those additions.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "models/conv_dgrad_taps.hpp"
#include "python/src/bindings.hpp"
#include "python/src/transpose.hpp"

namespace fplab::python {
namespace {

struct Geometry {
  size_t batch, channels, h, w;  // the input (of one group: `channels` from channel c0 of c_total)
  size_t c0, c_total;
  long kh, kw, sh, sw, ph, pw, dh, dw;
  size_t ho, wo;

  size_t rows() const { return batch * ho * wo; }
  size_t taps() const { return channels * static_cast<size_t>(kh * kw); }
  // The input plane of (b, c) of the whole input (c counted within the group).
  size_t plane(size_t b, size_t c) const { return ((b * c_total + c0 + c) * h) * w; }
};

Geometry geometry(size_t batch, size_t c_total, size_t h, size_t w, size_t c0, size_t channels, py::tuple kernel,
                  py::tuple stride, py::tuple padding, py::tuple dilation, const char* function) {
  Geometry g{batch, channels, h, w, c0, c_total, kernel[0].cast<long>(), kernel[1].cast<long>(),
             stride[0].cast<long>(), stride[1].cast<long>(), padding[0].cast<long>(), padding[1].cast<long>(),
             dilation[0].cast<long>(), dilation[1].cast<long>(), 0, 0};
  if (g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.ph < 0 || g.pw < 0 || g.dh < 1 || g.dw < 1 ||
      c0 + channels > c_total)
    throw std::invalid_argument(std::string(function) + ": bad kernel, stride, padding, dilation or channels");
  const long reach_h = g.dh * (g.kh - 1) + 1, reach_w = g.dw * (g.kw - 1) + 1;
  const long span_h = static_cast<long>(h) + 2 * g.ph - reach_h, span_w = static_cast<long>(w) + 2 * g.pw - reach_w;
  if (span_h < 0 || span_w < 0)
    throw std::invalid_argument(std::string(function) + ": the kernel is larger than the padded input");
  g.ho = static_cast<size_t>(span_h / g.sh + 1);
  g.wo = static_cast<size_t>(span_w / g.sw + 1);
  return g;
}

FloatArray float32_array(py::handle object, const char* function, const char* name, py::ssize_t ndim) {
  if (!py::isinstance<py::array>(object))
    throw std::invalid_argument(std::string(function) + ": " + name + " must be a NumPy float32 array");
  const auto x = py::reinterpret_borrow<py::array>(object);
  if (x.dtype().kind() != 'f' || x.dtype().itemsize() != 4 || x.ndim() != ndim)
    throw std::invalid_argument(std::string(function) + ": " + name + " must be a " + std::to_string(ndim) +
                                "-D float32 array");
  return FloatArray::ensure(x);
}

// The columns of input channels [c0, c0 + channels) of x (B, C, H, W): (B·Ho·Wo) x (C·kh·kw), or its
// transpose with `transposed`.
py::array_t<float> im2col(py::handle x_in, py::tuple kernel, py::tuple stride, py::tuple padding, py::tuple dilation,
                          size_t c0, long channels_in, bool transposed, py::object out_in) {
  const FloatArray x = float32_array(x_in, "im2col", "x", 4);
  const auto c_total = static_cast<size_t>(x.shape(1));
  const size_t channels = channels_in < 0 ? c_total - std::min(c0, c_total) : static_cast<size_t>(channels_in);
  const Geometry g = geometry(static_cast<size_t>(x.shape(0)), c_total, static_cast<size_t>(x.shape(2)),
                              static_cast<size_t>(x.shape(3)), c0, channels, kernel, stride, padding, dilation,
                              "im2col");
  const size_t rows = g.rows(), taps = g.taps();
  const size_t out_rows = transposed ? taps : rows, out_cols = transposed ? rows : taps;
  py::array_t<float> out = out_in.is_none() ? py::array_t<float>({static_cast<py::ssize_t>(out_rows),
                                                                  static_cast<py::ssize_t>(out_cols)})
                                            : output_array(out_in, "im2col", {out_rows, out_cols});
  const float* src = x.data();
  float* dst = out.mutable_data();
  py::gil_scoped_release unlocked;
  const long lh = static_cast<long>(g.h), lw = static_cast<long>(g.w);
  if (!transposed) {
    // Row by row, as Conv2d::im2col: x[b] stays in cache while its rows are written. The input
    // lines of the taps (c, i) of an output row oy are found once for all its ox (null: padding).
    std::vector<const float*> lines(g.channels * static_cast<size_t>(g.kh));
    for (size_t b = 0; b < g.batch; ++b)
      for (size_t oy = 0; oy < g.ho; ++oy) {
        const long y0 = static_cast<long>(oy) * g.sh - g.ph;
        for (size_t c = 0; c < g.channels; ++c)
          for (long i = 0; i < g.kh; ++i) {
            const long y = y0 + i * g.dh;
            lines[c * static_cast<size_t>(g.kh) + static_cast<size_t>(i)] =
                y < 0 || y >= lh ? nullptr : src + g.plane(b, c) + y * lw;
          }
        for (size_t ox = 0; ox < g.wo; ++ox) {
          float* tap = dst + ((b * g.ho + oy) * g.wo + ox) * taps;
          const long x0 = static_cast<long>(ox) * g.sw - g.pw;
          // The kernel columns j whose input column x0 + j·dw lies inside the image: [j_lo, j_hi).
          const long j_lo = std::min(g.kw, x0 >= 0 ? 0 : (-x0 + g.dw - 1) / g.dw);
          const long j_hi = std::clamp(lw - x0 <= 0 ? 0 : (lw - x0 + g.dw - 1) / g.dw, j_lo, g.kw);
          if (j_lo == 0 && j_hi == 3 && g.kw == 3 && g.dw == 1) {  // the common 3x3 case, unrolled
            for (const float* line : lines) {
              if (line) {
                tap[0] = line[x0];
                tap[1] = line[x0 + 1];
                tap[2] = line[x0 + 2];
              } else {
                tap[0] = tap[1] = tap[2] = 0.0f;
              }
              tap += 3;
            }
            continue;
          }
          for (const float* line : lines) {
            if (!line) {
              std::fill(tap, tap + g.kw, 0.0f);
            } else {
              for (long j = 0; j < j_lo; ++j) tap[j] = 0.0f;
              for (long j = j_lo; j < j_hi; ++j) tap[j] = line[x0 + j * g.dw];
              for (long j = j_hi; j < g.kw; ++j) tap[j] = 0.0f;
            }
            tap += g.kw;
          }
        }
      }
    return out;
  }
  // Transposed: one tap (c, i, j) a row of B·Ho·Wo, written in order.
  for (size_t c = 0; c < g.channels; ++c)
    for (long i = 0; i < g.kh; ++i)
      for (long j = 0; j < g.kw; ++j) {
        float* row = dst + ((static_cast<long>(c) * g.kh + i) * g.kw + j) * static_cast<long>(rows);
        // The output columns ox whose input column x0 + j·dw lies inside the image: [ox_lo, ox_hi).
        const long off = j * g.dw - g.pw;
        long ox_lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
        long ox_hi = lw - off <= 0 ? 0 : (lw - off + g.sw - 1) / g.sw;
        ox_lo = std::min(ox_lo, static_cast<long>(g.wo));
        ox_hi = std::clamp(ox_hi, ox_lo, static_cast<long>(g.wo));
        for (size_t b = 0; b < g.batch; ++b) {
          const float* plane = src + g.plane(b, c);
          for (size_t oy = 0; oy < g.ho; ++oy) {
            float* out_row = row + (b * g.ho + oy) * g.wo;
            const long y = static_cast<long>(oy) * g.sh - g.ph + i * g.dh;
            if (y < 0 || y >= lh) {
              std::fill(out_row, out_row + g.wo, 0.0f);
              continue;
            }
            const float* line = plane + y * lw;
            std::fill(out_row, out_row + ox_lo, 0.0f);
            if (g.sw == 1 && ox_hi > ox_lo)
              std::memcpy(out_row + ox_lo, line + ox_lo + off, static_cast<size_t>(ox_hi - ox_lo) * sizeof(float));
            else
              for (long ox = ox_lo; ox < ox_hi; ++ox) out_row[ox] = line[ox * g.sw + off];
            std::fill(out_row + ox_hi, out_row + g.wo, 0.0f);
          }
        }
      }
  return out;
}

// The input gradient (B, C, H, W) of the columns' gradient dcols ((B·Ho·Wo) x (C·kh·kw)).
py::array_t<float> col2im(py::handle dcols_in, py::tuple shape, py::tuple kernel, py::tuple stride, py::tuple padding,
                          py::tuple dilation) {
  const FloatArray dcols = float32_array(dcols_in, "col2im", "dcols", 2);
  const auto batch = shape[0].cast<size_t>(), channels = shape[1].cast<size_t>();
  const auto h = shape[2].cast<size_t>(), w = shape[3].cast<size_t>();
  const Geometry g = geometry(batch, channels, h, w, 0, channels, kernel, stride, padding, dilation, "col2im");
  const size_t rows = g.rows(), taps = g.taps();
  if (static_cast<size_t>(dcols.shape(0)) != rows || static_cast<size_t>(dcols.shape(1)) != taps)
    throw std::invalid_argument("col2im: dcols must be (" + std::to_string(rows) + ", " + std::to_string(taps) + ")");
  py::array_t<float> out({static_cast<py::ssize_t>(batch), static_cast<py::ssize_t>(channels),
                          static_cast<py::ssize_t>(h), static_cast<py::ssize_t>(w)});
  const float* src = dcols.data();
  float* dx = out.mutable_data();
  py::gil_scoped_release unlocked;
  std::fill(dx, dx + batch * channels * h * w, 0.0f);
  const long lh = static_cast<long>(h), lw = static_cast<long>(w);
  // Rows in order; within a row every tap meets another element, so only the rows' order matters.
  // The lines of dx that the taps (c, i) of an output row oy meet are found once for all its ox.
  std::vector<float*> lines(channels * static_cast<size_t>(g.kh));
  for (size_t b = 0; b < batch; ++b)
    for (size_t oy = 0; oy < g.ho; ++oy) {
      const long y0 = static_cast<long>(oy) * g.sh - g.ph;
      for (size_t c = 0; c < channels; ++c)
        for (long i = 0; i < g.kh; ++i) {
          const long y = y0 + i * g.dh;
          lines[c * static_cast<size_t>(g.kh) + static_cast<size_t>(i)] =
              y < 0 || y >= lh ? nullptr : dx + g.plane(b, c) + y * lw;
        }
      for (size_t ox = 0; ox < g.wo; ++ox) {
        const float* tap = src + ((b * g.ho + oy) * g.wo + ox) * taps;
        const long x0 = static_cast<long>(ox) * g.sw - g.pw;
        const long j_lo = std::min(g.kw, x0 >= 0 ? 0 : (-x0 + g.dw - 1) / g.dw);
        const long j_hi = std::clamp(lw - x0 <= 0 ? 0 : (lw - x0 + g.dw - 1) / g.dw, j_lo, g.kw);
        if (j_lo == 0 && j_hi == 3 && g.kw == 3 && g.dw == 1) {  // the common 3x3 case, unrolled
          for (float* line : lines) {
            if (line) {
              line[x0] += tap[0];
              line[x0 + 1] += tap[1];
              line[x0 + 2] += tap[2];
            }
            tap += 3;
          }
          continue;
        }
        for (float* line : lines) {
          if (line)
            for (long j = j_lo; j < j_hi; ++j) line[x0 + j * g.dw] += tap[j];
          tap += g.kw;
        }
      }
    }
  return out;
}

// The terms of conv_dgrad "direct" (models/conv2d.cpp's input_grad_direct): for every input pixel
// (b, y, x) of an H x W input, row (b, y, x), the output gradient g (B, C_out, Ho, Wo) at every
// (channel, kernel row, kernel column) of channels [c0, c0 + channels): g[b, c, oy, ox] where
// y + ph - i·dh = oy·sh and x + pw - j·dw = ox·sw lie on the output, else +0. (B·H·W) x (C·kh·kw).
py::array_t<float> dgrad_taps(py::handle g_in, py::tuple input_hw, py::tuple kernel, py::tuple stride,
                              py::tuple padding, py::tuple dilation, size_t c0, long channels_in, py::handle out_in) {
  const FloatArray gy = float32_array(g_in, "dgrad_taps", "g", 4);
  const auto c_total = static_cast<size_t>(gy.shape(1));
  const size_t channels = channels_in < 0 ? c_total - std::min(c0, c_total) : static_cast<size_t>(channels_in);
  const auto h = input_hw[0].cast<size_t>(), w = input_hw[1].cast<size_t>();
  // The geometry of the forward convolution (input H x W): its output must be g's planes.
  Geometry f = geometry(static_cast<size_t>(gy.shape(0)), c_total, h, w, c0, channels, kernel, stride, padding,
                        dilation, "dgrad_taps");
  if (f.ho != static_cast<size_t>(gy.shape(2)) || f.wo != static_cast<size_t>(gy.shape(3)))
    throw std::invalid_argument("dgrad_taps: g's planes are not the output of an input of that size");
  const size_t rows = f.batch * h * w, taps = f.taps();
  py::array_t<float> out = out_in.is_none()
                               ? py::array_t<float>({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(taps)})
                               : output_array(out_in, "dgrad_taps", {rows, taps});
  const models::ConvTaps shape{f.batch, c_total, c0, channels, h, w, f.ho, f.wo, f.kh, f.kw, f.sh, f.sw, f.ph, f.pw,
                                f.dh, f.dw};
  const float* src = gy.data();
  float* dst = out.mutable_data();
  py::gil_scoped_release unlocked;
  models::dgrad_taps(src, shape, dst);
  return out;
}

// x (B, M, N) as (B, N, M): the (B·P) x C rows of a convolution's GEMM as (B, C, P), and back.
py::array_t<float> transpose_batches(py::handle x_in) {
  const FloatArray x = float32_array(x_in, "transpose_batches", "x", 3);
  const auto d0 = static_cast<size_t>(x.shape(0)), d1 = static_cast<size_t>(x.shape(1));
  const auto d2 = static_cast<size_t>(x.shape(2));
  py::array_t<float> out({static_cast<py::ssize_t>(d0), static_cast<py::ssize_t>(d2), static_cast<py::ssize_t>(d1)});
  const float* src = x.data();
  float* dst = out.mutable_data();
  py::gil_scoped_release unlocked;
  for (size_t b = 0; b < d0; ++b) transpose_into(src + b * d1 * d2, dst + b * d1 * d2, d1, d2);
  return out;
}

}  // namespace

void bind_conv_columns(py::module_& m) {
  m.def("im2col", &im2col, py::arg("x"), py::arg("kernel"), py::arg("stride"), py::arg("padding"), py::arg("dilation"),
        py::arg("c0") = 0, py::arg("channels") = -1, py::arg("transposed") = false, py::kw_only(),
        py::arg("out") = py::none(),
        "The im2col columns of channels [c0, c0 + channels) of the float32 array x (B, C, H, W): (B*Ho*Wo) x "
        "(C*kh*kw), rows (b, oy, ox), columns (c, i, j), zero padding; transposed: (C*kh*kw) x (B*Ho*Wo). Written "
        "into out (a C-contiguous float32 array of that shape) when given.");
  m.def("col2im", &col2im, py::arg("dcols"), py::arg("shape"), py::arg("kernel"), py::arg("stride"),
        py::arg("padding"), py::arg("dilation"),
        "The input gradient (B, C, H, W) of the columns' gradient dcols ((B*Ho*Wo) x (C*kh*kw)): every element "
        "the float32 sum, from +0, of its terms in the order of the rows (models/conv2d.cpp's col2im).");
  m.def("dgrad_taps", &dgrad_taps, py::arg("g"), py::arg("input_hw"), py::arg("kernel"), py::arg("stride"),
        py::arg("padding"), py::arg("dilation"), py::arg("c0") = 0, py::arg("channels") = -1, py::kw_only(),
        py::arg("out") = py::none(),
        "The terms of a direct convolution input gradient from the output gradient g (B, C_out, Ho, Wo) of an "
        "input of input_hw = (H, W): (B*H*W) x (C*kh*kw) for channels [c0, c0 + channels), row (b, y, x), column "
        "(c, i, j) holding g where that tap of that pixel meets an output, else +0. Written into out when given.");
  m.def("transpose_batches", &transpose_batches, py::arg("x"),
        "x (B, M, N) float32 as (B, N, M): every batch's matrix transposed (a copy).");
}

}  // namespace fplab::python
