"""What runs natively, and whether that matters: the classification of operations fplab.torch does
not emulate.

An operation whose result cannot depend on an order of additions (elementwise arithmetic, shapes,
indexing, copies, comparisons, maxima and max-pooling, random fills) runs natively and is listed
in coverage() as such, without a warning. Bookkeeping (attribute access, sizes, printing,
``backward()`` itself) is not listed at all. Anything else that fplab.torch does not know may
reduce: it runs natively, is listed and is warned about once. At the aten level, the reductions of
ATEN_REDUCTIONS that run outside an emulated operation (inside a native operation, or in autograd's
own backward of one) are listed and warned about too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch.overrides import resolve_name

from .. import _core

#: True where this fplab was built with its CUDA kernels (python/src/cuda.cpp).
CUDA_KERNELS = hasattr(_core, "cuda_matmul")


@dataclass(frozen=True)
class Native:
    """A handler's answer that an operation runs natively, and why (listed in coverage)."""

    reason: str
    warn: bool = True  #: False where running natively cannot change a result (integer sums)


def op_name(func: Callable) -> str:
    """The public name of a torch function: "torch.nn.functional.linear", "torch.Tensor.add_"."""
    name = resolve_name(func)
    if name:
        return name
    module = getattr(func, "__module__", None) or ""
    qualname = getattr(func, "__qualname__", None) or repr(func)
    return f"{module}.{qualname}" if module else qualname


# Names (their last component, an in-place '_' and dunder '__' removed, 'r'/'i' prefixes of
# reflected and in-place dunders removed) whose results do not depend on any order of additions.
NO_REDUCTION = frozenset("""
abs absolute neg negative positive add sub subtract rsub mul multiply div divide true_divide floor_divide
remainder fmod pow float_power sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan
atan2 sinh cosh tanh asinh acosh atanh sigmoid logit relu relu6 leaky_relu rrelu elu selu celu gelu silu
mish softplus softsign hardtanh hardsigmoid hardswish hardshrink softshrink tanhshrink threshold
clamp clip clamp_min clamp_max sign sgn signbit floor ceil round trunc fix frac reciprocal square erf erfc
erfinv lerp addcmul addcdiv where masked_fill masked_scatter maximum minimum fmax fmin heaviside copysign
nextafter logical_and logical_or logical_xor logical_not bitwise_and bitwise_or bitwise_xor bitwise_not
and or xor invert lshift rshift eq ne lt le gt ge equal isnan isinf isfinite isclose allclose isneginf
isposinf isreal nan_to_num dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout
zero fill fill_diagonal copy normal uniform bernoulli random exponential cauchy geometric log_normal
view view_as reshape reshape_as flatten unflatten ravel squeeze unsqueeze permute transpose t adjoint
contiguous expand expand_as repeat repeat_interleave tile narrow narrow_copy select index_select gather
scatter take take_along_dim masked_select nonzero argwhere cat concat concatenate stack hstack vstack
dstack split tensor_split split_with_sizes hsplit vsplit chunk unbind movedim moveaxis swapaxes swapdims
flip fliplr flipud roll rot90 pad clone detach to type type_as float double half bfloat16 int long short
bool byte char cpu getitem setitem tril triu diag_embed one_hot zeros_like ones_like empty_like full_like
rand_like randn_like randint_like new_zeros new_ones new_empty new_full new_tensor tensor as_tensor
zeros ones empty full arange linspace eye rand randn randint randperm unfold fold max min amax amin
argmax argmin aminmax max_pool1d max_pool2d max_pool3d max_pool1d_with_indices max_pool2d_with_indices
max_pool3d_with_indices adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d topk sort argsort
msort kthvalue median nanmedian mode any all count_nonzero embedding flatten_parameters pixel_shuffle
pixel_unshuffle channel_shuffle interpolate upsample_nearest set_ resize_ as_strided
""".split())

# Bookkeeping: not listed in coverage at all.
BOOKKEEPING = frozenset("""
get set size dim ndimension numel nelement stride storage_offset is_contiguous data_ptr element_size len
iter repr format str hash index item tolist numpy requires_grad retain_grad
register_hook backward grad reduce_ex deepcopy setstate getstate is_floating_point is_complex storage
untyped_storage has_names is_set_to share_memory pin_memory array array_wrap get_device is_shared
is_nonzero is_same_size is_signed is_inference contains apply map reversed nbytes itemsize
_record_function_enter _record_function_enter_new _record_function_exit _set_grad_enabled
""".split())

#: aten operations (overload packets) that reduce: listed when they run outside an emulated op.
ATEN_REDUCTIONS = frozenset("""
mm addmm bmm baddbmm addbmm mv addmv addr dot vdot inner outer matmul linear convolution _convolution
convolution_backward convolution_overrideable mkldnn_convolution _slow_conv2d_forward
_slow_conv2d_backward slow_conv3d slow_conv_dilated2d slow_conv_transpose2d thnn_conv2d sum nansum mean
_softmax _log_softmax _softmax_backward_data _log_softmax_backward_data nll_loss_forward
nll_loss2d_forward native_batch_norm native_batch_norm_backward _native_batch_norm_legit
batch_norm_stats native_layer_norm native_layer_norm_backward native_group_norm
native_group_norm_backward var std var_mean std_mean norm linalg_vector_norm linalg_norm frobenius_norm
cumsum cumprod prod logsumexp logcumsumexp _embedding_bag _embedding_bag_backward
embedding_dense_backward index_add scatter_add scatter_reduce avg_pool1d avg_pool2d avg_pool3d
avg_pool2d_backward avg_pool3d_backward adaptive_avg_pool1d adaptive_avg_pool2d _adaptive_avg_pool2d
_adaptive_avg_pool2d_backward adaptive_avg_pool3d _adaptive_avg_pool3d mse_loss l1_loss smooth_l1_loss
huber_loss binary_cross_entropy binary_cross_entropy_with_logits kl_div cross_entropy_loss col2im
im2col_backward trace cdist _cdist_forward _cdist_backward upsample_bilinear2d_backward
upsample_nearest2d_backward
""".split())


def short_name(name: str) -> str:
    """The last component of ``name`` with in-place and dunder decorations removed ("__radd__" -> "add")."""
    last = name.rsplit(".", 1)[-1]
    if last.startswith("__") and last.endswith("__") and len(last) > 4:
        last = last[2:-2]
        for prefix in ("r", "i"):
            if last.startswith(prefix) and last[1:] in NO_REDUCTION:
                return last[1:]
        return last
    if last.startswith("_foreach_"):
        return last[len("_foreach_"):].rstrip("_")  # the optimisers' elementwise list ops
    return last[:-1] if last.endswith("_") and not last.endswith("__") else last


def classify(name: str) -> Optional[Native]:
    """Why an operation that is not emulated runs natively, or None for bookkeeping (not listed)."""
    if name.endswith(".__get__") or name.endswith(".__set__"):
        return None
    short = short_name(name)
    if short in BOOKKEEPING:
        return None
    if short in NO_REDUCTION:
        return Native("no reduction (elementwise, shape, indexing or selection)", warn=False)
    return Native("not emulated by fplab.torch (it may reduce in its own order)")


def has_floating_tensor(args, kwargs) -> bool:
    """True if any tensor among the (nested) arguments is floating point."""
    stack = list(args) + list((kwargs or {}).values())
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            if item.is_floating_point():
                return True
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def unsupported(*tensors: Optional[torch.Tensor]) -> Optional[Native]:
    """Why these tensors (None skipped) cannot go through fplab's engines, or None if they can:
    every one a dense float32 tensor, all on the CPU or all on one CUDA device (where this fplab
    has its CUDA kernels)."""
    device = None
    for t in tensors:
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            return Native(f"an argument is a {type(t).__name__}, not a tensor")
        if t.device.type not in ("cpu", "cuda"):
            return Native(f"{t.device.type} tensors are not emulated (CPU and CUDA only)")
        if t.device.type == "cuda" and not CUDA_KERNELS:
            return Native("cuda tensors: this fplab was built without its CUDA kernels (no nvcc where it was built)")
        if device is not None and t.device != device:
            return Native(f"tensors on {device} and {t.device} (PyTorch says why)")
        device = t.device
        if t.layout != torch.strided:
            return Native(f"{t.layout} tensors are not emulated")
        if t.dtype != torch.float32:
            exact = not (t.is_floating_point() or t.is_complex())
            return Native(f"dtype {str(t.dtype).replace('torch.', '')}: only float32 is emulated"
                          + (" (integers add exactly in any order)" if exact else ""), warn=not exact)
    return None

