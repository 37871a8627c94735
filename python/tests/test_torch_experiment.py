"""fplab.torch.experiment: the noise variants of a user's own PyTorch model, written as `fplab run` writes them.

A two-layer MLP on a small synthetic problem (3 classes, 20 features: seconds, not minutes) under
h100 and v100, the four variants, two replicas each: summary.json's groups and replica counts, the
CSVs' rows, Control replicas bit-identical and ALGO ones not, IMPL ones apart where the profile's
default table draws noise (h100's bias gradients add with atomics), a second run resuming every
replica, and bad input refused with one line before anything is written.

The cross-check: fplab's own mlp (fplab.torch.models.build) on 256 Fashion-MNIST images, IMPL,
Control and ORDER on cpu-seq and h100, against `fplab run` of the same experiment file: the same seeds, the
same test predictions, losses and accuracies per replica, and the same statistics ($FPLAB_BINARY, as
test_torch_crosscheck.py; skipped without it or without the data set).
"""

import csv
import json
import os
import subprocess
import tempfile
import unittest
from unittest import mock

import numpy as np

from fplab_command import DATA, fplab_binary
from torch_reference import needs_torch, torch

if torch is not None:
    import torch.nn as nn
    import torch.nn.functional as F

    import fplab
    import fplab._core as core
    import fplab.torch
    import fplab.torch.models as fm

PROFILES = ["h100", "v100"]
VARIANTS = ["algo+impl", "algo", "impl", "control"]
RECIPE = dict(epochs=1, batch=64, lr=0.01)


def synthetic(count, seed):
    """count examples of 3 classes in 20 features: class c's mean is c along the first 3 features."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, count)
    x = rng.standard_normal((count, 20)).astype(np.float32)
    x[np.arange(count), y] += 2.0
    return torch.from_numpy(x), torch.from_numpy(y)


def mlp(seed):
    """The user's model: two Linear layers (torch.manual_seed(seed) has run: the init is the seed's)."""
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 3))


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@needs_torch
class Variants(unittest.TestCase):
    """Two profiles x four variants x two replicas of a user's MLP."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-")
        cls.out = os.path.join(cls.folder.name, "mlp")
        cls.train, cls.test = synthetic(256, 1), synthetic(200, 2)
        cls.results = fplab.torch.experiment(mlp, cls.train, cls.test, RECIPE, PROFILES, VARIANTS, replicas=2,
                                             out=cls.out, name="user mlp", class_names=["a", "b", "c"],
                                             progress=False)
        cls.replicas = rows(os.path.join(cls.out, "replicas.csv"))

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def group(self, profile, variant):
        return [r for r in self.replicas if r["profile"] == profile and r["variant"] == variant]

    def test_summary_names_every_group_with_its_replicas(self):
        with open(os.path.join(self.out, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary, self.results.summary)
        self.assertEqual(summary["experiment"], "user mlp")
        self.assertEqual([(g["profile"], g["variant"]) for g in summary["results"]],
                         [(p, v) for p in PROFILES for v in VARIANTS])
        self.assertTrue(all(g["replicas"] == 2 for g in summary["results"]))
        self.assertEqual(summary["recipe"]["run"]["variants"], VARIANTS)
        self.assertEqual(summary["recipe"]["training"]["lr"], 0.01)
        self.assertEqual(summary["recipe"]["model"]["name"], "Sequential (771 parameters)")
        for name in ("report.md", "report.html", "per_class.csv", "pairs.csv"):
            self.assertTrue(os.path.isfile(os.path.join(self.out, name)), name)

    def test_csvs_hold_a_row_per_replica_pair_and_class(self):
        self.assertEqual(len(self.replicas), len(PROFILES) * len(VARIANTS) * 2)
        self.assertEqual(len(rows(os.path.join(self.out, "pairs.csv"))), len(PROFILES) * len(VARIANTS))
        per_class = rows(os.path.join(self.out, "per_class.csv"))
        self.assertEqual(len(per_class), len(PROFILES) * len(VARIANTS) * 3)
        self.assertEqual({r["class_name"] for r in per_class}, {"a", "b", "c"})
        accuracy = {(r["profile"], r["variant"], r["replica"]): float(r["test_accuracy"]) for r in self.replicas}
        self.assertTrue(all(a > 0.5 for a in accuracy.values()), accuracy)  # it learned something

    def test_seeds_vary_as_fplab_run_varies_them(self):
        seeds = {(r["variant"], r["replica"]): (r["algo_seed"], r["impl_seed"]) for r in self.group("h100", "algo")}
        self.assertEqual(seeds, {("algo", "0"): ("1", "1"), ("algo", "1"): ("2", "1")})
        impl = [(r["algo_seed"], r["impl_seed"]) for r in self.group("h100", "impl")]
        self.assertEqual(impl, [("1", "1"), ("1", "2")])
        both = [(r["algo_seed"], r["impl_seed"]) for r in self.group("h100", "algo+impl")]
        self.assertEqual(both, [("1", "1"), ("2", "2")])

    def test_control_replicas_are_bit_identical_and_algo_ones_are_not(self):
        by_group = {(g["profile"], g["variant"]): g for g in self.results.summary["results"]}
        for profile in PROFILES:
            control = self.group(profile, "control")
            self.assertEqual(control[0]["weights_sha256"], control[1]["weights_sha256"], profile)
            self.assertTrue(by_group[profile, "control"]["identical_replicas"])
            self.assertEqual(by_group[profile, "control"]["churn_mean"], 0.0)
            algo = self.group(profile, "algo")
            self.assertNotEqual(algo[0]["weights_sha256"], algo[1]["weights_sha256"], profile)
            self.assertFalse(by_group[profile, "algo"]["identical_replicas"])
        # h100's default table adds the bias gradients with atomics: two runs of it differ.
        impl = self.group("h100", "impl")
        self.assertNotEqual(impl[0]["weights_sha256"], impl[1]["weights_sha256"])

    def test_records_are_the_files(self):
        record = self.results.records[0]
        self.assertEqual((record.profile, record.variant, record.replica), ("h100", "algo+impl", 0))
        self.assertEqual(record.weights.dtype, np.float32)
        self.assertEqual(len(record.weights), 771)
        self.assertEqual(record.weights_sha256, self.replicas[0]["weights_sha256"])
        self.assertEqual(len(record.predictions), 200)

    def test_a_second_run_resumes_every_replica_and_needs_to_be_told(self):
        with self.assertRaises(fplab.Error) as refused:
            fplab.torch.experiment(mlp, self.train, self.test, RECIPE, PROFILES, VARIANTS, replicas=2, out=self.out,
                                   name="user mlp", class_names=["a", "b", "c"], progress=False)
        self.assertIn("resume=True", str(refused.exception))
        again = fplab.torch.experiment(mlp, self.train, self.test, RECIPE, PROFILES, VARIANTS, replicas=2,
                                       out=self.out, name="user mlp", class_names=["a", "b", "c"], progress=False,
                                       resume=True)
        self.assertEqual(again.summary["results"], self.results.summary["results"])
        # Every replica came from its file: the seconds recorded are the first run's.
        self.assertEqual([r.seconds for r in again.records], [r.seconds for r in self.results.records])


@needs_torch
class Workers(unittest.TestCase):
    """Replicas trained two at a time in worker processes are the replicas trained one after another."""

    def test_same_bits_in_workers(self):
        train, test = synthetic(256, 1), synthetic(200, 2)
        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-workers-") as folder:
            arguments = dict(recipe=RECIPE, profiles=["h100"], variants=["algo+impl", "impl"], replicas=3,
                             name="user mlp", progress=False)
            alone = fplab.torch.experiment(mlp, train, test, out=os.path.join(folder, "alone"), **arguments)
            pooled = fplab.torch.experiment(mlp, train, test, out=os.path.join(folder, "pooled"), workers=2,
                                            **arguments)
            self.assertEqual([(r.profile, r.variant, r.replica) for r in pooled.records],
                             [(r.profile, r.variant, r.replica) for r in alone.records])
            self.assertEqual([r.weights_sha256 for r in pooled.records], [r.weights_sha256 for r in alone.records])
            self.assertEqual([r.predictions_sha256 for r in pooled.records],
                             [r.predictions_sha256 for r in alone.records])
            self.assertEqual(len({r.weights_sha256 for r in alone.records}), 5)  # all but replica 0 twice differ
            self.assertEqual(pooled.summary["results"], alone.summary["results"])

    def test_a_lambda_cannot_go_to_a_worker(self):
        train, test = synthetic(64, 1), synthetic(32, 2)
        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-workers-") as folder:
            with self.assertRaises(fplab.Error) as caught:
                fplab.torch.experiment(lambda seed: mlp(seed), train, test, RECIPE, ["h100"], ["control"], replicas=2,
                                       out=os.path.join(folder, "never"), workers=2, progress=False)
            self.assertIn("top level", str(caught.exception))
            self.assertNotIn("\n", str(caught.exception))
            self.assertFalse(os.path.exists(os.path.join(folder, "never")))


def adamw(parameters):
    """A caller's optimizer (top level: it can go to worker processes)."""
    return torch.optim.AdamW(parameters, lr=0.01, weight_decay=0.05)


@needs_torch
class CallersOptimizer(unittest.TestCase):
    """optimizer_fn: a torch.optim optimizer in place of fplab's SGD/Adam, recorded and resumed by its settings."""

    def test_adamw_trains_records_and_resumes(self):
        train, test = synthetic(256, 1), synthetic(200, 2)
        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-optimizer-") as folder:
            arguments = dict(recipe=RECIPE, profiles=["h100"], variants=["control", "impl"], replicas=2,
                             name="user mlp", progress=False)
            out = os.path.join(folder, "adamw")
            ours = fplab.torch.experiment(mlp, train, test, out=os.path.join(folder, "fplab"), **arguments)
            theirs = fplab.torch.experiment(mlp, train, test, out=out, optimizer_fn=adamw, **arguments)
            # Another optimizer, other weights; the same one in worker processes, the same bits.
            self.assertTrue(all(a.weights_sha256 != b.weights_sha256 for a, b in zip(ours.records, theirs.records)))
            pooled = fplab.torch.experiment(mlp, train, test, out=os.path.join(folder, "pooled"), workers=2,
                                            optimizer_fn=adamw, **arguments)
            self.assertEqual([r.weights_sha256 for r in pooled.records], [r.weights_sha256 for r in theirs.records])
            with open(os.path.join(out, "summary.json")) as f:
                self.assertIn("torch.optim.adamw.AdamW", f.read())
            # Resume keeps replicas of the same optimizer, and trains again those of another lr.
            again = fplab.torch.experiment(mlp, train, test, out=out, optimizer_fn=adamw, resume=True, **arguments)
            self.assertEqual([r.weights_sha256 for r in again.records], [r.weights_sha256 for r in theirs.records])
            slower = fplab.torch.experiment(mlp, train, test, out=out, resume=True,
                                            optimizer_fn=lambda ps: torch.optim.AdamW(ps, lr=0.001, weight_decay=0.05),
                                            **arguments)
            self.assertTrue(all(a.weights_sha256 != b.weights_sha256 for a, b in zip(slower.records, theirs.records)))

    def test_what_is_not_an_optimizer_is_refused(self):
        train, test = synthetic(64, 1), synthetic(32, 2)
        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-optimizer-") as folder:
            for bad in (lambda ps: None, "adam"):
                with self.assertRaises(fplab.Error) as caught:
                    fplab.torch.experiment(mlp, train, test, RECIPE, ["h100"], ["control"], replicas=2,
                                           out=os.path.join(folder, "never"), optimizer_fn=bad, progress=False)
                self.assertIn("optimizer_fn", str(caught.exception))
                self.assertFalse(os.path.exists(os.path.join(folder, "never")))


def step_decay(optimizer):
    """A caller's scheduler (top level: it can go to worker processes): lr x 0.1 after every epoch."""
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)


class _Counting:
    """A scheduler-like object that counts its steps (the test's probe of when they come)."""

    steps = 0

    def __init__(self, optimizer):
        self.optimizer = optimizer

    def step(self, *args):
        _Counting.steps += 1

    def state_dict(self):
        return {"kind": "counting"}


@needs_torch
class CallersScheduler(unittest.TestCase):
    """scheduler_fn: a learning-rate scheduler of the caller's optimizer, stepped once an epoch."""

    def test_step_lr_changes_training_is_recorded_and_goes_to_workers(self):
        train, test = synthetic(256, 1), synthetic(200, 2)
        recipe = dict(RECIPE, epochs=3)
        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-scheduler-") as folder:
            arguments = dict(recipe=recipe, profiles=["h100"], variants=["control", "impl"], replicas=2,
                             name="user mlp", progress=False, optimizer_fn=adamw)
            plain = fplab.torch.experiment(mlp, train, test, out=os.path.join(folder, "plain"), **arguments)
            out = os.path.join(folder, "decayed")
            decayed = fplab.torch.experiment(mlp, train, test, out=out, scheduler_fn=step_decay, **arguments)
            self.assertTrue(all(a.weights_sha256 != b.weights_sha256
                                for a, b in zip(plain.records, decayed.records)))
            with open(os.path.join(out, "summary.json")) as f:
                self.assertIn("StepLR", f.read())
            pooled = fplab.torch.experiment(mlp, train, test, out=os.path.join(folder, "pooled"), workers=2,
                                            scheduler_fn=step_decay, **arguments)
            self.assertEqual([r.weights_sha256 for r in pooled.records], [r.weights_sha256 for r in decayed.records])
            # Another gamma: resume trains the replicas again.
            other = fplab.torch.experiment(
                mlp, train, test, out=out, resume=True,
                scheduler_fn=lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5), **arguments)
            self.assertTrue(all(a.weights_sha256 != b.weights_sha256 for a, b in zip(other.records, decayed.records)))

    def test_it_steps_once_an_epoch(self):
        train, test = synthetic(256, 1), synthetic(32, 2)
        _Counting.steps = 0
        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-scheduler-") as folder:
            fplab.torch.experiment(mlp, train, test, dict(RECIPE, epochs=3), ["h100"], ["control"], replicas=2,
                                   out=os.path.join(folder, "counted"), progress=False, optimizer_fn=adamw,
                                   scheduler_fn=_Counting)
        self.assertEqual(_Counting.steps, 2 * 3)  # two replicas, three epochs (4 batches each)

    def test_reduce_on_plateau_gets_the_epochs_mean_loss(self):
        train, test = synthetic(256, 1), synthetic(32, 2)
        seen = []
        original = torch.optim.lr_scheduler.ReduceLROnPlateau.step

        def step(scheduler, metrics, *args, **kwargs):
            seen.append(metrics)
            return original(scheduler, metrics, *args, **kwargs)

        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-scheduler-") as folder, \
                mock.patch.object(torch.optim.lr_scheduler.ReduceLROnPlateau, "step", step):
            results = fplab.torch.experiment(mlp, train, test, dict(RECIPE, epochs=2), ["h100"], ["control"],
                                             replicas=2, out=os.path.join(folder, "plateau"), progress=False,
                                             optimizer_fn=adamw,
                                             scheduler_fn=lambda opt: torch.optim.lr_scheduler.ReduceLROnPlateau(opt))
        self.assertEqual(len(seen), 4)  # two replicas, two epochs
        self.assertTrue(all(isinstance(v, float) and v > 0 for v in seen))
        self.assertEqual(seen[1], results.records[0].train_loss)  # the last epoch's mean is the recorded loss

    def test_bad_schedulers_are_refused_before_anything_is_written(self):
        train, test = synthetic(64, 1), synthetic(32, 2)
        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-scheduler-") as folder:
            never = os.path.join(folder, "never")
            for scheduler_fn, optimizer_fn, words in ((step_decay, None, "needs optimizer_fn"),
                                                      (lambda opt: 3, adamw, "scheduler_fn must return"),
                                                      ("step", adamw, "scheduler_fn must be a function")):
                with self.subTest(words=words), self.assertRaises(fplab.Error) as caught:
                    fplab.torch.experiment(mlp, train, test, RECIPE, ["h100"], ["control"], replicas=2, out=never,
                                           optimizer_fn=optimizer_fn, scheduler_fn=scheduler_fn, progress=False)
                self.assertIn(words, str(caught.exception))
                self.assertNotIn("\n", str(caught.exception))
                self.assertFalse(os.path.exists(never))


@needs_torch
class Native(unittest.TestCase):
    """The profile "native": PyTorch's own kernels, with the same initial weights, batches and optimiser."""

    def test_native_replicas_beside_an_emulated_profile(self):
        train, test = synthetic(256, 1), synthetic(200, 2)
        before = torch.are_deterministic_algorithms_enabled()
        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-native-") as folder:
            results = fplab.torch.experiment(mlp, train, test, RECIPE, ["native", "cpu-seq"], ["control", "algo"],
                                             replicas=2, out=os.path.join(folder, "native"), name="user mlp",
                                             progress=False)
            self.assertIn("Profile native: PyTorch " + torch.__version__, results.summary["description"])
            self.assertIn("Profile cpu-seq: emulated by fplab.torch, exp, log and the loss: torch.",
                          results.summary["description"])
        self.assertEqual(torch.are_deterministic_algorithms_enabled(), before)  # put back as it was
        by_group = {(g["profile"], g["variant"]): g for g in results.summary["results"]}
        self.assertTrue(by_group["native", "control"]["identical_replicas"])
        self.assertFalse(by_group["native", "algo"]["identical_replicas"])
        native = {(r.variant, r.replica): r for r in results.records if r.profile == "native"}
        emulated = {(r.variant, r.replica): r for r in results.records if r.profile == "cpu-seq"}
        self.assertEqual(native.keys(), emulated.keys())
        for key in native:
            # The same seeds and data, but not the same arithmetic: PyTorch's kernels are not
            # cpu-seq's sequential FMA chains, so the weights part (if only in the last bits).
            self.assertEqual((native[key].algo_seed, native[key].impl_seed),
                             (emulated[key].algo_seed, emulated[key].impl_seed))
            self.assertNotEqual(native[key].weights_sha256, emulated[key].weights_sha256, key)
            self.assertLess(np.abs(native[key].weights - emulated[key].weights).max(), 1e-3, key)
            self.assertGreater(native[key].test_accuracy, 0.5, key)


@needs_torch
class FlipAndOrder(unittest.TestCase):
    """The variants beyond the four: one flipped bit of an initial weight, or only the data order, changes the run."""

    def test_each_replica_differs_from_the_first(self):
        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-flip-") as folder:
            results = fplab.torch.experiment(mlp, synthetic(128, 1), synthetic(64, 2), RECIPE, ["cpu-seq"],
                                             ["flip", "order"], replicas=2, out=folder + "/out", progress=False)
        flip, order = results.records[:2], results.records[2:]
        self.assertEqual([r.variant for r in results.records], ["flip", "flip", "order", "order"])
        self.assertNotEqual(flip[0].weights_sha256, flip[1].weights_sha256)
        self.assertEqual(flip[0].algo_seed, flip[1].algo_seed)
        self.assertNotEqual(order[0].weights_sha256, order[1].weights_sha256)


@needs_torch
class BadInput(unittest.TestCase):
    """Refused with one line, before the output folder is made."""

    def setUp(self):
        self.folder = tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-bad-")
        self.out = os.path.join(self.folder.name, "never")
        self.train, self.test = synthetic(64, 1), synthetic(32, 2)

    def tearDown(self):
        self.folder.cleanup()

    def refused(self, **changes):
        arguments = dict(model_fn=mlp, train_data=self.train, test_data=self.test, recipe=RECIPE, profiles=["h100"],
                         variants=["control"], replicas=2, out=self.out, progress=False)
        arguments.update(changes)
        with self.assertRaises(fplab.Error) as caught:
            fplab.torch.experiment(**arguments)
        message = str(caught.exception)
        self.assertNotIn("\n", message)
        self.assertFalse(os.path.exists(self.out), f"{self.out} was made for: {message}")
        return message

    def test_unknown_profile(self):
        self.assertIn("no-such-gpu", self.refused(profiles=["no-such-gpu"]))

    def test_too_few_replicas(self):
        self.assertIn("replicas", self.refused(replicas=0))
        self.assertIn("replicas", self.refused(replicas=1))

    def test_unknown_variant(self):
        self.assertIn("unknown variant 'noise'", self.refused(variants=["control", "noise"]))

    def test_bad_recipe(self):
        self.assertIn("'lr'", self.refused(recipe=dict(lr=-1)))
        self.assertIn("unknown recipe key 'batch_size'", self.refused(recipe=dict(batch_size=8)))
        self.assertIn("'epochs'", self.refused(recipe=dict(epochs=1.5)))
        self.assertIn("'optimizer'", self.refused(recipe=dict(optimizer="lbfgs")))

    def test_bad_data(self):
        x, y = self.train
        self.assertIn("as many inputs as labels", self.refused(train_data=(x, y[:10])))
        self.assertIn("class indices", self.refused(test_data=(self.test[0], self.test[1].float())))
        self.assertIn("class name", self.refused(class_names=["a", "b"]))

    def test_bad_device(self):
        self.assertIn("'cpu' or 'cuda[:N]'", self.refused(device="no-such-device"))
        self.assertIn("'cpu' or 'cuda[:N]'", self.refused(device="meta"))
        if not torch.cuda.is_available():  # test_torch_cuda.py trains on one where there is one
            self.assertIn("cuda", self.refused(device="cuda"))


CROSSCHECK = """name = "crosscheck"
[data]
train_subset = 256
[model]
name = "mlp"
hidden = [32]
[training]
epochs = 1
batch = 64
optimizer = "adam"
lr = 0.001
[run]
profiles = ["cpu-seq", "h100"]
variants = ["impl", "control", "order"]
replicas = 2
"""


@needs_torch
@unittest.skipIf(not os.path.isdir(DATA), f"Fashion-MNIST is not in {DATA} (Debian: dataset-fashion-mnist)")
class AgreesWithFplabRun(unittest.TestCase):
    """fplab's own mlp through fplab.torch.experiment and through `fplab run`: the same results."""

    def test_same_replicas_and_statistics(self):
        binary = fplab_binary()
        if binary is None:
            self.skipTest("no fplab binary: set FPLAB_BINARY or build the fplab target beside the package")
        with tempfile.TemporaryDirectory(prefix="fplab-torch-experiment-run-") as folder:
            toml = os.path.join(folder, "crosscheck.toml")
            with open(toml, "w") as f:
                f.write(CROSSCHECK)
            cpp_out = os.path.join(folder, "cpp")
            cpp = subprocess.Popen([binary, "run", toml, "--out", cpp_out, "--data-dir", DATA, "--quiet", "--jobs",
                                    "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

            data = core.load_fashion_mnist(DATA)
            # IMPL, Control and ORDER keep the algo seed (1), so every replica trains on the examples
            # fplab run selects for it, in the order the experiment takes them.
            examples = core.training_examples(data.labels("train"), 256, -1, 100.0, 1)
            train = (torch.from_numpy(data.images("train")[examples].copy()),
                     torch.from_numpy(data.labels("train")[examples].astype(np.int64)))
            test = (torch.from_numpy(data.images("test").copy()),
                    torch.from_numpy(data.labels("test").astype(np.int64)))
            last = fm.build("mlp", hidden=[32]).indices[-1]

            def model(seed):
                return fm.build("mlp", hidden=[32], algo_seed=seed)

            def loss(logits, labels):  # keyed as the C++ loss: the last layer's index
                with fplab.torch.layer(last):
                    return F.cross_entropy(logits, labels)

            py_out = os.path.join(folder, "python")
            results = fplab.torch.experiment(model, train, test, dict(epochs=1, batch=64, lr=0.001),
                                             ["cpu-seq", "h100"], ["impl", "control", "order"], replicas=2, out=py_out,
                                             name="crosscheck", class_names=data.class_names, loss_fn=loss,
                                             math="libm", progress=False)
            _, stderr = cpp.communicate()
            self.assertEqual(cpp.returncode, 0, stderr)

            mine, theirs = rows(os.path.join(py_out, "replicas.csv")), rows(os.path.join(cpp_out, "replicas.csv"))
            same = ("profile", "variant", "replica", "algo_seed", "impl_seed", "test_accuracy", "train_loss",
                    "predictions_sha256")
            self.assertEqual([{k: r[k] for k in same} for r in mine], [{k: r[k] for k in same} for r in theirs])
            with open(os.path.join(cpp_out, "summary.json")) as f:
                reference = json.load(f)["results"]
            for got, want in zip(results.summary["results"], reference):
                for key in ("profile", "variant", "replicas", "accuracy_mean", "accuracy_std", "churn_mean",
                            "churn_ci95_replicas", "per_class_std_max", "identical_replicas"):
                    self.assertEqual(got[key], want[key], f"{got['profile']} {got['variant']} {key}")
                # The same weights in another layout (PyTorch's (out, in) against fplab's (in, out)):
                # the distance between them is the same up to the order of its sums.
                self.assertAlmostEqual(got["l2_mean"], want["l2_mean"], delta=1e-12 + 1e-9 * want["l2_mean"])


if __name__ == "__main__":
    unittest.main()
