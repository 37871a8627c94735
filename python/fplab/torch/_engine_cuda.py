"""The bridge from PyTorch's CUDA tensors to fplab's CUDA kernels (sim/cuda/, bound in
python/src/cuda.cpp): the same methods as the CPU Engine, on the tensors' device memory.

For every schedule the kernels realise, in their arithmetic (fp32, round to nearest even,
subnormals kept, fused products in a GEMM), they give the CPU engine's bits (docs/gpu.md). The
rest goes to the CPU engine on a copy (a round trip through the host, listed in coverage as
"cpu (from cuda: WHY)"), so that a profile's bits are the same whatever device the tensors are on:

- schedules outside the kernels' family and other arithmetic (bf16 or fp16 accumulators,
  stochastic rounding, exact sums and products).

Sums whose every step is a two-term fp32 addition but which neither the reduction kernel nor the
seeded-order one takes (numpy's pairwise softmax, tpu-v3's trees), and GEMMs of rounded products
(cpu-seq, tpu-v3) in such orders, run as addition programs, a thread an output
(sim/cuda/gpu_addition_program).

Tensor-core GEMMs of the H100's models (``fused(tc-h100-tf32)``, ``-tf32-rne``, ``-tf32-rna``,
``-bf16``, ``-fp16``: h100-tf32, h100-bf16, h100-torch-tf32) run on the GPU's own tensor cores
where it is a Hopper GPU (sim/cuda/gpu_tensor_core_gemm), each stage of 32 products checked
for the two rules where the chip and the model part and redone in software there, once the
device has reproduced the model bit for bit on a check before first use (docs/gpu.md). GEMMs whose
split-K parts meet in an atomic combine (the weight gradients of v100, t4, p100, rtx5000; p100's
input gradients) write their parts on the GPU and fold them in the order the impl seed draws for
each tile of outputs (sim/cuda/gpu_seeded), as the CPU engine does, after the same kind of check.

A convolution (one group, square geometry) and a BatchNorm whose sums the kernels run go to the
device whole, forward and backward each in one call (sim/cuda/gpu_batch_norm, gpu_transpose and the
GEMM and convolution kernels): an emulated step used to make some fifty PyTorch calls from Python
for each of them, and on a GPU those calls, not the kernels, set the step's pace.

Otherwise the copies around the reductions run on the device: im2col and col2im by fplab's kernels
(sim/cuda/gpu_conv, the CPU loop's order) for square kernels, equal strides and paddings and no
dilation or channel slice, else by PyTorch's own operations (F.unfold; col2im as strided
additions in the CPU loop's order), since a copy has no order and a float32 addition of two
numbers has one answer. The C library's exp and log (math="libm")
have no CUDA twin here: those tensors go through the host.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from .. import _core
from ._coverage import CoverageRecorder
from ._engine import Engine, output_size
from ._keys import Site
from ._table import Table
from ._winograd import POSITIONS as WINOGRAD_POSITIONS

Pair = Tuple[int, int]

_GEMM_KINDS = ("fwd", "dgrad", "wgrad")


def _stream_handle(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


#: The raw handle of PyTorch's current stream on a device (0: the default stream); PyTorch's own
#: accessor where it has one (no Stream object made), else through torch.cuda.current_stream.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _stream_handle)


def _address(tensor: Optional[torch.Tensor]) -> int:
    """A dense float32 device tensor's address for fplab's kernels; 0 for None (absent)."""
    return 0 if tensor is None else tensor.data_ptr()


def _segment_stride(n: int) -> int:
    """The floats from one channel's segment to the next in BatchNorm's scratch (n terms each):
    n rounded up to a multiple of 4, so that fplab's sums read them where they lie
    (sim/cuda/gpu_batch_norm.hpp, segment_stride)."""
    return (n + 3) // 4 * 4


def _square(kernel: Pair, stride: Pair, padding: Pair, dilation: Pair) -> bool:
    """True where fplab's convolution kernels take the geometry (sim::ConvGeometry)."""
    return kernel[0] == kernel[1] and stride[0] == stride[1] and padding[0] == padding[1] and dilation == (1, 1)


def _tap_index(h: int, w: int, ho: int, wo: int, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair,
               device: torch.device) -> torch.Tensor:
    """(H·W) x (kh·kw): for input pixel (y, x) and tap (i, j), 1 + the output position whose gradient
    meets it there, (y + p - i·d) / s, or 0 where none does (off the output, or between strides)."""
    ys = torch.arange(h).view(h, 1, 1, 1) + padding[0] - dilation[0] * torch.arange(kernel[0]).view(1, 1, -1, 1)
    xs = torch.arange(w).view(1, w, 1, 1) + padding[1] - dilation[1] * torch.arange(kernel[1]).view(1, 1, 1, -1)
    valid = (ys >= 0) & (xs >= 0) & (ys % stride[0] == 0) & (xs % stride[1] == 0) & \
        (ys // stride[0] < ho) & (xs // stride[1] < wo)
    flat = (ys // stride[0]) * wo + xs // stride[1] + 1
    return torch.where(valid, flat, torch.zeros((), dtype=flat.dtype)).reshape(h * w, -1).to(device)


class CudaEngine:
    """Runs one emulation's reductions on one CUDA device and records each in its coverage."""

    def __init__(self, table: Table, impl_seed: int, coverage: CoverageRecorder, device: torch.device) -> None:
        self.table = table
        self.impl_seed = impl_seed
        self.device = device
        self.index = device.index if device.index is not None else torch.cuda.current_device()
        self.coverage = coverage
        _core.cuda_device(self.index)  # fplab.Error at once when fplab's kernels cannot run here
        #: why a choice of an op kind cannot run on the kernels ("" where it can), by (kind, schedule)
        self._why_not: Dict[tuple, str] = {}
        self.host = Engine(table, impl_seed, coverage, where=lambda kind, choice: f"cpu (from cuda: {self.why_not(kind, choice) or self.why_not(kind, choice, gemm=True)})")
        self._scratch = torch.empty(0, dtype=torch.float32, device=device)
        #: _tap_index's maps on the device by geometry: every slab and group of a layer, every step
        self._tap_indices: Dict[tuple, torch.Tensor] = {}
        #: nchw_why_not's answer, once checked
        self._nchw_why: Optional[str] = None

    def why_not(self, op_kind: str, choice, gemm: Optional[bool] = None) -> str:
        """Why ``choice`` (of kind ``op_kind``) cannot run on fplab's kernels; "" where it can.
        ``gemm``: as a GEMM's reduction (default: for the GEMM kinds fwd, dgrad and wgrad; a batch
        norm's per-channel dots are GEMMs of the kinds bn_stats and bias_grad)."""
        gemm = op_kind in _GEMM_KINDS if gemm is None else gemm
        key = (op_kind, str(choice), gemm)
        if key not in self._why_not:
            self._why_not[key] = _core.cuda_why_not(gemm, choice.schedule, choice.arithmetic, self.index)
        return self._why_not[key]

    def dot_why_not(self, choice, n: int) -> str:
        """Why the reduction kernel cannot run per-channel fused dots of n terms in ``choice``'s
        schedule and arithmetic ("" where it can; by n: a tree stage runs as shuffles for some n only)."""
        key = ("dot", str(choice), n)
        if key not in self._why_not:
            self._why_not[key] = _core.cuda_dot_why_not(choice.schedule, choice.arithmetic, n)
        return self._why_not[key]

    # --- around every kernel call ---------------------------------------------------------------

    def _kernels(self, kernel, *args) -> None:
        """Runs ``kernel(*args)`` (fplab's kernels, enqueued on the legacy default stream): on
        PyTorch's default stream nothing more to do; on another, wait for it before and for the
        kernels after. Called once or more for every emulated operation, so the stream is asked for
        by its raw handle (PyTorch's default stream is handle 0), without the Stream objects."""
        other = _raw_stream(self.index) != 0
        if other:
            torch.cuda.current_stream(self.device).synchronize()
        kernel(*args)
        if other:
            _core.cuda_synchronize(self.index)

    def _dense(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.detach().contiguous()

    # --- the reductions ---------------------------------------------------------------------------

    def scratch(self, rows: int, cols: int) -> torch.Tensor:
        """A (rows, cols) float32 device tensor for a temporary that dies within one emulated
        operation, the same memory every time (grown when needed), as the CPU engine's."""
        size = rows * cols
        if self._scratch.numel() < size:
            self._scratch = torch.empty(0, dtype=torch.float32, device=self.device)  # the smaller one goes first
            self._scratch = torch.empty(size, dtype=torch.float32, device=self.device)
        return self._scratch[:size].view(rows, cols)

    def matmul(self, op: str, op_kind: str, a: torch.Tensor, b: torch.Tensor, site: Site, part: int = 0,
               out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """C = A B for 2-D float32 device tensors, every output's sum over K in the order of
        ``op_kind``'s schedule, into ``out`` when given."""
        choice = self.table.choice(op_kind, site.layer)
        if self.why_not(op_kind, choice, gemm=True):
            return self.host.matmul(op, op_kind, a.cpu(), b.cpu(), site, part).to(self.device)
        self.coverage.emulated(op, op_kind, choice, "cuda")
        a, b = self._dense(a), self._dense(b)
        (m, k), n = a.shape, b.shape[1]
        c = out if out is not None else torch.empty((m, n), dtype=torch.float32, device=self.device)
        if m * n == 0:
            return c
        self._kernels(_core.cuda_matmul, a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, choice.schedule,
                      self.index, self.impl_seed, site.op_id(op_kind, part), site.call,
                      choice.arithmetic.products == "rounded")
        return c

    def sum_rows(self, op: str, op_kind: str, terms: torch.Tensor, site: Site, part: int = 0) -> torch.Tensor:
        """The columns of ``terms`` (k, outputs) each summed over its k rows in the order of
        ``op_kind``'s schedule: a float32 tensor (outputs,)."""
        choice = self.table.choice(op_kind, site.layer)
        if self.why_not(op_kind, choice):
            return self.host.sum_rows(op, op_kind, terms.cpu(), site, part).to(self.device)
        self.coverage.emulated(op, op_kind, choice, "cuda")
        terms = self._dense(terms)
        rows, cols = terms.shape
        sums = torch.empty(cols, dtype=torch.float32, device=self.device)
        self._kernels(_core.cuda_sum_columns, terms.data_ptr(), rows, cols, sums.data_ptr(), choice.schedule,
                      self.index, self.impl_seed, site.op_id(op_kind, part), site.call)
        return sums

    def sum_planes(self, op: str, op_kind: str, x: torch.Tensor, site: Site, part: int = 0) -> torch.Tensor:
        """The sums per channel of x (B, C, ...) over batch and positions, term (b, p) at b·P + p, in
        the order of ``op_kind``'s schedule: a float32 tensor (C,)."""
        choice = self.table.choice(op_kind, site.layer)
        if self.why_not(op_kind, choice):
            return self.host.sum_planes(op, op_kind, x.cpu(), site, part).to(self.device)
        self.coverage.emulated(op, op_kind, choice, "cuda")
        batch, channels = x.shape[0], x.shape[1]
        segments = x.detach().reshape(batch, channels, -1).transpose(0, 1).contiguous()  # (C, B, P)
        sums = torch.empty(channels, dtype=torch.float32, device=self.device)
        self._kernels(_core.cuda_sum_segments, segments.data_ptr(), segments.numel() // channels, channels,
                      sums.data_ptr(), choice.schedule, self.index, self.impl_seed, site.op_id(op_kind, part),
                      site.call)
        return sums

    def dot_planes(self, op: str, op_kind: str, a: torch.Tensor, b: torch.Tensor, site: Site) -> torch.Tensor:
        """Engine.dot_planes's bits: on the device where the reduction kernel takes the schedule
        with the products fused into its strided chains (cuDNN's BatchNorm orders: strided(P):seq,
        then warp and block shuffles or trees of powers of two; _core.cuda_dot_planes), else on
        the host (a copy of each operand there, C values back)."""
        choice = self.table.choice(op_kind, site.layer)
        why = self.dot_why_not(choice, a.numel() // max(1, a.shape[1]))
        if why:
            return self.host.dot_planes(op, op_kind, a.cpu(), b.cpu(), site, where=f"cpu (from cuda: {why})"
                                        ).to(self.device)
        self.coverage.emulated(op, op_kind, choice, "cuda")
        a, b = self._dense(a), self._dense(b)
        batch, channels = a.shape[0], a.shape[1]
        dots = torch.empty(channels, dtype=torch.float32, device=self.device)
        positions = a.numel() // max(1, batch * channels)
        self._kernels(_core.cuda_dot_planes, a.data_ptr(), b.data_ptr(), (batch, channels, positions), dots.data_ptr(),
                      choice.schedule, self.index)
        return dots

    # --- convolutions, fused -------------------------------------------------------------------------

    def _on_kernels(self, op: str, kinds, site: Site, sums: int = 1) -> Optional[dict]:
        """The choices of ``kinds`` (by kind) where fplab's kernels run every one of them, each
        recorded ``sums`` times in coverage (the reductions of that kind the call makes); else
        None, and nothing recorded (the caller then composes the steps itself)."""
        choices = {kind: self.table.choice(kind, site.layer) for kind in kinds}
        if any(self.why_not(kind, choice) for kind, choice in choices.items()):
            return None
        if any(kind in _GEMM_KINDS and choice.arithmetic.products == "rounded" for kind, choice in choices.items()):
            return None  # rounded products: cuda_matmul's addition programs, one GEMM at a time
        for kind, choice in choices.items():
            for _ in range(sums):
                self.coverage.emulated(op, kind, choice, "cuda")
        return choices

    def conv2d_forward(self, op: str, site: Site, x: torch.Tensor, weight: torch.Tensor, bias, stride: Pair,
                       padding: Pair, dilation: Pair, groups: int) -> Optional[torch.Tensor]:
        """A convolution's output (B, C_out, Ho, Wo) in one call of fplab's kernels (im2col, the
        weight's transpose, the GEMM, the output's transpose with the bias: _ops_conv's composed
        steps, the same bits; one FMA chain an output reads x and stores y itself), or None where
        they do not take it (groups, a geometry other than square, a GEMM schedule they do not
        run): the caller composes it then."""
        kernel = tuple(weight.shape[2:])
        if groups != 1 or not _square(kernel, stride, padding, dilation):
            return None
        chosen = self._on_kernels(op, ("fwd",), site)
        if chosen is None:
            return None
        x, weight = self._dense(x), self._dense(weight)
        batch, _, h, w = x.shape
        cout = weight.shape[0]
        ho, wo = output_size(h, kernel[0], stride[0], padding[0], 1), output_size(w, kernel[1], stride[1], padding[1], 1)
        y = torch.empty((batch, cout, ho, wo), dtype=torch.float32, device=self.device)
        cols = self.scratch(batch * ho * wo, weight[0].numel())
        self._kernels(_core.cuda_conv2d_forward, x.data_ptr(), weight.data_ptr(),
                      0 if bias is None else self._dense(bias).data_ptr(), y.data_ptr(), cols.data_ptr(),
                      tuple(x.shape), cout, kernel[0], stride[0], padding[0], chosen["fwd"].schedule, self.index,
                      self.impl_seed, site.op_id("fwd", 0), site.call)
        return y

    def conv2d_backward(self, op: str, site: Site, x: torch.Tensor, weight: torch.Tensor, gy: torch.Tensor,
                        stride: Pair, padding: Pair, dilation: Pair, groups: int, need_x: bool, need_w: bool,
                        need_bias: bool) -> Optional[tuple]:
        """(dx, dw, dbias) of a convolution, each None when not wanted, in one call of fplab's
        kernels; None where they do not take it (as conv2d_forward)."""
        kernel = tuple(weight.shape[2:])
        if groups != 1 or not _square(kernel, stride, padding, dilation):
            return None
        wanted = [kind for kind, want in (("wgrad", need_w), ("bias_grad", need_bias), ("dgrad", need_x)) if want]
        chosen = self._on_kernels(op, wanted, site)
        if chosen is None:
            return None
        fallback = self.table.choice("fwd", site.layer).schedule  # for the kinds not wanted: not used
        x, weight, gy = self._dense(x), self._dense(weight), self._dense(gy)
        cout = weight.shape[0]
        dx = torch.empty_like(x) if need_x else None
        dw = torch.empty_like(weight) if need_w else None
        db = torch.empty(cout, dtype=torch.float32, device=self.device) if need_bias else None
        cols = self.scratch(gy.numel() // cout, weight[0].numel())
        self._kernels(_core.cuda_conv2d_backward, x.data_ptr(), weight.data_ptr(), gy.data_ptr(), cols.data_ptr(),
                      _address(dw), _address(db), _address(dx), tuple(x.shape), cout, kernel[0], stride[0],
                      padding[0], *(chosen[k].schedule if k in chosen else fallback
                                    for k in ("wgrad", "dgrad", "bias_grad")),
                      self.index, self.impl_seed, site.op_id("wgrad", 0), site.op_id("bias_grad", 0),
                      site.op_id("dgrad", 0), site.call)
        return dx, dw, db

    def winograd_weight_grad(self, op: str, site: Site, x: torch.Tensor, gy: torch.Tensor,
                             padding: int) -> Optional[torch.Tensor]:
        """conv_wgrad "winograd"'s weight gradient (K, C, 3, 3) in one call of fplab's kernels: the
        transforms a row of six positions at a time and the 36 wgrad GEMMs (_winograd.weight_grad's
        bits); None where the GEMM kernels do not take the schedule or its products are rounded
        (_on_kernels: the caller composes it then, the GEMMs one by one)."""
        chosen = self._on_kernels(op, ("wgrad",), site, sums=WINOGRAD_POSITIONS)
        if chosen is None:
            return None
        x, gy = self._dense(x), self._dense(gy)
        batch, channels, h, w = x.shape
        cout, ho, wo = gy.shape[1], gy.shape[2], gy.shape[3]
        terms = batch * ((ho + 3) // 4) * ((wo + 3) // 4)
        dw = torch.empty((cout, channels, 3, 3), dtype=torch.float32, device=self.device)
        # The 36 sums, then v and u (one row of six positions each) in the scratch memory, each at a
        # multiple of 4 floats (16-byte aligned: the GEMM kernels' float4 loads): no tensor of this
        # call's own raises the step's peak (a 512-channel layer's sums alone are 38 MB).
        def aligned(floats: int) -> int:
            return (floats + 3) // 4 * 4

        v_at = aligned(WINOGRAD_POSITIONS * cout * channels)
        u_at = v_at + aligned(6 * terms * channels)
        scratch = self.scratch(1, u_at + 6 * cout * terms).data_ptr()
        self._kernels(_core.cuda_winograd_wgrad, x.data_ptr(), gy.data_ptr(), scratch + 4 * v_at, scratch + 4 * u_at,
                      scratch, dw.data_ptr(),
                      (batch, channels, cout, h, w, padding), chosen["wgrad"].schedule, self.index, self.impl_seed,
                      [site.op_id("wgrad", p) for p in range(WINOGRAD_POSITIONS)], site.call)
        return dw

    def conv2d_direct_dgrad(self, op: str, site: Site, gy: torch.Tensor, weight: torch.Tensor, x_shape,
                            stride: Pair, padding: Pair, dilation: Pair, slab_images: int) -> Optional[torch.Tensor]:
        """conv_dgrad "direct"'s input gradient (one group) in one call of fplab's kernels: per slab of
        ``slab_images`` images the gathered taps, the dgrad GEMM and the copy into dx
        (_ops_conv._direct_input_grad's bits); None where they do not take it."""
        kernel = tuple(weight.shape[2:])
        if not _square(kernel, stride, padding, dilation):
            return None
        choice = self.table.choice("dgrad", site.layer)
        if self.why_not("dgrad", choice, gemm=True) or choice.arithmetic.products == "rounded":
            return None
        batch = x_shape[0]
        if slab_images * x_shape[2] * x_shape[3] * gy.shape[1] * kernel[0] * kernel[1] >= 2 ** 31 or \
                slab_images * gy[0].numel() >= 2 ** 31:
            return None  # the taps' gather indexes in 32 bits: the composed steps take it
        for _ in range(0, batch, slab_images):  # one GEMM a slab, as the composed steps record them
            self.coverage.emulated(op, "dgrad", choice, "cuda")
        gy, weight = self._dense(gy), self._dense(weight)
        dx = torch.empty(tuple(x_shape), dtype=torch.float32, device=self.device)
        self._kernels(_core.cuda_conv2d_direct_dgrad, gy.data_ptr(), weight.data_ptr(), dx.data_ptr(),
                      tuple(x_shape), weight.shape[0], kernel[0], stride[0], padding[0], choice.schedule,
                      slab_images, self.index, self.impl_seed, site.op_id("dgrad", 0), site.call)
        return dx

    # --- BatchNorm, fused -------------------------------------------------------------------------

    def batch_norm_forward(self, op: str, site: Site, x: torch.Tensor, weight, bias, running_mean, running_var,
                           training: bool, momentum: float, eps: float):
        """BatchNorm's forward in a few of fplab's kernels (sim/cuda/gpu_batch_norm, the bits of
        _ops_norm's composed steps): (y, xhat, inv_std), or None where the kernels cannot run the
        statistics' sums. The running statistics move in place (training)."""
        if not all(t is None or t.is_contiguous() for t in (running_mean, running_var)):
            return None  # they move in place: the composed steps' copy_ takes any layout
        # in evaluation no sums: the schedule goes along unused
        chosen = self._on_kernels(op, ("bn_stats",), site, sums=2) if training else {
            "bn_stats": self.table.choice("bn_stats", site.layer)}
        if chosen is None:
            return None
        choice = chosen["bn_stats"]
        x, weight, bias = (None if t is None else self._dense(t) for t in (x, weight, bias))
        batch, channels = x.shape[0], x.shape[1]
        positions = x.numel() // (batch * channels)
        xhat, y = torch.empty_like(x), torch.empty_like(x)
        stats = torch.empty((4, channels), dtype=torch.float32, device=self.device)
        segments = self.scratch(channels, _segment_stride(x.numel() // channels)).data_ptr() if training else 0
        self._kernels(_core.cuda_batch_norm_forward, x.data_ptr(), xhat.data_ptr(), y.data_ptr(), stats.data_ptr(),
                      segments, (batch, channels, positions), _address(weight), _address(bias),
                      _address(running_mean), _address(running_var), training, momentum, eps, choice.schedule,
                      self.index, self.impl_seed, (site.op_id("bn_stats", 0), site.op_id("bn_stats", 1)), site.call)
        return y, xhat, stats[3]

    def _dots_on_kernels(self, op: str, op_kind: str, site: Site, n: int):
        """The choice of ``op_kind`` where the kernels run both its sums and its fused dots for n terms
        (each recorded once in coverage, as the composed steps' sum_planes and dot_planes record
        them); else None, nothing recorded."""
        choice = self.table.choice(op_kind, site.layer)
        if self.dot_why_not(choice, n) or self.why_not(op_kind, choice):
            return None
        for _ in range(2):
            self.coverage.emulated(op, op_kind, choice, "cuda")
        return choice

    def nchw_why_not(self) -> str:
        """'' where the device twin of cuDNN's NCHW BatchNorm kernels' model (sim/cuda/gpu_batch_norm_cudnn)
        has given the host model's bits (_core.cudnn_nchw_*) on a check before its first use (once an
        engine: random channels at 28x28 and 32x32, forward and backward); else why not, and the
        layers go through the host."""
        if self._nchw_why is None:
            self._nchw_why = self._nchw_check()
        return self._nchw_why

    def _nchw_check(self) -> str:
        rng = np.random.default_rng(12)
        for batch, pixels in ((64, 784), (128, 1024)):
            x = (rng.standard_normal((batch, 3, pixels)) * 2 + 1).astype(np.float32)
            g = (rng.standard_normal((batch, 3, pixels)) / (batch * pixels)).astype(np.float32)
            gamma, beta = (1 + rng.standard_normal(3) / 4).astype(np.float32), rng.standard_normal(3).astype(np.float32)
            want_y, mean, inv_std, var = _core.cudnn_nchw_forward(x, gamma, beta, 1e-5)
            want_dx, want_dgamma, want_dbeta = _core.cudnn_nchw_backward(g, x, mean, inv_std, gamma)
            on = [torch.from_numpy(a).to(self.device) for a in (x, g, gamma, beta)]
            y, got_mean, got_inv, got_var = self._nchw_forward(on[0], on[2], on[3], 1e-5)
            dx, dgamma, dbeta = self._nchw_backward(on[1], on[0], got_mean, got_inv, on[2], True)
            got = [t.cpu().numpy() for t in (y, got_mean, got_inv, got_var, dx, dgamma, dbeta)]
            want = (want_y, mean, inv_std, var, want_dx, want_dgamma, want_dbeta)
            if not all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(got, want)):
                return (f"the device twin of cuDNN's NCHW BatchNorm model gave other bits than the host's on a check "
                        f"({batch} images of {pixels} values)")
        return ""

    def batch_norm_nchw_forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                                running_mean: Optional[torch.Tensor] = None,
                                running_var: Optional[torch.Tensor] = None, momentum: float = 0.1):
        """cuDNN's NCHW BatchNorm kernels' model on the device (the host's bits): (y, mean, inv_std,
        var), the running statistics (where given) moved by momentum in the same launch; or None
        where its check failed (nchw_why_not): nothing moved then. The caller has checked the shape."""
        if self.nchw_why_not():
            return None
        return self._nchw_forward(x, weight, bias, eps, running_mean, running_var, momentum)

    def batch_norm_nchw_backward(self, gy: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, inv_std: torch.Tensor,
                                 weight: torch.Tensor, need_x: bool):
        """Its backward: (dx or None, dgamma, dbeta), or None as batch_norm_nchw_forward."""
        return None if self.nchw_why_not() else self._nchw_backward(gy, x, mean, inv_std, weight, need_x)

    def _nchw_forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                      running_mean: Optional[torch.Tensor] = None, running_var: Optional[torch.Tensor] = None,
                      momentum: float = 0.1):
        x, weight, bias = self._dense(x), self._dense(weight), self._dense(bias)
        batch, channels = x.shape[0], x.shape[1]
        y = torch.empty_like(x)
        stats = torch.empty((3, channels), dtype=torch.float32, device=self.device)
        self._kernels(_core.cuda_batch_norm_nchw_forward, x.data_ptr(), weight.data_ptr(), bias.data_ptr(),
                      stats.data_ptr(), y.data_ptr(), (batch, channels, x.numel() // max(1, batch * channels)), eps,
                      self.index, _address(running_mean), _address(running_var), momentum)
        return y, stats[0], stats[1], stats[2]

    def _nchw_backward(self, gy: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, inv_std: torch.Tensor,
                       weight: torch.Tensor, need_x: bool):
        gy, x, mean, inv_std, weight = (self._dense(t) for t in (gy, x, mean, inv_std, weight))
        batch, channels = gy.shape[0], gy.shape[1]
        grads = torch.empty((4, channels), dtype=torch.float32, device=self.device)  # dgamma, dbeta, scratch
        dx = torch.empty_like(gy) if need_x else None
        self._kernels(_core.cuda_batch_norm_nchw_backward, gy.data_ptr(), x.data_ptr(), mean.data_ptr(),
                      inv_std.data_ptr(), weight.data_ptr(), grads.data_ptr(), _address(dx),
                      (batch, channels, gy.numel() // max(1, batch * channels)), self.index)
        return dx, grads[0], grads[1]

    def batch_norm_cudnn_forward(self, op: str, site: Site, x: torch.Tensor, weight, bias, running_mean, running_var,
                                 momentum: float, eps: float):
        """cuDNN's form of a batch norm in training (_ops_norm._forward_cudnn's bits) in a few of
        fplab's kernels (sim/cuda/gpu_batch_norm_cudnn, the GPU's rsqrt on the device): (y, x -
        mean, inv_std), or None where the kernels cannot run its sums and dots. The running
        statistics move in place."""
        if not all(t is None or t.is_contiguous() for t in (running_mean, running_var)):
            return None
        batch, channels = x.shape[0], x.shape[1]
        choice = self._dots_on_kernels(op, "bn_stats", site, x.numel() // max(1, channels))
        if choice is None:
            return None
        x, weight, bias = self._dense(x), self._dense(weight), self._dense(bias)
        y, centred = torch.empty_like(x), torch.empty_like(x)
        stats = torch.empty((6, channels), dtype=torch.float32, device=self.device)
        self._kernels(_core.cuda_batch_norm_cudnn_forward, x.data_ptr(), y.data_ptr(), centred.data_ptr(),
                      stats.data_ptr(), (batch, channels, x.numel() // max(1, batch * channels)), weight.data_ptr(),
                      bias.data_ptr(), _address(running_mean), _address(running_var), momentum, eps, choice.schedule,
                      self.index, self.impl_seed, site.op_id("bn_stats", 0), site.call)
        return y, centred, stats[3]

    def batch_norm_cudnn_backward(self, op: str, site: Site, gy: torch.Tensor, centred: torch.Tensor,
                                  inv_std: torch.Tensor, weight: torch.Tensor, need_x: bool):
        """Its backward (_ops_norm._backward_cudnn's bits): (dx or None, dgamma, dbeta), or None."""
        batch, channels = gy.shape[0], gy.shape[1]
        choice = self._dots_on_kernels(op, "bias_grad", site, gy.numel() // max(1, channels))
        if choice is None:
            return None
        gy, centred, inv_std, weight = (self._dense(t) for t in (gy, centred, inv_std, weight))
        grads = torch.empty((6, channels), dtype=torch.float32, device=self.device)
        dx = torch.empty_like(gy) if need_x else None
        self._kernels(_core.cuda_batch_norm_cudnn_backward, gy.data_ptr(), centred.data_ptr(), inv_std.data_ptr(),
                      weight.data_ptr(), grads.data_ptr(), _address(dx),
                      (batch, channels, gy.numel() // max(1, batch * channels)), choice.schedule, self.index,
                      self.impl_seed, site.op_id("bias_grad", 0), site.call)
        return dx, grads[2], grads[0]

    def batch_norm_backward(self, op: str, site: Site, gy: torch.Tensor, xhat: torch.Tensor, inv_std: torch.Tensor,
                            weight, training: bool, need_x: bool):
        """BatchNorm's backward in fplab's kernels: (dx or None, dgamma, dbeta), or None where the
        kernels cannot run the bias gradient's sums."""
        chosen = self._on_kernels(op, ("bias_grad",), site, sums=2)
        if chosen is None:
            return None
        choice = chosen["bias_grad"]
        # xhat and inv_std are the composed forward's where that ran (another layout: x's)
        gy, xhat, inv_std = self._dense(gy), self._dense(xhat), self._dense(inv_std)
        weight = None if weight is None else self._dense(weight)
        batch, channels = gy.shape[0], gy.shape[1]
        grads = torch.empty((2, channels), dtype=torch.float32, device=self.device)
        dx = torch.empty_like(gy) if need_x else None
        segments = self.scratch(2 * channels, _segment_stride(gy.numel() // channels))  # both sums' segments
        self._kernels(_core.cuda_batch_norm_backward, gy.data_ptr(), xhat.data_ptr(), inv_std.data_ptr(),
                      _address(weight), grads.data_ptr(), segments.data_ptr(), segments.numel(), _address(dx),
                      (batch, channels, gy.numel() // (batch * channels)), training, choice.schedule, self.index,
                      self.impl_seed, (site.op_id("bias_grad", 0), site.op_id("bias_grad", 1)), site.call)
        return dx, grads[1], grads[0]

    # --- the copies and elementwise functions around them ------------------------------------------

    def im2col(self, x: torch.Tensor, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair, first: int,
               channels: int, transposed: bool = False) -> torch.Tensor:
        """As Engine.im2col, on the device: the rows (b, oy, ox) and columns (c, i, j) of
        models/conv2d.cpp (or transposed), in scratch memory."""
        if _square(kernel, stride, padding, dilation) and first == 0 and channels == x.shape[1]:
            batch, _, h, w = x.shape
            rows = batch * output_size(h, kernel[0], stride[0], padding[0], 1) * output_size(
                w, kernel[1], stride[1], padding[1], 1)
            taps = channels * kernel[0] * kernel[1]
            cols = self.scratch(taps, rows) if transposed else self.scratch(rows, taps)
            x = self._dense(x)
            self._kernels(_core.cuda_im2col, x.data_ptr(), cols.data_ptr(), tuple(x.shape), kernel[0], stride[0],
                          padding[0], transposed, self.index)
            return cols
        unfolded = F.unfold(x.detach()[:, first:first + channels], kernel, dilation=dilation, padding=padding,
                            stride=stride)
        batch, taps, positions = unfolded.shape
        if transposed:
            cols = self.scratch(taps, batch * positions)
            cols.view(taps, batch, positions).copy_(unfolded.permute(1, 0, 2))
        else:
            cols = self.scratch(batch * positions, taps)
            cols.view(batch, positions, taps).copy_(unfolded.transpose(1, 2))
        return cols

    def dgrad_taps(self, g: torch.Tensor, input_hw: Pair, kernel: Pair, stride: Pair, padding: Pair,
                   dilation: Pair, first: int, channels: int) -> torch.Tensor:
        """As Engine.dgrad_taps, on the device, in scratch memory: one gather through an index map of
        every (pixel, tap) to the output position it meets (0: a zero put before each plane)."""
        batch, _, ho, wo = g.shape
        h, w = input_hw
        kk = kernel[0] * kernel[1]
        geometry = (h, w, ho, wo, tuple(kernel), tuple(stride), tuple(padding), tuple(dilation))
        index = self._tap_indices.get(geometry)
        if index is None:
            index = self._tap_indices[geometry] = _tap_index(*geometry, g.device)
        planes = torch.cat([g.new_zeros(batch, channels, 1),
                            g[:, first:first + channels].reshape(batch, channels, ho * wo)], dim=2)
        taps = self.scratch(batch * h * w, channels * kk)
        taps.view(batch, h * w, channels, kk).copy_(planes[:, :, index].permute(0, 2, 1, 3))
        return taps

    def col2im(self, dcols: torch.Tensor, shape: Sequence[int], kernel: Pair, stride: Pair, padding: Pair,
               dilation: Pair) -> torch.Tensor:
        """As Engine.col2im, on the device. An input element's terms come from the output positions
        (oy, ox) in increasing order, which for one element is the kernel offsets (i, j) in
        decreasing order: so the offsets are added one at a time, last first, each as one strided
        float32 addition over the whole (padded) input, from +0."""
        batch, channels, h, w = shape
        if _square(kernel, stride, padding, dilation):
            dx = torch.empty(tuple(shape), dtype=torch.float32, device=self.device)
            dcols = self._dense(dcols)
            self._kernels(_core.cuda_col2im, dcols.data_ptr(), dx.data_ptr(), tuple(shape), kernel[0], stride[0],
                          padding[0], self.index)
            return dx
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
        ho, wo = output_size(h, kh, sh, ph, dh), output_size(w, kw, sw, pw, dw)
        terms = dcols.reshape(batch, ho, wo, channels, kh, kw)
        dx = torch.zeros((batch, channels, h + 2 * ph, w + 2 * pw), dtype=torch.float32, device=self.device)
        for i in reversed(range(kh)):
            for j in reversed(range(kw)):
                at = dx[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
                at += terms[:, :, :, :, i, j].permute(0, 3, 1, 2)
        return dx[:, :, ph:ph + h, pw:pw + w].contiguous()

    def transposed(self, x: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        """x (B, M, N) transposed to (B, N, M), then given ``shape``: a tensor of its own memory."""
        return x.detach().transpose(1, 2).contiguous().reshape(shape)

    def channel_fma(self, x: torch.Tensor, scale: torch.Tensor, addend: torch.Tensor) -> torch.Tensor:
        """fma(x, scale per channel (dimension 1), addend per channel or per element), one rounding,
        in one kernel of fplab's (_core.cuda_channel_fma)."""
        x, scale, addend = self._dense(x), self._dense(scale), self._dense(addend)
        out = torch.empty_like(x)
        batch, channels = x.shape[0], x.shape[1]
        self._kernels(_core.cuda_channel_fma, x.data_ptr(), scale.data_ptr(), addend.data_ptr(), addend.dim() != 1,
                      (batch, channels, x.numel() // max(1, batch * channels)), out.data_ptr(), self.index)
        return out

    def sqrt(self, x: torch.Tensor) -> torch.Tensor:
        """The correctly rounded float32 square root, elementwise (CUDA's sqrtf: IEEE without fast math)."""
        return torch.sqrt(x)

    def exp(self, x: torch.Tensor) -> torch.Tensor:
        """The C library's expf, elementwise: on the host (no CUDA twin of it here)."""
        return self.host.exp(x.cpu()).to(self.device)

    def log(self, x: torch.Tensor) -> torch.Tensor:
        """The C library's logf, elementwise: on the host."""
        return self.host.log(x.cpu()).to(self.device)
