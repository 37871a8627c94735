#!/usr/bin/env python3
"""cuDNN's Winograd weight gradient, stage by stage: the workspace it leaves behind.

  experiments/winograd_workspace_torch.py --shapes 64x32x32@7 --trials 3 --impulses --out DIR
  experiments/winograd_workspace_torch.py --shapes 64x32x32@7 --tf32 --out DIR

cuDNN's `winograd_nonfused` weight gradient (what PyTorch runs for small_cnn's 32->32 layer at 7x7
and medium_cnn's 3x3 layers: docs/results/step_compare.md) is four kernels that pass their results
through the workspace the caller gives: the input's tiles transformed (`winogradWgradData4x4`), the
output gradient's (`winogradWgradDelta4x4`), a GEMM per transformed position, the sums transformed
back (`winogradWgradOutput4x4`). No order of additions reveals a weight element (it is no sum of
the products g*x); the stages' own results do, one at a time. This probe calls the kernel itself
through cuDNN's C API (ctypes, the library PyTorch loaded), algorithm WINOGRAD_NONFUSED, with a
workspace it fills with a sentinel first, and keeps what the kernels wrote:

- per shape (BATCHxINxOUT@SIZE: a 3x3 convolution, stride 1, padding 1), --trials draws of normal
  inputs and output gradients: x, dy, the kernel's dw, PyTorch's own dw in deterministic mode (the
  same bits say it is the same kernel), and the workspace up to its last written word;
- with --impulses, for the first shape: single ones in x (dy zero) and in dy (x zero) at a grid of
  positions, and for each the workspace's nonzero words (index, value): where the transforms of
  each tile land, and their coefficients;
- the kernels' names (torch.profiler) of one call.

With --tf32 the call allows tensor cores (cuDNN's default math, what PyTorch sets with
torch.backends.cudnn.allow_tf32, its default) and PyTorch's reference runs so too.

One .npz a shape (written under a temporary name, then renamed) and impulses.json in --out.
Read offline by experiments/winograd_fit.py.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import sys
import tempfile
from typing import Dict, List, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from winograd_error import _shape  # noqa: E402  (BATCHxINxOUT@SIZE)

SENTINEL = 0x7FBADBAD  # a NaN no kernel writes: the words still holding it were not written
WINOGRAD_NONFUSED = 5  # cudnnConvolutionBwdFilterAlgo_t
NCHW, FLOAT, CROSS_CORRELATION, DEFAULT_MATH, FMA_MATH = 0, 0, 1, 0, 3


def _cudnn_library():
    """The libcudnn.so.9 PyTorch loaded (the pip wheel's, or the system's)."""
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if os.path.basename(path).startswith("libcudnn.so"):
            return ctypes.CDLL(path)
    candidates = glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "cudnn", "lib",
                                        "libcudnn.so.*"))
    return ctypes.CDLL(candidates[0] if candidates else "libcudnn.so.9")


class WinogradWgrad:
    """cudnnConvolutionBackwardFilter with WINOGRAD_NONFUSED for one shape, on torch's stream."""

    def __init__(self, torch, shape: Tuple[int, int, int, int], tf32: bool = False):
        self.torch = torch
        self.lib = lib = _cudnn_library()
        lib.cudnnGetErrorString.restype = ctypes.c_char_p
        batch, cin, cout, size = shape
        self.shape = shape
        self.handle = ctypes.c_void_p()
        self._check(lib.cudnnCreate(ctypes.byref(self.handle)), "cudnnCreate")
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self._check(lib.cudnnSetStream(self.handle, stream), "cudnnSetStream")
        self.x_desc, self.dy_desc = self._tensor(batch, cin, size, size), self._tensor(batch, cout, size, size)
        self.w_desc = ctypes.c_void_p()
        self._check(lib.cudnnCreateFilterDescriptor(ctypes.byref(self.w_desc)), "cudnnCreateFilterDescriptor")
        self._check(lib.cudnnSetFilter4dDescriptor(self.w_desc, FLOAT, NCHW, cout, cin, 3, 3), "cudnnSetFilter4dDescriptor")
        self.conv = ctypes.c_void_p()
        self._check(lib.cudnnCreateConvolutionDescriptor(ctypes.byref(self.conv)), "cudnnCreateConvolutionDescriptor")
        self._check(lib.cudnnSetConvolution2dDescriptor(self.conv, 1, 1, 1, 1, 1, 1, CROSS_CORRELATION, FLOAT),
                    "cudnnSetConvolution2dDescriptor")
        # PyTorch's choice: FMA math with TF32 off, the default (tensor cores allowed) with it on
        self._check(lib.cudnnSetConvolutionMathType(self.conv, DEFAULT_MATH if tf32 else FMA_MATH),
                    "cudnnSetConvolutionMathType")
        size_bytes = ctypes.c_size_t()
        self._check(lib.cudnnGetConvolutionBackwardFilterWorkspaceSize(
            self.handle, self.x_desc, self.dy_desc, self.conv, self.w_desc, WINOGRAD_NONFUSED,
            ctypes.byref(size_bytes)), "cudnnGetConvolutionBackwardFilterWorkspaceSize")
        self.words = (size_bytes.value + 3) // 4
        self.workspace = torch.empty(self.words, dtype=torch.int32, device="cuda")

    def _check(self, status: int, what: str):
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.cudnnGetErrorString(status).decode()} (status {status})")

    def _tensor(self, n, c, h, w):
        desc = ctypes.c_void_p()
        self._check(self.lib.cudnnCreateTensorDescriptor(ctypes.byref(desc)), "cudnnCreateTensorDescriptor")
        self._check(self.lib.cudnnSetTensor4dDescriptor(desc, NCHW, FLOAT, n, c, h, w), "cudnnSetTensor4dDescriptor")
        return desc

    def __call__(self, x, dy):
        """(dw, the workspace's words as uint32) for contiguous float32 CUDA tensors x and dy."""
        torch = self.torch
        batch, cin, cout, size = self.shape
        dw = torch.full((cout, cin, 3, 3), float("nan"), device="cuda")
        self.workspace.fill_(SENTINEL)
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        self._check(self.lib.cudnnConvolutionBackwardFilter(
            self.handle, ctypes.byref(alpha), self.x_desc, ctypes.c_void_p(x.data_ptr()), self.dy_desc,
            ctypes.c_void_p(dy.data_ptr()), self.conv, WINOGRAD_NONFUSED, ctypes.c_void_p(self.workspace.data_ptr()),
            ctypes.c_size_t(self.words * 4), ctypes.byref(beta), self.w_desc, ctypes.c_void_p(dw.data_ptr())),
            "cudnnConvolutionBackwardFilter")
        torch.cuda.synchronize()
        return dw.cpu().numpy(), self.workspace.cpu().numpy().view(np.uint32)


def torch_weight_grad(torch, x, dy):
    """PyTorch's own dW in deterministic mode, TF32 off."""
    w = torch.zeros(dy.shape[1], x.shape[1], 3, 3, device="cuda")
    return torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                               [False, True, False])[1].cpu().numpy()


def kernel_names(torch, call) -> List[str]:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


def _written_extent(words: np.ndarray) -> int:
    written = np.nonzero(words != SENTINEL)[0]
    return int(written[-1]) + 1 if written.size else 0


def _save_npz(path: str, arrays: Dict[str, np.ndarray]):
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".npz.part")
    os.close(handle)
    with open(temporary, "wb") as f:
        np.savez_compressed(f, **arrays)
    os.replace(temporary, path)


def impulses(torch, wgrad: WinogradWgrad, limit: int) -> List[dict]:
    batch, cin, cout, size = wgrad.shape
    positions = sorted({(y, x) for y in (0, 1, 3, 4, size - 1) for x in (0, 2, 4, size - 1) if y < size and x < size})
    found = []
    for which, channels in (("x", cin), ("dy", cout)):
        for n in sorted({0, 1, batch - 1}):
            for c in sorted({0, 1, channels - 1}):
                for (y, x) in positions:
                    xt = torch.zeros(batch, cin, size, size, device="cuda")
                    dyt = torch.zeros(batch, cout, size, size, device="cuda")
                    (xt if which == "x" else dyt)[n, c, y, x] = 1.0
                    _, words = wgrad(xt, dyt)
                    values = words[:limit].view(np.float32)
                    nonzero = np.nonzero((words[:limit] != SENTINEL) & (values != 0))[0]
                    found.append({"tensor": which, "n": n, "c": c, "y": y, "x": x,
                                  "index": nonzero.tolist(), "value": values[nonzero].astype(float).tolist()})
    return found


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", type=lambda s: [_shape(t) for t in s.split(",")], default=[_shape("64x32x32@7")],
                        help="BATCHxINxOUT@SIZE,... (default 64x32x32@7)")
    parser.add_argument("--trials", type=int, default=2, help="random draws a shape (default 2)")
    parser.add_argument("--impulses", action="store_true", help="single ones in x and dy, for the first shape")
    parser.add_argument("--tf32", action="store_true",
                        help="TF32 allowed, as PyTorch's default switches allow it in cuDNN (default: off)")
    parser.add_argument("--out", required=True, help="folder for the .npz files and impulses.json")
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    import torch
    if not torch.cuda.is_available():
        print("winograd_workspace_torch: no CUDA device; this probe reads cuDNN's workspace on a GPU", file=sys.stderr)
        return 1
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    print(f"device {torch.cuda.get_device_name()}, PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    for index, shape in enumerate(args.shapes):
        name = "{}x{}x{}@{}".format(*shape)
        wgrad = WinogradWgrad(torch, shape, args.tf32)
        batch, cin, cout, size = shape
        gen = torch.Generator().manual_seed(7000 + index)
        arrays: Dict[str, np.ndarray] = {"shape": np.array(shape), "workspace_words": np.array(wgrad.words)}
        extent = 0
        for trial in range(args.trials):
            x = torch.randn(batch, cin, size, size, generator=gen).cuda()
            dy = torch.randn(batch, cout, size, size, generator=gen).cuda()
            dw, words = wgrad(x, dy)
            reference = torch_weight_grad(torch, x, dy)
            same = int(np.sum(dw.view(np.uint32) == reference.view(np.uint32)))
            extent = max(extent, _written_extent(words))
            print(f"{name} trial {trial}: workspace {wgrad.words} words, written up to {_written_extent(words)} "
                  f"({int(np.sum(words != SENTINEL))} words); dw == PyTorch's deterministic dw: {same} of {dw.size}")
            arrays.update({f"x{trial}": x.cpu().numpy(), f"dy{trial}": dy.cpu().numpy(), f"dw{trial}": dw,
                           f"torch_dw{trial}": reference, f"ws{trial}": words[:max(extent, 1)].copy()})
        names = kernel_names(torch, lambda: wgrad(x, dy))
        print(f"{name} kernels: " + "; ".join(n[:120] for n in names))
        arrays["kernels"] = np.array(names)
        _save_npz(os.path.join(args.out, f"wgrad_{name.replace('@', '_at_')}.npz"), arrays)
        if args.impulses and index == 0:
            found = impulses(torch, wgrad, max(extent, 1))
            path = os.path.join(args.out, "impulses.json")
            with open(path + ".part", "w") as f:
                json.dump({"shape": list(shape), "impulses": found}, f)
            os.replace(path + ".part", path)
            print(f"{name}: {len(found)} impulses, {sum(len(f['index']) for f in found)} nonzero words")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
