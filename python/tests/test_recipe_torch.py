"""experiments/recipe_torch.py: one of fplab's experiment files trained in PyTorch.

- fplab._core.load_experiment_file reads a file as `fplab run` does: defaults filled in, a bad key
  refused in one line naming it;
- `run` of a small small_cnn recipe under h100-torch (IMPL, two replicas, so that its atomic weight
  gradients draw noise) gives what `fplab run` of the same file gives: per replica the same test
  predictions, accuracy and loss ($FPLAB_BINARY, as test_torch_crosscheck.py; skipped without it
  or without the data set);
- `diverge` trains the same pair in lockstep: its last distance is the run's distance between
  replicas 0 and 1 (summary.json), its per-tensor table has a row per parameter tensor and step,
  its per-layer table a row per layer output, output gradient and max-pool input and step;
- `run --algo-seed S` trains the recipe at another algo seed; `compare` of two such folders (native
  and h100-torch in each) prints a row per seed and the mean of the seeds' churn differences;
- `diverge --against PROFILE` trains each pair's second twin under another profile and says after
  which step the weights first differ (never, for a deterministic table against itself);
- a recipe whose last batch holds 32 images takes h100-torch's rule for that batch in both trainers
  (fplab.torch and the C++ Conv2d tell layer rules the batch), with the same predictions;
- `diverge --culprit NPZ` names and saves the block where two twins that started a step alike part
  (a weight gradient's order changed: that gradient alone), and says so when they never part;
- `run --math torch` trains with PyTorch's exp, log and loss (other weights than the default's,
  the C library's), and its summary says so in the profile's paragraph;
- what the script does not take (augmentation) is refused in one line before anything is trained.
"""

import contextlib
import csv
import io
import json
import os
import subprocess
import tempfile
import unittest

import numpy as np

from fplab_command import DATA, experiment_script, fplab_binary
from torch_reference import needs_torch, torch

if torch is not None:
    import fplab
    import fplab._core as core

RECIPE = """name = "recipe torch"
description = "small_cnn, a few steps"
[data]
train_subset = 192
[model]
name = "small_cnn"
[training]
epochs = 1
batch = 64
optimizer = "adam"
lr = 0.002
[run]
profiles = ["h100-torch"]
variants = ["impl"]
replicas = 2
"""


def shipped_h100_torch() -> str:
    """The text of the shipped profiles/shipped/h100-torch.toml (tests change a line of a copy)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "profiles", "shipped",
                           "h100-torch.toml")) as f:
        return f.read()


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@needs_torch
class ReadsTheFile(unittest.TestCase):
    def test_defaults_filled_in(self):
        with tempfile.TemporaryDirectory(prefix="fplab-recipe-") as folder:
            path = os.path.join(folder, "x.toml")
            with open(path, "w") as f:
                f.write('name = "x"\n[model]\nname = "mlp"\n[run]\nprofiles = ["h100"]\nvariants = ["impl"]\n')
            recipe = json.loads(core.load_experiment_file(path))
        self.assertEqual(recipe["name"], "x")
        self.assertEqual(recipe["training"]["batch"], 64)
        self.assertEqual(recipe["training"]["optimizer"], "adam")
        self.assertEqual(recipe["model"]["hidden"], [128])
        self.assertEqual(recipe["run"]["replicas"], 5)
        self.assertEqual(recipe["run"]["format"], "fp32")
        self.assertEqual(recipe["data"]["train_subset"], 0)

    def test_a_bad_key_in_one_line(self):
        with tempfile.TemporaryDirectory(prefix="fplab-recipe-") as folder:
            path = os.path.join(folder, "x.toml")
            with open(path, "w") as f:
                f.write('name = "x"\n[training]\nbatchsize = 3\n[run]\nprofiles = ["h100"]\nvariants = ["impl"]\n')
            with self.assertRaises(Exception) as caught:
                core.load_experiment_file(path)
        message = str(caught.exception)
        self.assertIn("batchsize", message)
        self.assertEqual(len(message.splitlines()), 1)


@needs_torch
@unittest.skipIf(not os.path.isdir(DATA), f"Fashion-MNIST is not in {DATA} (Debian: dataset-fashion-mnist)")
class AgreesWithFplabRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory(prefix="fplab-recipe-torch-")
        cls.toml = os.path.join(cls.folder.name, "recipe.toml")
        with open(cls.toml, "w") as f:
            f.write(RECIPE)
        cls.script = experiment_script("recipe_torch")
        cls.py_out = os.path.join(cls.folder.name, "python")
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            cls.rc = cls.script.main(["run", cls.toml, "--out", cls.py_out, "--data-dir", DATA])

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def _trained_both_ways(self, recipe: str, stem: str) -> tuple:
        """(recipe_torch.py run's folder, fplab run's folder) of the recipe text, written to STEM.toml
        (skips the test without the fplab binary)."""
        binary = fplab_binary()
        if binary is None:
            self.skipTest("no fplab binary: set FPLAB_BINARY or build the fplab target beside the package")
        toml = os.path.join(self.folder.name, f"{stem}.toml")
        with open(toml, "w") as f:
            f.write(recipe)
        py_out, cpp_out = os.path.join(self.folder.name, f"{stem}-py"), os.path.join(self.folder.name, f"{stem}-cpp")
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(self.script.main(["run", toml, "--out", py_out, "--data-dir", DATA]), 0)
        done = subprocess.run([binary, "run", toml, "--out", cpp_out, "--data-dir", DATA, "--quiet", "--jobs", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        return py_out, cpp_out

    def _against(self, first: str, second: str, out: str, *more: str) -> tuple:
        """(exit status, what it printed) of diverge: one pair, two steps, the second twin under
        `second`."""
        printed = io.StringIO()
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(printed):
            rc = self.script.main(["diverge", self.toml, "--profiles", first, "--against", second, "--pairs", "1",
                                   "--steps", "2", "--out", out, "--data-dir", DATA, *more])
        return rc, printed.getvalue()

    def test_same_replicas_as_fplab_run(self):
        binary = fplab_binary()
        if binary is None:
            self.skipTest("no fplab binary: set FPLAB_BINARY or build the fplab target beside the package")
        self.assertEqual(self.rc, 0)
        cpp_out = os.path.join(self.folder.name, "cpp")
        done = subprocess.run([binary, "run", self.toml, "--out", cpp_out, "--data-dir", DATA, "--quiet", "--jobs", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        # weights_sha256 is left out: the same values in PyTorch's layout ((out, in) matrices) hash
        # otherwise than in fplab's; the losses and every test prediction are compared instead.
        same = ("profile", "variant", "replica", "algo_seed", "impl_seed", "test_accuracy", "train_loss",
                "predictions_sha256")
        mine, theirs = rows(os.path.join(self.py_out, "replicas.csv")), rows(os.path.join(cpp_out, "replicas.csv"))
        self.assertEqual(len(mine), 2)
        self.assertEqual([{k: r[k] for k in same} for r in mine], [{k: r[k] for k in same} for r in theirs])
        self.assertNotEqual(mine[0]["weights_sha256"], mine[1]["weights_sha256"])  # the atomics drew noise

    def test_dropout_masks_follow_the_step(self):
        # fplab's dropout masks are keyed by the training step: an mlp with dropout trained both ways.
        py_out, cpp_out = self._trained_both_ways(
            RECIPE.replace('name = "small_cnn"', 'name = "mlp"\nhidden = [32]\ndropout = 0.3')
            .replace('profiles = ["h100-torch"]', 'profiles = ["cpu-seq"]'), "dropout")
        same = ("replica", "train_loss", "predictions_sha256")
        self.assertEqual([{k: r[k] for k in same} for r in rows(os.path.join(py_out, "replicas.csv"))],
                         [{k: r[k] for k in same} for r in rows(os.path.join(cpp_out, "replicas.csv"))])

    def test_diverge_ends_at_the_runs_distance(self):
        self.assertEqual(self.rc, 0)
        out = os.path.join(self.folder.name, "diverge.csv")
        table = io.StringIO()
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(table):
            rc = self.script.main(["diverge", self.toml, "--profiles", "h100-torch", "--pairs", "1", "--tensors", "2",
                                   "--out", out, "--data-dir", DATA])
        self.assertEqual(rc, 0)
        curve = rows(out)
        self.assertEqual([int(r["step"]) for r in curve], [1, 2, 3])  # 192 examples in batches of 64
        with open(os.path.join(self.py_out, "summary.json")) as f:
            l2 = json.load(f)["results"][0]["l2_mean"]  # two replicas: one pair
        self.assertGreater(l2, 0)
        self.assertAlmostEqual(float(curve[-1]["l2"]), l2, delta=1e-6 * l2)
        tensors = rows(os.path.join(self.folder.name, "diverge.tensors.csv"))
        self.assertEqual(len(tensors), 2 * 10)  # small_cnn's 10 parameter tensors, 2 steps
        first = [r for r in tensors if r["step"] == "1"]
        # Step 1 starts from the same weights: only the atomic weight gradients (28x28, 14x14) differ.
        self.assertEqual({r["tensor"] for r in first if int(r["gradient_differing"])},
                         {"blocks.0.weight", "blocks.3.weight"})
        self.assertIn("| h100-torch |", table.getvalue())
        layers = rows(os.path.join(self.folder.name, "diverge.layers.csv"))
        # small_cnn's 13 blocks: every output and its gradient, and the 3 max-pool inputs, for 2 steps
        self.assertEqual(len(layers), 2 * (13 * 2 + 3))
        first = [r for r in layers if r["step"] == "1"]
        # Step 1 starts from the same weights, and only weight gradients draw noise: no layer differs.
        self.assertEqual({int(r["differing"]) for r in first}, {0})
        self.assertEqual({r["window_flips"] for r in first if r["value"] == "input"}, {"0"})
        second = {(r["layer"], r["value"]): r for r in layers if r["step"] == "2"}
        self.assertGreater(int(second["0", "output"]["differing"]), 0)  # the weights parted after step 1
        short = os.path.join(self.folder.name, "short.csv")
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            rc = self.script.main(["diverge", self.toml, "--profiles", "h100-torch", "--pairs", "1", "--steps", "2",
                                   "--out", short, "--data-dir", DATA])
        self.assertEqual(rc, 0)
        self.assertEqual(rows(short), curve[:2])  # the same pair, stopped after two steps

    def test_diverge_against_another_profile(self):
        # --against: each pair's second twin under another profile. A deterministic table against
        # itself stays equal; against another it parts at step 1, and the tables say where.
        out = os.path.join(self.folder.name, "against.csv")
        rc, printed = self._against("h100-torch:deterministic", "h100-torch:deterministic", out, "--math", "torch")
        self.assertEqual(rc, 0)
        self.assertIn("h100-torch:deterministic, pair 0: weights equal throughout", printed)
        self.assertEqual({float(r["l2"]) for r in rows(out)}, {0.0})
        rc, printed = self._against("h100-torch:deterministic", "cpu-seq:deterministic", out, "--tensors", "1")
        self.assertEqual(rc, 0)
        label = "h100-torch:deterministic vs cpu-seq:deterministic"
        self.assertIn(f"{label}, pair 0: weights first differ after step 1 (epoch 0, batch 0 of 64 examples)",
                      printed)
        self.assertEqual({r["profile"] for r in rows(out)}, {label})
        tensors = rows(os.path.join(self.folder.name, "against.tensors.csv"))
        self.assertTrue(any(int(r["weight_differing"]) for r in tensors))
        errors = io.StringIO()
        with contextlib.redirect_stderr(errors):
            rc = self.script.main(["diverge", self.toml, "--profiles", "h100-torch", "--against", "no-such-chip",
                                   "--out", out, "--data-dir", DATA])
        self.assertEqual(rc, 2)
        self.assertIn("no-such-chip", errors.getvalue())
        self.assertEqual(len(errors.getvalue().strip().splitlines()), 1)

    def test_diverge_names_the_culprit(self):
        # --culprit: a copy of h100-torch whose deterministic 14x14 weight gradient is one chain parts
        # from h100-torch at step 1 in that gradient alone (block 3 of small_cnn), saved for a fit.
        shipped = shipped_h100_torch()
        rule = 'match = { layer = "conv", kernel = 3, height = 14 }\nwgrad = "strided(32):seq | all:shfl_down"'
        self.assertEqual(shipped.count(rule), 1)
        changed = os.path.join(self.folder.name, "one-chain.toml")
        with open(changed, "w") as f:
            f.write(shipped.replace(rule, rule.replace("strided(32):seq | all:shfl_down", "all:seq"))
                    .replace('name = "h100-torch"', 'name = "one-chain"', 1))
        out, saved = os.path.join(self.folder.name, "culprit.csv"), os.path.join(self.folder.name, "culprit.npz")
        rc, printed = self._against("h100-torch:deterministic", f"{changed}:deterministic", out, "--culprit", saved)
        self.assertEqual(rc, 0)
        self.assertIn("culprit at step 1: block 3 (conv2d(16->32, 3x3, stride 1, pad 1)), its gradient of "
                      "blocks.3.weight", printed)
        with np.load(saved) as culprit:
            self.assertEqual(str(culprit["what"]), "gradient of blocks.3.weight")
            self.assertEqual(culprit["input"].shape, (64, 16, 14, 14))
            self.assertEqual(culprit["output_gradient"].shape, (64, 32, 14, 14))
            self.assertEqual(culprit["parameter:weight"].shape, (32, 16, 3, 3))
            self.assertFalse(np.array_equal(culprit["twin0"], culprit["twin1"]))
        never = os.path.join(self.folder.name, "never.npz")
        rc, printed = self._against("h100-torch:deterministic", "h100-torch:deterministic", out, "--culprit", never)
        self.assertEqual(rc, 0)
        self.assertIn("no culprit: the twins never parted (nothing saved)", printed)
        self.assertFalse(os.path.exists(never))

    def test_math_torch_trains_otherwise(self):
        # --math torch: PyTorch's exp, log and loss instead of the C library's and fplab's C++ layer's.
        self.assertEqual(self.rc, 0)
        out = os.path.join(self.folder.name, "math-torch")
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            rc = self.script.main(["run", self.toml, "--out", out, "--data-dir", DATA, "--math", "torch"])
        self.assertEqual(rc, 0)
        libm, mine = rows(os.path.join(self.py_out, "replicas.csv")), rows(os.path.join(out, "replicas.csv"))
        self.assertNotEqual([r["weights_sha256"] for r in mine], [r["weights_sha256"] for r in libm])
        with open(os.path.join(out, "summary.json")) as f:
            description = json.load(f)["description"]
        self.assertIn("Profile h100-torch: emulated by fplab.torch, exp, log and the loss: torch.", description)

    def test_a_last_batch_of_32_takes_its_rule(self):
        # 224 examples in batches of 64 end with 32 images, whose 14x14 bias gradient h100-torch
        # sums in PyTorch's small form (a rule naming the batch). Both trainers tell the rules the
        # batch: without the rule (its batch made 33) each gives other weights, and with it the
        # two give the same predictions.
        shipped = shipped_h100_torch()
        self.assertEqual(shipped.count('height = 14, batch = 32 }'), 2)  # both modes
        without = os.path.join(self.folder.name, "no-rule.toml")
        with open(without, "w") as f:
            f.write(shipped.replace('name = "h100-torch"', 'name = "no-rule"', 1)
                    .replace('height = 14, batch = 32 }', 'height = 14, batch = 33 }'))
        py_out, cpp_out = self._trained_both_ways(
            RECIPE.replace("train_subset = 192", "train_subset = 224")
            .replace('profiles = ["h100-torch"]', f'profiles = ["h100-torch", "{without}"]')
            .replace('variants = ["impl"]', 'variants = ["control"]'), "last32")
        for out in (py_out, cpp_out):
            first = {r["profile"]: r["weights_sha256"] for r in rows(os.path.join(out, "replicas.csv"))
                     if r["replica"] == "0"}
            self.assertEqual(len(first), 2)
            self.assertNotEqual(*first.values())  # the rule moved the last step's bias gradient
        same = ("profile", "replica", "train_loss", "predictions_sha256")
        self.assertEqual([{k: r[k] for k in same} for r in rows(os.path.join(py_out, "replicas.csv"))],
                         [{k: r[k] for k in same} for r in rows(os.path.join(cpp_out, "replicas.csv"))])

    def test_compare_over_algo_seeds(self):
        self.assertEqual(self.rc, 0)
        folders, summaries = [], []
        for seed in (2, 3):
            out = os.path.join(self.folder.name, f"seed-{seed}")
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                rc = self.script.main(["run", self.toml, "--algo-seed", str(seed), "--profiles", "native,h100-torch",
                                       "--out", out, "--data-dir", DATA])
            self.assertEqual(rc, 0)
            self.assertEqual({r["algo_seed"] for r in rows(os.path.join(out, "replicas.csv"))}, {str(seed)})
            with open(os.path.join(out, "summary.json")) as f:
                summaries.append({g["profile"]: g["churn_mean"] for g in json.load(f)["results"]})
            folders.append(out)
        table = io.StringIO()
        with contextlib.redirect_stdout(table):
            self.assertEqual(self.script.main(["compare"] + folders), 0)
        text = table.getvalue()
        self.assertIn("\n| 2 | ", text)
        self.assertIn("\n| 3 | ", text)
        differences = [s["h100-torch"] - s["native"] for s in summaries]
        self.assertIn("\n| h100-torch | 2 | ", text)
        # The mean of the seeds' differences and its t interval (one degree of freedom: 12.706).
        mean, low, high = core.paired_t_interval(differences)
        self.assertAlmostEqual(high - mean, 12.7062047 * abs(differences[0] - differences[1]) / 2, delta=1e-9)
        self.assertIn(f"| {100 * mean:+.2f} [{100 * low:+.2f}, {100 * high:+.2f}] |", text)
        other = os.path.join(self.folder.name, "other-experiment")
        os.makedirs(other)
        with open(os.path.join(folders[1], "summary.json")) as f:
            changed = json.load(f)
        self.assertIn("TF32 in cuDNN's convolutions off.", changed["description"])
        changed["description"] = changed["description"].replace("convolutions off.", "convolutions on.")
        with open(os.path.join(other, "summary.json"), "w") as f:
            json.dump(changed, f)
        with contextlib.redirect_stderr(io.StringIO()) as errors:
            self.assertEqual(self.script.main(["compare", folders[0]]), 2)  # one seed is no comparison
            self.assertEqual(self.script.main(["compare", folders[0], folders[0]]), 2)  # a seed given twice
            self.assertEqual(self.script.main(["compare", folders[0], other]), 2)  # another experiment
            self.assertEqual(self.script.main(["run", self.toml, "--algo-seed", "-1", "--out",
                                               os.path.join(self.folder.name, "bad"), "--data-dir", DATA]), 2)
        self.assertIn("a folder is given twice", errors.getvalue())
        self.assertIn("another experiment", errors.getvalue())
        self.assertIn("a seed is 0 to 2^63 - 1", errors.getvalue())
        # A profile rerun alone at seed 2 (its folder has no native replicas, so no "Profile native"
        # paragraph) replaces the first run's with --later-wins, and the table says so.
        rerun = os.path.join(self.folder.name, "rerun-seed-2")
        os.makedirs(rerun)
        with open(os.path.join(folders[0], "summary.json")) as f:
            alone = json.load(f)
        self.assertIn("\n\nProfile native: ", alone["description"])
        alone["description"] = alone["description"].split("\n\nProfile ")[0]
        alone["results"] = [dict(g, churn_mean=0.5) for g in alone["results"] if g["profile"] == "h100-torch"]
        with open(os.path.join(rerun, "summary.json"), "w") as f:
            json.dump(alone, f)
        with contextlib.redirect_stderr(io.StringIO()) as errors:
            self.assertEqual(self.script.main(["compare"] + folders + [rerun]), 2)
        self.assertIn("impl replicas in two folders", errors.getvalue())
        table = io.StringIO()
        with contextlib.redirect_stdout(table):
            self.assertEqual(self.script.main(["compare", "--later-wins"] + folders + [rerun]), 0)
        self.assertIn(f"h100-torch at seed 2: {rerun}'s, not {folders[0]}'s", table.getvalue())
        self.assertIn("\n| 2 | ", table.getvalue())
        self.assertIn("\n| 2 | 0.00 [0.00, 0.00] | 50.00 [", table.getvalue())  # the rerun's churn
        # ... but not a reference that ran elsewhere: its Profile paragraph must match the other seeds'
        elsewhere = os.path.join(self.folder.name, "elsewhere-seed-3")
        os.makedirs(elsewhere)
        with open(os.path.join(folders[1], "summary.json")) as f:
            moved = json.load(f)
        moved["description"] = moved["description"].replace("\n\nProfile native: ", "\n\nProfile native: another GPU, ")
        with open(os.path.join(elsewhere, "summary.json"), "w") as f:
            json.dump(moved, f)
        with contextlib.redirect_stderr(io.StringIO()) as errors:
            self.assertEqual(self.script.main(["compare", folders[0], elsewhere]), 2)
            self.assertEqual(self.script.main(["compare", "--later-wins", folders[0], folders[1], folders[0]]), 2)
        self.assertIn("profile 'native' ran with other software", errors.getvalue())
        self.assertIn("a folder is given twice", errors.getvalue())

    def test_augmentation_is_refused(self):
        path = os.path.join(self.folder.name, "augmented.toml")
        with open(path, "w") as f:
            f.write(RECIPE.replace("train_subset = 192", "train_subset = 192\naugment_pad = 2"))
        errors = io.StringIO()
        with contextlib.redirect_stderr(errors):
            rc = self.script.main(["run", path, "--out", os.path.join(self.folder.name, "never"), "--data-dir", DATA])
        self.assertEqual(rc, 2)
        self.assertIn("augmentation", errors.getvalue())
        self.assertEqual(len(errors.getvalue().strip().splitlines()), 1)
        self.assertFalse(os.path.exists(os.path.join(self.folder.name, "never")))


if __name__ == "__main__":
    unittest.main()
