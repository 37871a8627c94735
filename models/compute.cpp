#include "models/compute.hpp"

#include <type_traits>
#include <vector>

#include "sim/engine.hpp"
#include "sim/reference_evaluator.hpp"

namespace fplab::models {

template <>
void matmul<float>(const Context& ctx, profiles::OpKind op, const float* a, const float* b, float* c, size_t m, size_t n,
                   size_t k, uint64_t part) {
  const profiles::OpChoice& choice = ctx.choice(op);
  if (ctx.backend) return ctx.backend->matmul(choice, ctx.key(op, part), a, b, c, m, n, k);
  sim::gemm(choice.schedule, a, b, c, {m, n, k}, choice.arithmetic, ctx.key(op, part));
}

template <>
void matmul<double>(const Context& ctx, profiles::OpKind op, const double* a, const double* b, double* c, size_t m, size_t n,
                    size_t k, uint64_t part) {
  const profiles::OpChoice& choice = ctx.choice(op);
  sim::gemm_reference(choice.schedule, a, b, c, {m, n, k}, choice.arithmetic, ctx.key(op, part));
}

template <class T>
void sum_rows(const Context& ctx, profiles::OpKind op, const T* x, size_t rows, size_t cols, T* out, uint64_t part) {
  const profiles::OpChoice& choice = ctx.choice(op);
  if constexpr (std::is_same_v<T, float>)
    if (ctx.backend) return ctx.backend->sum_rows(choice, ctx.key(op, part), x, rows, cols, out);
  std::vector<double> terms(x, x + rows * cols), result(cols);
  sim::reduce_batch(choice.schedule, terms.data(), rows, cols, choice.arithmetic, ctx.key(op, part), result.data());
  for (size_t j = 0; j < cols; ++j) out[j] = static_cast<T>(result[j]);
}

template <class T>
bool backend_conv_forward(const Context& ctx, const sim::ConvGeometry& geometry, size_t out_channels, const T* x,
                          const T* w, T* out_rows, T* cols) {
  if constexpr (std::is_same_v<T, float>)
    if (ctx.backend)
      return ctx.backend->conv_forward(ctx.choice(profiles::OpKind::fwd), ctx.key(profiles::OpKind::fwd), geometry, out_channels, x, w,
                                       out_rows, cols);
  return false;
}

template <class T>
bool backend_conv_input_grad(const Context& ctx, const sim::ConvGeometry& geometry, size_t out_channels,
                             const T* g_rows, const T* w_t, T* dx) {
  if constexpr (std::is_same_v<T, float>)
    if (ctx.backend)
      return ctx.backend->conv_input_grad(ctx.choice(profiles::OpKind::dgrad), ctx.key(profiles::OpKind::dgrad), geometry, out_channels,
                                          g_rows, w_t, dx);
  return false;
}

template <class T>
void transpose(const T* x, size_t rows, size_t cols, T* out) {
  constexpr size_t kBlock = 32;  // cache blocking
  for (size_t i0 = 0; i0 < rows; i0 += kBlock)
    for (size_t j0 = 0; j0 < cols; j0 += kBlock)
      for (size_t i = i0; i < std::min(rows, i0 + kBlock); ++i)
        for (size_t j = j0; j < std::min(cols, j0 + kBlock); ++j) out[j * rows + i] = x[i * cols + j];
}

template void sum_rows<float>(const Context&, profiles::OpKind, const float*, size_t, size_t, float*, uint64_t);
template void sum_rows<double>(const Context&, profiles::OpKind, const double*, size_t, size_t, double*, uint64_t);
template bool backend_conv_forward<float>(const Context&, const sim::ConvGeometry&, size_t, const float*, const float*,
                                          float*, float*);
template bool backend_conv_forward<double>(const Context&, const sim::ConvGeometry&, size_t, const double*,
                                           const double*, double*, double*);
template bool backend_conv_input_grad<float>(const Context&, const sim::ConvGeometry&, size_t, const float*,
                                             const float*, float*);
template bool backend_conv_input_grad<double>(const Context&, const sim::ConvGeometry&, size_t, const double*,
                                              const double*, double*);
template void transpose<float>(const float*, size_t, size_t, float*);
template void transpose<double>(const double*, size_t, size_t, double*);

}  // namespace fplab::models
