"""fplab.torch on CUDA tensors (fplab's CUDA kernels, python/src/cuda.cpp) against the same
emulation on CPU tensors (the CPU engine, itself checked against `fplab train` in
test_torch_crosscheck.py): the same profile and impl seed must give the same bits on either device.

- the copies around the kernels: im2col and col2im on the device (fplab's kernels, and PyTorch's
  operations where those do not apply) against the CPU engine's, on every combination of kernel
  1-3, stride 1-3, padding 0-2 and dilation 1-2 that fits;
- every emulated layer, forward and backward, under profiles whose reductions run on the kernels
  (h100:deterministic; h100 and det-atomics, their atomic sums on the seeded-order kernel; cpu-seq,
  tpu-v3 and numpy, their rounded products and trees as addition programs; exact, its exact sums);
  h100-tf32's and h100-bf16's GEMMs on the GPU's own tensor cores, a100-tf32's and rtx5000-tc's
  fused steps in software on CUDA cores; and on a stream other than the default one; no reduction of the step runs natively (PyTorch's CPU and CUDA sums need not agree);
- fplab's own models trained a few steps on each device (weights, BatchNorm buffers, predictions);
- coverage says where each reduction ran;
- fplab.torch.experiment's replicas on CUDA are the CPU's.

Skips, saying why, without PyTorch, without a CUDA device, or where fplab was built without CUDA.
"""

import copy
import hashlib
import itertools
import os
import tempfile
import unittest
from unittest import mock

import numpy as np

from fplab_command import DATA
from torch_reference import torch

if torch is not None:
    import torch.nn as nn
    import torch.nn.functional as F

    import fplab
    import fplab.torch
    import fplab.torch.models as fm
    from fplab.torch._coverage import CoverageRecorder
    from fplab.torch._engine import Engine
    from fplab.torch._engine_cuda import CudaEngine
    from fplab.torch._native import CUDA_KERNELS
    from fplab.torch._table import load_table


def _why_skip():
    if torch is None:
        return "torch is not installed for this python3"
    if not CUDA_KERNELS:
        return "this fplab was built without its CUDA kernels"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    return None


WHY = _why_skip()


def bits(t):
    """A tensor's float32 bit patterns on the host (so that -0 and +0, and NaNs, are told apart)."""
    return t.detach().cpu().contiguous().view(torch.int32)


class Net(nn.Module if torch is not None else object):
    """Every layer fplab.torch emulates, in shapes that exercise stride, padding, dilation and groups."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2)
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x):
        x = F.relu(self.bn(self.conv1(x)))
        x = F.relu(self.conv2(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        h = torch.relu(self.fc1(x))
        # the batch mean broadcast to every row by a GEMM (emulated, its gradient too): a broadcasting
        # product's gradient would be a sum PyTorch runs natively, whose CPU and CUDA kernels may add
        # in different orders, which no emulation can make equal
        rows = h.new_ones(h.shape[0], 1) @ h.mean(dim=0, keepdim=True)
        h = h + torch.softmax(h, dim=1) * rows
        return self.fc2(h)


def run_step(net, x, y, profile, device, stream=None):
    """Forward and backward of net on (x, y) under profile on device: (logits, loss, gradients). The
    NLL term ignores class 3 (its count divides the mean on the device: no wait for the targets)."""
    net = net.to(device)
    net.zero_grad(set_to_none=True)
    x, y = x.to(device), y.to(device)
    with fplab.torch.emulate(profile, impl_seed=3, math="libm"):
        if stream is not None:
            with torch.cuda.stream(stream):
                logits = net(x)
                loss = F.cross_entropy(logits, y) + F.nll_loss(F.log_softmax(logits, dim=1), y, ignore_index=3) * 0.5
                loss.backward()
            torch.cuda.synchronize()
        else:
            logits = net(x)
            loss = F.cross_entropy(logits, y) + F.nll_loss(F.log_softmax(logits, dim=1), y, ignore_index=3) * 0.5
            loss.backward()
    return logits, loss, {name: p.grad for name, p in net.named_parameters()}


@unittest.skipIf(WHY is not None, WHY or "")
class CudaCopies(unittest.TestCase):
    """im2col and col2im on the device are the CPU engine's, bit for bit."""

    def test_im2col_and_col2im(self):
        table = load_table("cpu-seq")
        cpu = Engine(table, 0, CoverageRecorder())
        cuda = CudaEngine(table, 0, CoverageRecorder(), torch.device("cuda"))
        gen = torch.Generator().manual_seed(5)
        cases = 0
        for k, s, p, d in itertools.product((1, 2, 3), (1, 2, 3), (0, 1, 2), (1, 2)):
            x = torch.randn(2, 3, 7, 6, generator=gen)
            reach = d * (k - 1) + 1
            if 7 + 2 * p < reach or 6 + 2 * p < reach:
                continue
            args = ((k, k), (s, s), (p, p), (d, d))
            # channels 1-2 of 3: PyTorch's F.unfold; all 3 (dilation 1): fplab's kernel
            for (first, channels), transposed in itertools.product(((1, 2), (0, 3)), (False, True)):
                want = torch.from_numpy(np.array(cpu.im2col(x, *args, first, channels, transposed)))
                got = cuda.im2col(x.cuda(), *args, first, channels, transposed)
                self.assertTrue(torch.equal(bits(got), bits(want)),
                                f"im2col k{k} s{s} p{p} d{d} channels {first}+{channels} t{transposed}")
            want = torch.from_numpy(np.array(cpu.im2col(x, *args, 1, 2, True)))
            rows = want.shape[1]  # the transposed columns: (taps, rows)
            dcols = torch.randn(rows, 2 * k * k, generator=gen)
            dcols[0, 0] = -0.0  # a lone -0 term must come out +0 (sums start from +0)
            shape = (2, 2, 7, 6)
            want = cpu.col2im(dcols, shape, *args)
            got = cuda.col2im(dcols.cuda(), shape, *args)
            self.assertTrue(torch.equal(bits(got), bits(want)), f"col2im k{k} s{s} p{p} d{d}")
            cases += 1
        self.assertGreater(cases, 50)


@unittest.skipIf(WHY is not None, WHY or "")
class CudaLayers(unittest.TestCase):
    """Forward and backward of every emulated layer: CUDA tensors == CPU tensors, bit for bit."""

    def check(self, profile, stream=None):
        torch.manual_seed(11)
        net = Net()
        x = torch.randn(6, 3, 9, 9)
        y = torch.randint(0, 5, (6,))
        state = {k: v.clone() for k, v in net.state_dict().items()}
        want = run_step(net, x, y, profile, "cpu")
        net.load_state_dict(state)
        got = run_step(net, x, y, profile, "cuda", stream)
        self.assertTrue(torch.equal(bits(got[0]), bits(want[0])), f"{profile}: logits differ")
        self.assertTrue(torch.equal(bits(got[1]), bits(want[1])), f"{profile}: loss differs")
        for name in want[2]:
            self.assertTrue(torch.equal(bits(got[2][name]), bits(want[2][name])), f"{profile}: gradient of {name}")
        coverage = fplab.torch.coverage()
        # nothing reduced natively (PyTorch's CPU and CUDA sums need not agree): aten ops are seen
        # only inside autograd's gradients of native operations
        self.assertFalse({op for op in coverage.ops(emulated=False) if op.startswith("aten.")}, profile)
        return coverage

    def test_kernels(self):
        for profile in ("cpu-seq", "h100:deterministic", "v100", "p100", "t4", "h100", "det-atomics", "h100-tf32",
                        "h100-bf16", "tpu-v3", "numpy"):
            with self.subTest(profile=profile):
                coverage = self.check(profile)
                table = load_table(profile)
                for e in coverage.emulated:  # on the kernels exactly where they give the CPU's bits
                    choice = table.choices[e.op_kind]
                    gemm = e.op_kind in ("fwd", "dgrad", "wgrad")
                    on_kernels = not fplab._core.cuda_why_not(gemm, choice.schedule, choice.arithmetic)
                    self.assertEqual(e.where == "cuda", on_kernels, f"{profile}: {e}")
                # h100: its atomic sums seeded; cpu-seq's and tpu-v3's rounded products, tpu-v3's
                # trees and numpy's pairwise sums as addition programs
                if profile in ("h100:deterministic", "h100", "det-atomics", "cpu-seq", "tpu-v3", "numpy"):
                    self.assertEqual({e.where for e in coverage.emulated}, {"cuda"}, profile)

    def test_atomic_split_k_on_the_device(self):
        """GEMMs whose split-K parts meet in an atomic combine (v100's and t4's weight gradients,
        p100's input gradients too) run on the device, their parts folded in the impl seed's order
        (check() compares the bits with the CPU's)."""
        for profile, kinds in (("v100", {"wgrad"}), ("p100", {"wgrad", "dgrad"})):
            coverage = self.check(profile)
            where = {e.where for e in coverage.emulated if e.op_kind in kinds}
            self.assertEqual(where, {"cuda"}, profile)

    def test_tiles_that_restart_at_every_image_on_the_device(self):
        """h100-torch's weight gradient of a 3x3 convolution at 28x28 pixels, cuDNN's tiles of 512
        pixels that restart at every image (each(784)[contig(512):seq] | all:atomic): on the
        device, the CPU's bits for each impl seed, other bits for another seed."""
        torch.manual_seed(8)
        net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                            nn.Linear(4, 5))
        x, y = torch.randn(5, 1, 28, 28), torch.randint(0, 5, (5,))
        grads = {}
        for device, seed in itertools.product(("cpu", "cuda"), (3, 4)):
            model = copy.deepcopy(net).to(device)
            with fplab.torch.emulate("h100-torch", impl_seed=seed, math="libm"):
                F.cross_entropy(model(x.to(device)), y.to(device)).backward()
            grads[device, seed] = bits(model[0].weight.grad.cpu())
            if device == "cuda":
                where = {e.where for e in fplab.torch.coverage().emulated if e.op_kind == "wgrad"}
                self.assertEqual(where, {"cuda"})
        for seed in (3, 4):
            self.assertTrue(torch.equal(grads["cuda", seed], grads["cpu", seed]), seed)
        self.assertFalse(torch.equal(grads["cuda", 3], grads["cuda", 4]))

    def _direct_gradients_agree(self, net, x, y, layers, profile="h100-torch"):
        """Under h100-torch (conv_dgrad "direct"), or another profile, on the CPU and on the device:
        the output, the input's gradient and the weight gradients of net[i] for i in layers, bit for
        bit, every dgrad on the device."""
        got = {}
        for device in ("cpu", "cuda"):
            model = copy.deepcopy(net).to(device)
            inputs = x.clone().to(device).requires_grad_()
            with fplab.torch.emulate(profile, impl_seed=3, math="libm"):
                out = model(inputs)
                F.cross_entropy(out, y.to(device)).backward()
                if device == "cuda":
                    where = {e.where for e in fplab.torch.coverage().emulated if e.op_kind == "dgrad"}
                    self.assertEqual(where, {"cuda"})
            got[device] = [bits(t.detach().cpu()) for t in [out, inputs.grad] + [model[i].weight.grad for i in layers]]
        for want, have in zip(got["cpu"], got["cuda"]):
            self.assertTrue(torch.equal(want, have))

    def test_direct_input_gradients_on_the_device(self):
        """h100-torch's conv_dgrad = "direct" (the taps by output channel, kernel row and column in
        one chain) in one call of fplab's kernels: the CPU's bits for the input and both layers'
        gradients, padded and strided, with slabs of one image and of all."""
        from fplab.torch import _ops_conv
        torch.manual_seed(10)
        net = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 5, 3, stride=2, padding=1),
                            nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(5, 4))
        x, y = torch.randn(4, 3, 11, 11), torch.randint(0, 4, (4,))
        for slab_floats in (_ops_conv.SLAB_FLOATS, 700):  # 700: a slab an image
            with self.subTest(slab_floats=slab_floats), mock.patch.object(_ops_conv, "SLAB_FLOATS", slab_floats):
                self._direct_gradients_agree(net, x, y, (0, 2))

    def test_direct_input_gradients_without_taps_in_memory(self):
        """Layers wide enough for the chains that read the taps from the output gradient as they go
        (GpuConv::direct_dgrad_on_device: 16384 rows of 64 and 128 input channels, stride 1 and 2;
        the 1x1 layer's 4096 rows take the gathered taps): the CPU's bits."""
        torch.manual_seed(11)
        net = nn.Sequential(nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.Conv2d(128, 64, 3, stride=2, padding=1),
                            nn.ReLU(), nn.Conv2d(64, 64, 1, stride=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                            nn.Linear(64, 4))
        self._direct_gradients_agree(net, torch.randn(16, 64, 32, 32), torch.randint(0, 4, (16,)), (0, 2, 4))

    def test_convolutions_without_columns_in_memory(self):
        """h100's forward (one chain over the taps) and col2im-form input gradient (a chain over the
        output channels per kernel offset, the offsets summed in col2im's order) on layers wide
        enough for the chains that read x's columns and gy's terms as they go
        (GpuConv::forward_on_device, col2im_dgrad_on_device; the narrower layers make the columns):
        the CPU's bits."""
        torch.manual_seed(12)
        net = nn.Sequential(nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.Conv2d(128, 64, 3, stride=2, padding=1),
                            nn.ReLU(), nn.Conv2d(64, 64, 1, stride=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                            nn.Linear(64, 4))
        x, y = torch.randn(16, 64, 32, 32), torch.randint(0, 4, (16,))
        self._direct_gradients_agree(net, x, y, (0, 2, 4), "h100")

    def test_winograd_weight_gradient_on_the_device(self):
        """h100-torch's 32->32 weight gradient at 7x7 by cuDNN's Winograd transforms (conv_wgrad =
        "winograd"): the transforms and the 36 sums on fplab's kernels (one call), the CPU's bits
        (which test_torch_conv holds to the chip's own, tests/data/cudnn_winograd_h200.bin)."""
        torch.manual_seed(9)
        net = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                            nn.Linear(32, 5))
        x, y = torch.randn(6, 32, 7, 7), torch.randint(0, 5, (6,))
        shipped = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "profiles", "shipped")
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        grads = {}
        for device, profile in (("cpu", "h100-torch"), ("cuda", "h100-torch"), ("cpu", "h100-torch:gemm")):
            model = copy.deepcopy(net).to(device)
            path = profile
            if profile.endswith(":gemm"):  # the same profile without its Winograd rules: the GEMM form
                with open(os.path.join(shipped, "h100-torch.toml")) as f:
                    text = f.read().replace('name = "h100-torch"', 'name = "h100-torch-gemm"')
                path = os.path.join(folder.name, "h100-torch-gemm.toml")
                with open(path, "w") as f:
                    f.write(text.replace('conv_wgrad = "winograd"\n', ""))
            with fplab.torch.emulate(path, impl_seed=3, math="libm"):
                F.cross_entropy(model(x.to(device)), y.to(device)).backward()
            grads[device, profile] = bits(model[0].weight.grad.cpu())
        self.assertTrue(torch.equal(grads["cuda", "h100-torch"], grads["cpu", "h100-torch"]))
        self.assertFalse(torch.equal(grads["cpu", "h100-torch"], grads["cpu", "h100-torch:gemm"]))

    def test_winograd_shapes_on_the_device(self):
        """conv_wgrad = "winograd" for every 3x3 stride-1 layer of h100 (a fixed-order split-K
        wgrad), of h100 with one FMA chain a weight (cuDNN's order: a row's six GEMMs in one launch
        where C and the terms are multiples of 4) and of v100 (atomic parts, seeded per position):
        fplab's Winograd kernels on the device (sim/cuda/gpu_winograd.cu and the 36 GEMMs in one
        call) give the CPU's bits, for tiles past both edges, no padding, a padding of 2, one
        input channel, more terms than one block of threads and GEMMs of several thin tiles."""
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        shipped = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "profiles", "shipped")
        rule = '\n[[default.layers]]\nmatch = { layer = "conv", kernel = 3, stride = 1 }\nconv_wgrad = "winograd"\n'
        variants = {"h100": ("h100", {}), "h100-chain": ("h100", {'wgrad = "split(16):seq | all:seq"': 'wgrad = "all:seq"'}),
                    "v100": ("v100", {})}
        for name, (base, replaced) in variants.items():
            with open(os.path.join(shipped, base + ".toml")) as f:
                text = f.read().replace(f'name = "{base}"', f'name = "{name}-winograd"')
            for old, new in replaced.items():
                self.assertIn(old, text)
                text = text.replace(old, new)
            with open(os.path.join(folder.name, name + "-winograd.toml"), "w") as f:
                f.write(text.replace("\n[deterministic]", rule + "\n[deterministic]"))
        # the batched launch for h100-chain where C and the terms are multiples of 4: (3, 4, 5, ...), (40, 8, 8,
        # ...) and (4, 36, 40, ...), whose GEMMs are 3 x 2 thin tiles each
        for batch, channels, out, h, w, padding in ((3, 4, 5, 7, 7, 1), (2, 2, 3, 9, 6, 1), (1, 3, 2, 10, 10, 0),
                                                    (5, 1, 16, 28, 28, 1), (40, 8, 8, 20, 20, 1),
                                                    (4, 36, 40, 12, 12, 1), (2, 4, 4, 6, 7, 2)):
            torch.manual_seed(batch + channels + h)
            conv = nn.Conv2d(channels, out, 3, padding=padding)
            x = torch.randn(batch, channels, h, w) * torch.exp(torch.randn(batch, channels, h, w))
            g = torch.randn(batch, out, h + 2 * padding - 2, w + 2 * padding - 2)
            for name in variants:
                with self.subTest(shape=(batch, channels, out, h, w, padding), profile=name):
                    grads = {}
                    for device in ("cpu", "cuda"):
                        layer = copy.deepcopy(conv).to(device)
                        path = os.path.join(folder.name, name + "-winograd.toml")
                        with fplab.torch.emulate(path, impl_seed=5):
                            layer(x.to(device)).backward(g.to(device))
                        wgrads = [e for e in fplab.torch.coverage().emulated if e.op_kind == "wgrad"]
                        grads[device] = bits(layer.weight.grad.cpu())
                        self.assertEqual(sum(e.count for e in wgrads), 36, device)  # the 36 position GEMMs
                        self.assertEqual({e.where for e in wgrads}, {device}, device)
                    self.assertTrue(torch.equal(grads["cuda"], grads["cpu"]))

    def test_kernel_position_orders_on_the_device(self):
        """cuDNN's orders of a 3x3 convolution's terms by kernel position (h100-torch-tf32's TF32
        kernels: channel blocks each by kernel position, each(9B)[cols(9)] before the tensor-core
        chain; h100-torch's input gradient at 8x8: one chain per kernel position added by atomics,
        strided(9):seq | all:atomic) on the device: the operands gathered in that order there (an
        ordered im2col for the forward), the CPU's bits for each impl seed."""
        hopper = torch.cuda.get_device_capability()[0] == 9
        tensor_cores = "all:fused(8,25,tf32rne)" if hopper else "all:fused(8,24,tf32)"  # a100-tf32's elsewhere
        tables = {
            "tensor cores": {"fwd": f"each(36)[cols(9)] | {tensor_cores}",
                             "dgrad": f"each(18)[perm(8,7,6,5,4,3,2,1,0) | cols(9)] | {tensor_cores}"},
            "chains": {"fwd": "each(36)[cols(9)] | contig(8):seq | all:seq",
                       "dgrad": "strided(9):seq | all:atomic"},
        }
        torch.manual_seed(5)
        net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 12, 3, padding=1), nn.ReLU(),
                            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(12, 5))
        x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
        with tempfile.TemporaryDirectory() as folder:
            for name, table in tables.items():
                path = os.path.join(folder, name.replace(" ", "_") + ".toml")
                with open(path, "w") as f:
                    f.write(f'name = "orders"\ndescription = "{name}"\n[default]\nformat = "fp32"\nmode = "rne"\n'
                            'products = "fused"\nwgrad = "all:seq"\nbias_grad = "all:seq"\nbn_stats = "all:seq"\n'
                            'softmax = "all:seq"\nloss = "all:seq"\nconv_dgrad = "direct"\n'
                            f'fwd = "{table["fwd"]}"\ndgrad = "{table["dgrad"]}"\n'
                            '[deterministic]\nformat = "fp32"\nmode = "rne"\nproducts = "fused"\n' +
                            "".join(f'{kind} = "all:seq"\n'
                                    for kind in ("fwd", "dgrad", "wgrad", "bias_grad", "bn_stats", "softmax", "loss")))
                results = {}
                for device, seed in itertools.product(("cpu", "cuda"), (3, 4)):
                    model = copy.deepcopy(net).to(device)
                    with fplab.torch.emulate(path, impl_seed=seed, math="libm"):
                        out = model(x.to(device))
                        F.cross_entropy(out, y.to(device)).backward()
                    results[device, seed] = [bits(out)] + [bits(p.grad) for p in model.parameters()]
                    if device == "cuda":
                        where = {e.where for e in fplab.torch.coverage().emulated if e.op_kind in ("fwd", "dgrad")}
                        self.assertEqual(where, {"cuda"}, name)
                for seed in (3, 4):
                    for i, (got, want) in enumerate(zip(results["cuda", seed], results["cpu", seed])):
                        self.assertTrue(torch.equal(got, want), f"{name}, seed {seed}: tensor {i} differs")
                if name == "chains":  # the second layer's input gradient: its atomics in each seed's order
                    self.assertFalse(torch.equal(results["cuda", 3][1], results["cuda", 4][1]))

    def test_impl_seed_orders_the_split_k_parts(self):
        """Under v100 another impl seed gives other weight gradients on CUDA, and each seed's are
        the CPU's."""
        torch.manual_seed(4)
        net = nn.Linear(40, 7)
        x = torch.randn(3000, 40)
        grads = {}
        for device in ("cpu", "cuda"):
            for seed in (1, 2):
                copy = nn.Linear(40, 7).to(device)
                copy.load_state_dict(net.state_dict())
                with fplab.torch.emulate("v100", impl_seed=seed):
                    copy(x.to(device)).square().sum().backward()
                grads[device, seed] = bits(copy.weight.grad.cpu())
        self.assertFalse(torch.equal(grads["cuda", 1], grads["cuda", 2]))
        for seed in (1, 2):
            self.assertTrue(torch.equal(grads["cuda", seed], grads["cpu", seed]), seed)

    def test_exact_on_the_device(self):
        """exact: every product and sum exact, rounded once (a long fixed-point accumulator a
        thread), on the device, the CPU's bits."""
        coverage = self.check("exact")
        self.assertEqual({e.where for e in coverage.emulated}, {"cuda"})

    def test_fused_steps_on_cuda_cores(self):
        """Tensor-core models no H100 instruction computes (an A100's tf32 steps of 4 products and
        24 bits, a Turing card fed unconverted fp32 factors): their fused steps in software on CUDA
        cores, on any GPU, the CPU's bits. (Every such model against sim::gemm:
        tests/test_gpu_tensor_core_gemm.cpp.)"""
        # rtx5000-tc: fp32 factors as they are; its weight gradients add split-K parts by atomics,
        # folded in the impl seed's order on the device
        for profile, kinds in (("a100-tf32", ("fwd", "dgrad", "wgrad")), ("rtx5000-tc", ("fwd", "dgrad", "wgrad"))):
            with self.subTest(profile=profile):
                coverage = self.check(profile)
                gemms = {e.where for e in coverage.emulated if e.op_kind in kinds}
                self.assertEqual(gemms, {"cuda"})

    def test_tensor_cores(self):
        """h100-tf32's and h100-bf16's GEMMs on the GPU's tensor cores where it is a Hopper GPU."""
        hopper = torch.cuda.get_device_capability()[0] == 9
        for profile in ("h100-tf32", "h100-bf16"):
            coverage = self.check(profile)
            gemms = {e.where for e in coverage.emulated if e.op_kind in ("fwd", "dgrad", "wgrad")}
            if hopper:
                self.assertEqual(gemms, {"cuda"}, profile)
            else:
                self.assertTrue(all("Hopper" in w for w in gemms), gemms)

    def test_other_stream(self):
        self.check("h100:deterministic", stream=torch.cuda.Stream())

    def test_impl_seed_still_counts(self):
        """Another impl seed under h100 gives other bias gradients on CUDA too (the keys reach the host)."""
        torch.manual_seed(3)
        net = nn.Linear(40, 7).cuda()
        x = torch.randn(300, 40, device="cuda")
        grads = []
        for seed in (1, 2):
            net.zero_grad(set_to_none=True)
            with fplab.torch.emulate("h100", impl_seed=seed):
                net(x).square().sum().backward()
            grads.append(bits(net.bias.grad))
        self.assertFalse(torch.equal(grads[0], grads[1]))


def _strided_running_stats(bn):
    """bn marked to get running statistics that are every other element of a longer buffer (not
    contiguous) once on its device (run_bn: moving a module makes its buffers contiguous)."""
    bn.strided_stats = True
    return bn


@unittest.skipIf(WHY is not None, WHY or "")
class CudaBatchNorm(unittest.TestCase):
    """BatchNorm on CUDA tensors (fplab's fused kernels where the profile's sums run on the device,
    PyTorch's operations around host sums elsewhere) == on CPU tensors: outputs, every gradient and
    the running statistics, in training and evaluation, with and without affine parameters and
    running statistics, 2-D and 4-D inputs, inputs that are not contiguous, momentum and eps other
    than the defaults, and data whose mean is far from zero (the variance's centring matters)."""

    CASES = [  # (module, input shape, transposed input)
        (lambda: nn.BatchNorm2d(5), (7, 5, 6, 3), False),
        (lambda: nn.BatchNorm2d(5, affine=False), (4, 5, 9, 9), False),
        (lambda: nn.BatchNorm2d(5, track_running_stats=False, momentum=0.3, eps=1e-3), (3, 5, 4, 4), True),
        (lambda: nn.BatchNorm1d(33), (50, 33), False),
        (lambda: nn.BatchNorm1d(6), (9, 6, 11), True),
        (lambda: nn.BatchNorm2d(70), (2, 70, 1, 1), False),
        # running statistics that are not contiguous: the forward's steps composed, the backward
        # fused, on x̂ of the input's (transposed) layout
        (lambda: _strided_running_stats(nn.BatchNorm2d(5)), (3, 5, 4, 6), True),
    ]

    def run_bn(self, make, shape, transposed, profile, device, training):
        torch.manual_seed(21)
        bn = make()
        if bn.affine:
            with torch.no_grad():
                bn.weight.uniform_(0.5, 2.0)
                bn.bias.uniform_(-1.0, 1.0)
        if bn.running_mean is not None:
            bn.running_mean.uniform_(-1.0, 1.0)
            bn.running_var.uniform_(0.5, 2.0)
        bn = bn.to(device).train(training)
        if getattr(bn, "strided_stats", False):
            for name in ("running_mean", "running_var"):
                values = getattr(bn, name)
                wide = torch.zeros(2 * values.numel(), device=values.device)
                wide[::2] = values
                setattr(bn, name, wide[::2])
                self.assertFalse(getattr(bn, name).is_contiguous())
        gen = torch.Generator().manual_seed(4)
        x = (torch.randn(*shape, generator=gen) * 3 + 40).to(device)
        if transposed:  # the same values, laid out with the last two dimensions swapped
            x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
        x.requires_grad_(True)
        g = torch.randn(*shape, generator=gen).to(device)
        with fplab.torch.emulate(profile, impl_seed=5):
            y = bn(x)
            y.backward(g)
        where = {e.where for e in fplab.torch.coverage().emulated}
        tensors = [y, x.grad] + [t for t in (bn.weight, bn.bias) if t is not None]
        tensors += [t.grad for t in (bn.weight, bn.bias) if t is not None]
        tensors += [t for t in (bn.running_mean, bn.running_var) if t is not None]
        return [bits(t) for t in tensors], where

    def test_fused_against_cpu(self):
        with mock.patch.object(fplab._core, "cuda_batch_norm_forward", wraps=fplab._core.cuda_batch_norm_forward) as fwd, \
                mock.patch.object(fplab._core, "cuda_batch_norm_backward",
                                  wraps=fplab._core.cuda_batch_norm_backward) as bwd:
            self.check_every_case()
        self.assertGreater(fwd.call_count, 20)  # the fused calls did run (the composed steps give the same bits)
        self.assertGreater(bwd.call_count, 20)

    def check_every_case(self):
        for profile in ("h100:deterministic", "h100", "det-atomics", "cpu-seq", "v100"):
            for (make, shape, transposed), training in itertools.product(self.CASES, (True, False)):
                with self.subTest(profile=profile, shape=shape, transposed=transposed, training=training):
                    want, _ = self.run_bn(make, shape, transposed, profile, "cpu", training)
                    got, where = self.run_bn(make, shape, transposed, profile, "cuda", training)
                    self.assertEqual(len(got), len(want))
                    for i, (a, b) in enumerate(zip(got, want)):
                        self.assertTrue(torch.equal(a, b), f"tensor {i} differs")
                    if profile != "cpu-seq":  # their bn_stats and bias_grad sums run on the kernels
                        self.assertEqual(where, {"cuda"})


@unittest.skipIf(WHY is not None, WHY or "")
class CudaConvolution(unittest.TestCase):
    """A convolution on CUDA tensors (one call of fplab's kernels for forward and for backward where
    they take it) == on CPU tensors: output and the gradients wanted, over kernels 1-3, strides 1-2,
    paddings 0-2, with and without bias, input or weight without gradient, several profiles."""

    def run_conv(self, k, s, p, bias, grads, profile, device):
        torch.manual_seed(8)
        conv = nn.Conv2d(4, 6, k, stride=s, padding=p, bias=bias)
        gen = torch.Generator().manual_seed(9)
        x = torch.randn(3, 4, 7, 8, generator=gen)
        x[0, 0, 0, 0] = -0.0
        conv = conv.to(device)
        x = x.to(device).requires_grad_("x" in grads)
        conv.weight.requires_grad_("w" in grads)
        with fplab.torch.emulate(profile, impl_seed=2):
            y = conv(x)
            g = torch.randn(y.shape, generator=gen).to(device)
            y.backward(g)
        where = {e.where for e in fplab.torch.coverage().emulated}
        out = [y] + [t.grad for t in (x, conv.weight, conv.bias) if t is not None and t.requires_grad]
        return [bits(t) for t in out], where

    def test_fused_against_cpu(self):
        with mock.patch.object(fplab._core, "cuda_conv2d_forward", wraps=fplab._core.cuda_conv2d_forward) as fwd, \
                mock.patch.object(fplab._core, "cuda_conv2d_backward", wraps=fplab._core.cuda_conv2d_backward) as bwd:
            self.check_every_case()
        self.assertGreater(fwd.call_count, 100)  # the fused calls did run
        self.assertGreater(bwd.call_count, 60)  # (v100's weight gradient goes the composed way)

    def check_every_case(self):
        cases = 0
        for profile in ("h100:deterministic", "h100", "v100"):
            for k, s, p, bias, grads in itertools.product((1, 2, 3), (1, 2), (0, 1, 2), (True, False),
                                                           ("xw", "w", "x")):
                if bias and grads != "xw" and k != 3:
                    continue  # the rarer combinations on one kernel size
                with self.subTest(profile=profile, k=k, s=s, p=p, bias=bias, grads=grads):
                    want, _ = self.run_conv(k, s, p, bias, grads, profile, "cpu")
                    got, where = self.run_conv(k, s, p, bias, grads, profile, "cuda")
                    self.assertEqual(len(got), len(want))
                    for i, (a, b) in enumerate(zip(got, want)):
                        self.assertTrue(torch.equal(a, b), f"tensor {i} differs")
                    if profile != "v100":  # v100's weight gradient: a round trip through the host
                        self.assertEqual(where, {"cuda"})
                    cases += 1
        self.assertGreater(cases, 100)


def _sha(run):
    return hashlib.sha256(run.weights.tobytes() + run.buffers.tobytes()).hexdigest()


@unittest.skipIf(WHY is not None, WHY or "")
@unittest.skipUnless(os.path.isdir(DATA), f"no Fashion-MNIST in {DATA} (FPLAB_DATA_DIR)")
class CudaModels(unittest.TestCase):
    """fplab's own models trained on CUDA tensors end with the CPU run's weights and predictions."""

    def test_models(self):
        data = fplab._core.load_image_dataset(DATA)
        sgd = dict(optimizer="sgd", lr=0.05, weight_decay=0.001)  # the device optimiser's other form
        cases = [("mlp", "h100", {}), ("small_cnn", "h100:deterministic", {}), ("small_cnn_bn", "h100", {}),
                 ("small_cnn", "cpu-seq", {}), ("mlp", "h100", sgd), ("small_cnn", "h100-torch", {})]
        for model, profile, options in cases:
            with self.subTest(model=model, profile=profile, **options):
                recipe = dict(model=model, subset=256, batch=64, epochs=1, data=data, **options)
                cpu = fm.train(profile, 3, **recipe)
                cuda = fm.train(profile, 3, device="cuda", **recipe)
                self.assertEqual(_sha(cuda), _sha(cpu))
                pc = fm.predict(cpu.net, data, profile, 3)
                pg = fm.predict(cuda.net, data, profile, 3)
                self.assertTrue(np.array_equal(pc, pg))


@unittest.skipIf(WHY is not None, WHY or "")
class CudaExperiment(unittest.TestCase):
    """fplab.torch.experiment on a CUDA device: every replica's bits are the CPU run's."""

    def test_replicas_match_the_cpu(self):
        import tempfile

        from test_torch_experiment import RECIPE, mlp, synthetic

        train, test = synthetic(256, 1), synthetic(200, 2)
        with tempfile.TemporaryDirectory(prefix="fplab-torch-cuda-experiment-") as folder:
            runs = [fplab.torch.experiment(mlp, train, test, RECIPE, ["h100"], ["impl", "control"], replicas=2,
                                           out=os.path.join(folder, device), device=device, progress=False,
                                           math="libm")  # PyTorch's own exp differs between devices
                    for device in ("cpu", "cuda")]
        cpu, cuda = ([(r.variant, r.replica, r.weights_sha256, r.predictions_sha256) for r in run.records]
                     for run in runs)
        self.assertEqual(cuda, cpu)


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(torch is not None and CUDA_KERNELS, "this fplab was built without its CUDA kernels")
class ScratchContracts(unittest.TestCase):
    """The fused kernels' scratch is checked before any kernel runs (no device needed to see it)."""

    def test_a_short_batch_norm_backward_scratch_is_refused_in_one_line(self):
        from fplab import _core
        # all:seq runs on the deterministic kernels: both sums' segments, 2 x 3 channels x 8 floats
        with self.assertRaisesRegex(ValueError, r"^cuda_batch_norm_backward: segments holds 10 floats; 48 needed"):
            _core.cuda_batch_norm_backward(0, 0, 0, 0, 0, 0, 10, 0, (2, 3, 4), True, fplab.Schedule("all:seq"), 0, 0,
                                           (1, 2), 0)
