"""The cross-check of issue 17: fplab's own models trained by the `fplab` command (`fplab train ...
--save-weights F`) and the same networks written in PyTorch (fplab.torch.models: the same initial
weights, batches and optimiser) trained under fplab.torch.emulate with the same profile end with
the same weights, bit for bit.

mlp and small_cnn on 256 Fashion-MNIST images (batch 64, one epoch: four steps) under cpu-seq,
h100 (impl seed 3: its bias gradients add with atomics), h100:deterministic, and small_cnn under
h100-torch (its layer rules: conv weight gradients by atomics, one by Winograd transforms) and
h100-torch:deterministic (two by Winograd transforms); one mlp with every
recipe option that has a draw of its own (dropout, crops and flips, SGD with weight decay,
learning-rate decay, two epochs) under h100; and mlp, small_cnn_bn and medium_cnn (64 images,
batch 32) under a profile of the test's own in which every operation kind draws noise (and the
7x7 convolutions' Winograd sums too; the 14x14 BatchNorm in cuDNN's arithmetic, its dots too). A control: another impl seed under h100
gives other bits, so the check can see the noise keys. For the mlps the test-set predictions
(fplab.torch.models.predict) are compared too. Where two runs part, the failure names the
first step and tensor that differ (fplab._core.train replays the C++ side step by step).

The `fplab` binary comes from $FPLAB_BINARY (ctest sets it) or the build tree beside the package;
the tests skip, saying why, without it, without PyTorch or without the data set.
"""

import concurrent.futures
import os
import subprocess
import tempfile
import unittest

import numpy as np

from fplab_command import DATA, fplab_binary
from torch_reference import needs_torch, torch

if torch is not None:
    import fplab
    import fplab._core as core
    import fplab.torch
    import fplab.torch.models as fm

RECIPE = dict(subset=256, batch=64, epochs=1)
OPTIONS = dict(model="mlp", hidden=[64, 32], dropout=0.3, optimizer="sgd", lr=0.05, weight_decay=0.001,
               decay_every=1, epochs=2, augment_pad=2, flip=True, subset=200, batch=48, algo_seed=7)
# A profile of this test only: every operation kind draws implementation noise, so that every
# noise key (layer, op kind, part, call; the evaluation's too) must be the C++ one for the bits to meet.
ALL_NOISE = """name = "all-noise"
description = "Test: every reduction ends in atomics or a shuffle"
[default]
format = "fp32"
mode = "rne"
products = "fused"
fwd = "split(4):seq | all:atomic"
dgrad = "split(4):seq | all:atomic"
wgrad = "split(8):seq | all:atomic"
bias_grad = "strided(8):atomic | all:atomic"
bn_stats = "strided(8):seq | all:atomic"
softmax = "shuffle | all:seq"
loss = "strided(4):seq | all:atomic"
# Winograd weight gradients at 7x7 (small_cnn_bn's 32->32, medium_cnn's): the 36 transformed sums
# by the table's atomic wgrad, so that each sum's part (0-35) must be the C++ one.
[[default.layers]]
match = { layer = "conv", kernel = 3, stride = 1, height = 7 }
conv_wgrad = "winograd"
# BatchNorm at 14x14 (small_cnn_bn's and medium_cnn's second) in cuDNN's arithmetic: its per-channel
# dots (the variance's and gamma's gradient's, parts 1 + c) by atomic orders too.
[[default.layers]]
match = { layer = "bn", height = 14 }
batch_norm = "cudnn"
bn_stats = "strided(16):seq | all:atomic"
[deterministic]
fwd = "all:seq"
dgrad = "all:seq"
wgrad = "all:seq"
bias_grad = "all:seq"
bn_stats = "all:seq"
softmax = "all:seq"
loss = "all:seq"
"""
SMALL = dict(subset=64, batch=32, epochs=1)
# name: (train() arguments, profile, impl seed); "all-noise" is ALL_NOISE's file. The slow fplab
# runs first (they start in this order).
CASES = {
    "medium_cnn_all_noise": (dict(model="medium_cnn", **SMALL), "all-noise", 3),
    "small_cnn_bn_all_noise": (dict(model="small_cnn_bn", **SMALL), "all-noise", 3),
    # h100-torch's BatchNorm rules at batch 64: cuDNN's NCHW kernels at 28x28, singleread at 14x14
    # and 7x7, the Winograd weight gradient at 7x7
    "small_cnn_bn_h100_torch": (dict(model="small_cnn_bn", subset=128, batch=64, epochs=1), "h100-torch", 3),
    # at batch 128 the 14x14 BatchNorm pairs the singleread forward with the NCHW backward
    "small_cnn_bn_h100_torch_128": (dict(model="small_cnn_bn", subset=128, batch=128, epochs=1), "h100-torch", 3),
    "small_cnn_cpu_seq": (dict(model="small_cnn", **RECIPE), "cpu-seq", 1),
    "small_cnn_h100": (dict(model="small_cnn", **RECIPE), "h100", 3),
    "small_cnn_h100_deterministic": (dict(model="small_cnn", **RECIPE), "h100:deterministic", 1),
    "small_cnn_h100_torch": (dict(model="small_cnn", **RECIPE), "h100-torch", 3),
    "small_cnn_h100_torch_deterministic": (dict(model="small_cnn", **RECIPE), "h100-torch:deterministic", 1),
    "mlp_cpu_seq": (dict(model="mlp", **RECIPE), "cpu-seq", 1),
    "mlp_h100": (dict(model="mlp", **RECIPE), "h100", 3),
    "mlp_h100_deterministic": (dict(model="mlp", **RECIPE), "h100:deterministic", 1),
    "mlp_options_h100": (OPTIONS, "h100", 5),
    "mlp_all_noise": (dict(model="mlp", **RECIPE), "all-noise", 3),
}
# fplab train's option for each train() argument (the rest: --NAME with _ as -).
FLAGS = {"subset": "--train-subset", "decay_every": "--lr-decay-every", "flip": "--flip"}


def command(binary, arguments, profile, impl_seed, out):
    """The `fplab train` command line of a case."""
    line = [binary, "train", "--profile", profile, "--impl-seed", str(impl_seed), "--data-dir", DATA,
            "--save-weights", out, "--quiet"]
    for name, value in arguments.items():
        flag = FLAGS.get(name, "--" + name.replace("_", "-"))
        if value is True:
            line.append(flag)
        elif isinstance(value, list):
            line += [flag] + [str(v) for v in value]
        else:
            line += [flag, str(value)]
    return line


def first_difference(a, b, net):
    """The first tensor (fplab's name) in which the flat weights a and b differ, and how many of its
    values differ; None if they are bit-identical."""
    for name, at, size in net.fplab_tensors():
        differ = int((a[at:at + size].view(np.uint32) != b[at:at + size].view(np.uint32)).sum())
        if differ:
            return f"{name}: {differ} of {size} values differ"
    return None


@needs_torch
@unittest.skipIf(not os.path.isdir(DATA), f"Fashion-MNIST is not in {DATA} (Debian: dataset-fashion-mnist)")
class CrossCheck(unittest.TestCase):
    """fplab train --save-weights against fplab.torch.models.train, bit for bit."""

    @classmethod
    def setUpClass(cls):
        cls.binary = fplab_binary()
        if cls.binary is None:
            raise unittest.SkipTest("no fplab binary: set FPLAB_BINARY or build the fplab target beside the package")
        cls.folder = tempfile.TemporaryDirectory(prefix="fplab-crosscheck-")
        cls.all_noise = os.path.join(cls.folder.name, "all-noise.toml")
        with open(cls.all_noise, "w") as f:
            f.write(ALL_NOISE)
        # The fplab runs start at once, two at a time (they take most of the time: each also
        # evaluates the test set), while the PyTorch runs go on in the tests.
        cls.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        cls.runs = {}
        for name, (arguments, profile, impl_seed) in CASES.items():
            out = os.path.join(cls.folder.name, name + ".weights")
            line = command(cls.binary, arguments, cls.profile(profile), impl_seed, out)
            cls.runs[name] = (out, line, cls.pool.submit(subprocess.run, line, capture_output=True, text=True))
        cls.data = core.load_fashion_mnist(DATA)

    @classmethod
    def profile(cls, name):
        """The profile argument of a case: a shipped name, or the path of the test's own profile."""
        return cls.all_noise if name == "all-noise" else name

    @classmethod
    def tearDownClass(cls):
        cls.pool.shutdown(wait=True)
        cls.folder.cleanup()

    def reference(self, name):
        """The arrays of case `name`'s --save-weights file."""
        out, line, future = self.runs[name]
        done = future.result()
        self.assertEqual(done.returncode, 0, f"{' '.join(line)}\n{done.stderr}")
        return core.read_checkpoint(out)

    def explain(self, arguments, profile, impl_seed):
        """Where the two runs part: the first step after which the weights differ, and the tensor."""
        table = fplab.torch._table.load_table(profile)
        cpp = {}
        core.train(self.data, table.choices, impl_seed=impl_seed, on_step=lambda step, w: cpp.__setitem__(step, w),
                   layer_rules=table.layer_rules, conv_dgrad=table.conv_dgrad, **arguments)
        found = []

        def compare(step, net):
            if not found:
                where = first_difference(cpp[step], net.fplab_weights(), net)
                if where:
                    found.append(f"first after step {step} of {len(cpp) - 1}: {where}")

        fm.train(profile, impl_seed, data=self.data, on_step=compare, **arguments)
        return found[0] if found else "every step agrees with fplab._core.train: only the command's file differs"

    def check(self, name):
        arguments, profile, impl_seed = CASES[name]
        profile = self.profile(profile)
        run = fm.train(profile, impl_seed, data=self.data, **arguments)
        ref = self.reference(name)
        self.assertEqual(run.weights.dtype, np.float32)
        if ref["parameters"].tobytes() != run.weights.tobytes():
            self.fail(f"{name}: PyTorch under fplab.torch.emulate({profile!r}, impl_seed={impl_seed}) and fplab "
                      f"train differ; {self.explain(arguments, profile, impl_seed)}")
        self.assertEqual(ref["buffers"].tobytes(), run.buffers.tobytes(), f"{name}: BatchNorm running statistics")
        if arguments["model"] == "mlp":  # the test set's predictions too (a CNN's take seconds here)
            predictions = fm.predict(run.net, self.data, profile, impl_seed, epoch=arguments["epochs"] - 1)
            self.assertTrue(np.array_equal(predictions, ref["test_predictions"]), f"{name}: test predictions")
        return run, ref

    def test_mlp_cpu_seq(self):
        self.check("mlp_cpu_seq")

    def test_mlp_h100(self):
        run, ref = self.check("mlp_h100")
        # The control: another run of the hardware (impl seed) adds the bias gradients in other
        # orders, so the weights differ: the check above sees the noise keys.
        arguments, profile, _ = CASES["mlp_h100"]
        other = fm.train(profile, 4, data=self.data, **arguments)
        self.assertNotEqual(other.weights.tobytes(), ref["parameters"].tobytes())

    def test_mlp_h100_deterministic(self):
        self.check("mlp_h100_deterministic")

    def test_small_cnn_cpu_seq(self):
        self.check("small_cnn_cpu_seq")

    def test_small_cnn_h100(self):
        self.check("small_cnn_h100")

    def test_small_cnn_h100_torch(self):
        # h100-torch's layer rules: the weight gradients of the 28- and 14-pixel convolutions by
        # atomics, the 7-pixel one by Winograd transforms. The control: another impl seed changes
        # the weights.
        run, ref = self.check("small_cnn_h100_torch")
        arguments, profile, _ = CASES["small_cnn_h100_torch"]
        other = fm.train(profile, 4, data=self.data, **arguments)
        self.assertNotEqual(other.weights.tobytes(), ref["parameters"].tobytes())

    def test_small_cnn_h100_deterministic(self):
        self.check("small_cnn_h100_deterministic")

    def test_small_cnn_h100_torch_deterministic(self):
        # Winograd weight gradients with one input channel (1->16 at 28x28) and at 7x7.
        self.check("small_cnn_h100_torch_deterministic")

    def test_small_cnn_bn_all_noise(self):
        self.check("small_cnn_bn_all_noise")

    def test_small_cnn_bn_h100_torch(self):
        # the BatchNorm at 28x28 in cuDNN's NCHW kernels' form (sim/cudnn_nchw_batch_norm) on both
        # sides; the control: fplab's own BatchNorm arithmetic there gives other weights
        run, ref = self.check("small_cnn_bn_h100_torch")
        arguments, _, impl_seed = CASES["small_cnn_bn_h100_torch"]
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "profiles", "shipped",
                               "h100-torch.toml")) as f:
            text = f.read().replace('name = "h100-torch"', 'name = "h100-torch-fplab-28"')
        path = os.path.join(self.folder.name, "h100-torch-fplab-28.toml")
        with open(path, "w") as f:
            f.write(text.replace('batch_norm = "cudnn-nchw"', 'batch_norm = "fplab"'))
        other = fm.train(path, impl_seed, data=self.data, **arguments)
        self.assertNotEqual(other.weights.tobytes(), ref["parameters"].tobytes())

    def test_small_cnn_bn_h100_torch_128(self):
        self.check("small_cnn_bn_h100_torch_128")

    def test_medium_cnn_all_noise(self):
        self.check("medium_cnn_all_noise")

    def test_mlp_all_noise(self):
        self.check("mlp_all_noise")

    def test_mlp_options_h100(self):
        self.check("mlp_options_h100")


@needs_torch
class LayerKeys(unittest.TestCase):
    """fplab.torch.layer: explicit positions for the noise keys; the counted ones go on without them."""

    def sites(self, body):
        """The Sites of the emulated operations body() runs under emulate("h100")."""
        seen = []
        with fplab.torch.emulate("h100", impl_seed=1) as em:
            original = em.next_site

            def recording():
                site = original()
                seen.append((site.position, site.call))
                return site

            em.next_site = recording
            body()
        return seen

    def test_layer_pins_the_position_and_the_count_goes_on(self):
        x, w = torch.ones(2, 3), torch.ones(4, 3)
        F = torch.nn.functional

        def body():
            F.linear(x, w)
            with fplab.torch.layer(7):
                F.linear(x, w)
                with fplab.torch.layer(9):
                    F.linear(x, w)
                F.linear(x, w)
            F.linear(x, w)

        self.assertEqual(self.sites(body), [(0, 0), (7, 0), (9, 0), (7, 0), (1, 0)])

    def test_bad_arguments_are_one_line_errors(self):
        with self.assertRaisesRegex(fplab.Error, "layer: index must be a whole number"):
            with fplab.torch.layer(-1):
                pass
        with self.assertRaisesRegex(fplab.Error, "math must be one of torch, libm"):
            fplab.torch.emulate("h100", math="glibc")

    def test_libm_exp_is_the_c_librarys(self):
        x = np.linspace(-20, 0, 1001, dtype=np.float32)
        ours = core.exp(x)
        self.assertEqual(ours.dtype, np.float32)
        # float64 exp rounded to float32 is the correctly rounded result but for rare ties of
        # double rounding; the C library's expf is within half an ulp but for rare cases too.
        close = np.abs(ours.astype(np.float64) - np.exp(x.astype(np.float64))) <= np.spacing(ours) * 0.51
        self.assertTrue(close.all())


if __name__ == "__main__":
    unittest.main()
