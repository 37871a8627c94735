"""The bridge from PyTorch tensors to fplab's C++ engine: GEMMs (``_core.matmul``) and batched
sums (``_core.reduce_batch``) with a table's schedule and arithmetic for an op kind and the noise
key of the operation's Site.

Tensors cross without copies where they can: a C-contiguous float32 CPU tensor is handed over as
``tensor.numpy()`` (the same memory), and the result arrays become tensors with
``torch.from_numpy`` (the same memory). The sums take float64 terms (the engine's batched sum),
so their float32 terms are converted on the way in (for batch norms' planes, in C++ while they are
gathered into rows); the C++ work runs without the GIL.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import numpy as np
import torch

from .. import _core
from .._core import OpChoice
from ._coverage import CoverageRecorder
from ._fma import channel_fma
from ._keys import Site
from ._table import Table

Pair = Tuple[int, int]


def output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """A convolution's output length along one axis (PyTorch's and models/conv2d.cpp's)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def as_array(tensor) -> np.ndarray:
    """The tensor's values as a C-contiguous NumPy array (its own memory when already contiguous);
    a NumPy array (made by _core for fplab.torch) as it is."""
    if isinstance(tensor, np.ndarray):
        return tensor
    return tensor.detach().contiguous().numpy()


def _cpu(kind: str, choice: OpChoice) -> str:
    return "cpu"


class Engine:
    """Runs one emulation's reductions on the CPU and records each in its coverage.

    ``where(op_kind, choice)`` says in coverage where the reduction ran: "cpu", or, for the CUDA
    engine's host round trips (_engine_cuda.py), why it came here."""

    def __init__(self, table: Table, impl_seed: int, coverage: CoverageRecorder,
                 where: Callable[[str, OpChoice], str] = _cpu) -> None:
        self.table = table
        self.impl_seed = impl_seed
        self.coverage = coverage
        self.where = where
        self._scratch = np.empty(0, np.float32)

    def scratch(self, rows: int, cols: int) -> np.ndarray:
        """A (rows, cols) float32 array for a temporary that dies within one step of one emulated
        operation (a convolution's columns, their gradient): the same memory every time, grown when
        needed and kept while the emulation lives (as a GPU library keeps its workspace), so that the
        system does not map and zero-fill these large buffers again for every convolution."""
        size = rows * cols
        if self._scratch.size < size:
            self._scratch = np.empty(0, np.float32)  # the smaller one goes first
            self._scratch = np.empty(size, np.float32)
        return self._scratch[:size].reshape(rows, cols)

    def matmul(self, op: str, op_kind: str, a, b, site: Site, part: int = 0,
               out: Optional[np.ndarray] = None) -> torch.Tensor:
        """C = A B for 2-D float32 tensors (or C-contiguous float32 arrays), every output's sum over
        K in the order of ``op_kind``'s schedule, into ``out`` when given (scratch(): then the
        tensor shares its memory); ``op`` names the PyTorch operation for coverage."""
        choice = self.table.choice(op_kind, site.layer)
        self.coverage.emulated(op, op_kind, choice, self.where(op_kind, choice))
        c = _core.matmul(as_array(a), as_array(b), choice.schedule, choice.arithmetic, self.impl_seed,
                         site.op_id(op_kind, part), site.call, out=out)
        return torch.from_numpy(c)

    def sum_rows(self, op: str, op_kind: str, terms: torch.Tensor, site: Site, part: int = 0) -> torch.Tensor:
        """The columns of the 2-D tensor ``terms`` (k, outputs) each summed over its k rows in the
        order of ``op_kind``'s schedule (models/compute.cpp's sum_rows): a float32 tensor (outputs,)."""
        choice = self.table.choice(op_kind, site.layer)
        self.coverage.emulated(op, op_kind, choice, self.where(op_kind, choice))
        sums = _core.reduce_batch(as_array(terms), choice.schedule, choice.arithmetic, self.impl_seed,
                                  site.op_id(op_kind, part), site.call)
        return torch.from_numpy(sums.astype(np.float32))

    def sum_planes(self, op: str, op_kind: str, x: torch.Tensor, site: Site, part: int = 0) -> torch.Tensor:
        """The sums per channel of x (B, C, ...) over batch and positions, term (b, p) at b·P + p in
        the order of ``op_kind``'s schedule: sum_rows of x as rows (b, p) x channels, without
        making those rows (models/batch_norm.cpp's statistics): a float32 tensor (C,)."""
        choice = self.table.choice(op_kind, site.layer)
        self.coverage.emulated(op, op_kind, choice, self.where(op_kind, choice))
        planes = as_array(x).reshape(x.shape[0], x.shape[1], -1)
        sums = _core.reduce_planes(planes, choice.schedule, choice.arithmetic, self.impl_seed,
                                   site.op_id(op_kind, part), site.call)
        return torch.from_numpy(sums.astype(np.float32))

    def dot_planes(self, op: str, op_kind: str, a: torch.Tensor, b: torch.Tensor, site: Site,
                   where: Optional[str] = None) -> torch.Tensor:
        """Per channel c of a and b (B, C, ...) the dot product over batch and positions, term (b, p)
        at b·P + p, in the order and arithmetic of ``op_kind`` (products fused where it says): a
        1 x n by n x 1 GEMM each, reduction part 1 + c (models/batch_norm.cpp's column_dots, cuDNN's
        form of a batch norm): a float32 tensor (C,). ``where``: what coverage() says ran it."""
        choice = self.table.choice(op_kind, site.layer)
        self.coverage.emulated(op, op_kind, choice, where or self.where(op_kind, choice))
        shape = (a.shape[0], a.shape[1], -1)
        op_ids = [site.op_id(op_kind, 1 + c) for c in range(a.shape[1])]
        dots = _core.dot_planes(as_array(a).reshape(shape), as_array(b).reshape(shape), choice.schedule,
                                choice.arithmetic, self.impl_seed, op_ids, site.call)
        return torch.from_numpy(dots)

    def conv2d_forward(self, op: str, site: Site, x, weight, bias, stride: Pair, padding: Pair, dilation: Pair,
                       groups: int) -> None:
        """None: on the CPU a convolution's steps run one by one (_ops_conv.py); the CUDA engine fuses them."""
        return None

    def conv2d_backward(self, op: str, site: Site, x, weight, gy, stride: Pair, padding: Pair, dilation: Pair,
                        groups: int, need_x: bool, need_w: bool, need_bias: bool) -> None:
        """None, as conv2d_forward."""
        return None

    def conv2d_direct_dgrad(self, op: str, site: Site, gy, weight, x_shape, stride: Pair, padding: Pair,
                            dilation: Pair, slab_images: int) -> None:
        """None: on the CPU conv_dgrad "direct" runs slab by slab (_ops_conv._direct_input_grad)."""
        return None

    def winograd_weight_grad(self, op: str, site: Site, x, gy, padding: int) -> None:
        """None: on the CPU the Winograd transforms run a row at a time as torch operations
        (_winograd.weight_grad); the CUDA engine runs them in one call of its kernels."""
        return None

    def nchw_why_not(self) -> str:
        """'': the CPU engine runs cuDNN's NCHW kernels' model itself (_core.cudnn_nchw_*)."""
        return ""

    def batch_norm_nchw_forward(self, x, weight, bias, eps: float, running_mean=None, running_var=None,
                                momentum: float = 0.1) -> None:
        """None: on the CPU cuDNN's NCHW kernels' model runs through _core.cudnn_nchw_forward
        (_ops_norm._forward_cudnn_nchw); the CUDA engine has a device twin."""
        return None

    def batch_norm_nchw_backward(self, gy, x, mean, inv_std, weight, need_x: bool) -> None:
        """None, as batch_norm_nchw_forward."""
        return None

    def batch_norm_cudnn_forward(self, op: str, site: Site, x, weight, bias, running_mean, running_var,
                                 momentum: float, eps: float) -> None:
        """None: on the CPU cuDNN's form runs as _ops_norm's composed steps (the CUDA engine fuses them)."""
        return None

    def batch_norm_cudnn_backward(self, op: str, site: Site, gy, centred, inv_std, weight, need_x: bool) -> None:
        """None, as batch_norm_cudnn_forward."""
        return None

    def batch_norm_forward(self, op: str, site: Site, x, weight, bias, running_mean, running_var, training: bool,
                           momentum: float, eps: float) -> None:
        """None: on the CPU BatchNorm's steps run as PyTorch's operations around sum_planes
        (_ops_norm.py), whose cost there is their arithmetic, not the calls (the CUDA engine fuses them)."""
        return None

    def batch_norm_backward(self, op: str, site: Site, gy, xhat, inv_std, weight, training: bool,
                            need_x: bool) -> None:
        """None, as batch_norm_forward."""
        return None

    # --- the copies and elementwise functions around the reductions (no order to emulate) -------

    def im2col(self, x: torch.Tensor, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair, first: int,
               channels: int, transposed: bool = False) -> np.ndarray:
        """The columns of channels [first, first + channels) of x (B, C, H, W) (models/conv2d.cpp's
        layout: rows (b, oy, ox), columns (c, i, j)), or their transpose, in scratch memory."""
        batch, _, h, w = x.shape
        ho = output_size(h, kernel[0], stride[0], padding[0], dilation[0])
        wo = output_size(w, kernel[1], stride[1], padding[1], dilation[1])
        rows, taps = batch * ho * wo, channels * kernel[0] * kernel[1]
        out = self.scratch(taps, rows) if transposed else self.scratch(rows, taps)
        return _core.im2col(as_array(x), kernel, stride, padding, dilation, first, channels, transposed, out=out)

    def dgrad_taps(self, g: torch.Tensor, input_hw: Pair, kernel: Pair, stride: Pair, padding: Pair,
                   dilation: Pair, first: int, channels: int) -> np.ndarray:
        """conv_dgrad "direct"'s terms from the output gradient g (B, C_out, Ho, Wo) of an H x W input:
        (B·H·W) x (channels·kh·kw), rows (b, y, x), columns (c, i, j) of channels [first, first +
        channels), +0 where a tap meets no output (_core.dgrad_taps), in scratch memory."""
        rows, taps = g.shape[0] * input_hw[0] * input_hw[1], channels * kernel[0] * kernel[1]
        return _core.dgrad_taps(as_array(g), tuple(input_hw), kernel, stride, padding, dilation, first, channels,
                                out=self.scratch(rows, taps))

    def col2im(self, dcols, shape: Sequence[int], kernel: Pair, stride: Pair, padding: Pair,
               dilation: Pair) -> torch.Tensor:
        """The input gradient (shape) from the columns' gradient: each element the float32 sum, from
        +0, of its terms in the order of the columns' rows (models/conv2d.cpp's col2im)."""
        return torch.from_numpy(_core.col2im(as_array(dcols), tuple(shape), kernel, stride, padding, dilation))

    def transposed(self, x: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        """x (B, M, N) transposed to (B, N, M), then given ``shape``: a tensor of its own memory
        (not a view made inside an autograd.Function)."""
        return torch.from_numpy(_core.transpose_batches(as_array(x)).reshape(shape))

    def channel_fma(self, x: torch.Tensor, scale: torch.Tensor, addend: torch.Tensor) -> torch.Tensor:
        """fma(x, scale per channel (dimension 1), addend per channel or per element), one rounding
        (_fma.channel_fma: the C library's fma)."""
        return channel_fma(x, scale, addend)

    def sqrt(self, x: torch.Tensor) -> torch.Tensor:
        """The correctly rounded float32 square root, elementwise (NumPy's: the CPU's instruction);
        PyTorch 2.11's CPU kernel is not correctly rounded."""
        return torch.from_numpy(np.sqrt(as_array(x)))

    def exp(self, x: torch.Tensor) -> torch.Tensor:
        """The C library's expf, elementwise (_math.py says when)."""
        return torch.from_numpy(_core.exp(as_array(x)))

    def log(self, x: torch.Tensor) -> torch.Tensor:
        """The C library's logf, elementwise."""
        return torch.from_numpy(_core.log(as_array(x)))
