#!/usr/bin/env python3
"""What a hostile or careless input must not do to fplab: run a program through a shell, put a file
outside the output folder, crash, or train silently on nonsense. Every case here failed on the
code before issue 15 was fixed.

Usage: test_cli_safety.py PATH/TO/fplab PATH/TO/SOURCE-TREE
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

FPLAB = None
SOURCE = None

HOSTILE_NAMES = ["x';touch INJECTED;'", 'q"uote$(touch INJECTED)', "sp ace;touch INJECTED", "new\nline",
                 "`touch INJECTED`"]


def run(*args, cwd=None, timeout=300, env=None):
    return subprocess.run([FPLAB, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def one_error_line(test, r, *fragments):
    test.assertEqual(r.returncode, 2, f"exit {r.returncode}, stderr {r.stderr!r}")
    lines = r.stderr.strip().splitlines()
    test.assertEqual(len(lines), 1, f"stderr is not one line: {r.stderr!r}")
    test.assertTrue(lines[0].startswith("fplab: error: "), lines[0])
    for f in fragments:
        test.assertIn(f, lines[0])
    return lines[0]


def all_files(folder):
    found = set()
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(root, name), folder))
    return found


TINY = """name = "{name}"
[data]
train_subset = 200
[model]
name = "mlp"
hidden = [8]
[training]
epochs = 1
batch = 50
[run]
profiles = {profiles}
variants = ["impl"]
replicas = 2
"""


class NoShell(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_hostile_file_names_run_nothing_and_land_where_asked(self):
        for i, name in enumerate(HOSTILE_NAMES):
            svg, png = f"{name}.{i}.svg", f"{name}.{i}.png"
            r = run("tree", "--schedule", "contig(4):seq | all:shfl_down", "--n", "16", "--svg", svg, cwd=self.dir)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run("explore", "--schedule", "splitk-atomic(4)", "--gen", "normal:64", "--trials", "20", "--plot", png,
                    cwd=self.dir)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.isfile(os.path.join(self.dir, svg)), svg)
            self.assertTrue(os.path.isfile(os.path.join(self.dir, png)), png)
        files = all_files(self.dir)
        self.assertFalse(any(os.path.basename(f).startswith("INJECTED") for f in files), files)
        self.assertEqual(len(files), 2 * len(HOSTILE_NAMES), files)  # no temporary left behind

    def test_a_missing_folder_is_one_line_and_no_stray_output(self):
        r = run("tree", "--schedule", "numpy", "--n", "16", "--svg", "nowhere/t.svg", cwd=self.dir)
        one_error_line(self, r, "nowhere/t.svg")
        self.assertEqual(all_files(self.dir), set())

    def test_hostile_experiment_name_stays_inside_results(self):
        work = os.path.join(self.dir, "work")
        os.makedirs(work)
        name = "../../escaped'; touch INJECTED; $(touch INJECTED2)"
        path = os.path.join(work, "e.toml")
        with open(path, "w") as f:
            f.write(TINY.format(name=name.replace('"', '\\"'), profiles='["h100"]'))
        r = run("run", "e.toml", "--quiet", "--json", cwd=work)
        self.assertEqual(r.returncode, 0, r.stderr)
        outside = all_files(self.dir)
        self.assertFalse(any(os.path.basename(f).startswith("INJECTED") for f in outside), outside)
        self.assertFalse(any(f.startswith("escaped") for f in outside), outside)
        results = os.listdir(os.path.join(work, "results"))
        self.assertEqual(len(results), 1)
        self.assertNotIn("/", results[0])
        self.assertFalse(results[0].startswith("."))


class Profiles(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_a_profile_by_path_trains_every_replica(self):
        mine = os.path.join(self.dir, "exp", "my gpu.toml")
        os.makedirs(os.path.dirname(mine))
        with open(os.path.join(SOURCE, "profiles", "shipped", "v100.toml")) as f:
            text = f.read().replace('name = "v100"', 'name = "mygpu"')
        with open(mine, "w") as f:
            f.write(text)
        exp = os.path.join(self.dir, "exp", "e.toml")
        with open(exp, "w") as f:  # relative to the experiment file, as it travels with it
            f.write(TINY.format(name="bypath", profiles='["my gpu.toml", "v100"]'))
        out = os.path.join(self.dir, "out")
        r = run("run", exp, "--out", out, "--quiet", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        summary = json.loads(r.stdout)
        self.assertEqual(len(summary["results"]), 2)
        by_profile = {g["profile"]: g for g in summary["results"]}
        # The same device facts under another name give the same replicas.
        [path_group] = [g for p, g in by_profile.items() if p.endswith("my gpu.toml")]
        self.assertEqual(path_group["accuracy_mean"], by_profile["v100"]["accuracy_mean"])
        self.assertEqual(len(os.listdir(os.path.join(out, "replicas"))), 4)

    def test_a_moved_binary_still_knows_the_shipped_profiles(self):
        moved = os.path.join(self.dir, "bin", "fplab")
        os.makedirs(os.path.dirname(moved))
        shutil.copy(FPLAB, moved)
        env = {k: v for k, v in os.environ.items() if k != "FPLAB_HW_PROFILES"}
        r = subprocess.run([moved, "profile", "show", "h100", "--json"], capture_output=True, text=True, env=env,
                           cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["name"], "h100")

    def test_user_folders_come_first_and_do_not_hide_the_shipped_ones(self):
        folder = os.path.join(self.dir, "mine")
        os.makedirs(folder)
        with open(os.path.join(SOURCE, "profiles", "shipped", "v100.toml")) as f:
            text = f.read()
        with open(os.path.join(folder, "h100.toml"), "w") as f:  # overrides the shipped h100
            f.write(text.replace('name = "v100"', 'name = "h100"'))
        with open(os.path.join(folder, "toy.toml"), "w") as f:
            f.write(text.replace('name = "v100"', 'name = "toy"'))
        r = run("profile", "list", "--json", "--profiles-dir", folder)
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = {p["name"]: p["path"] for p in json.loads(r.stdout)["profiles"]}
        self.assertIn("v100", listed)  # shipped, still there
        self.assertTrue(listed["toy"].startswith(folder))
        self.assertTrue(listed["h100"].startswith(folder))


class OutputFolder(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.exp = os.path.join(self.dir, "e.toml")
        with open(self.exp, "w") as f:
            f.write(TINY.format(name="first", profiles='["h100"]'))
        self.other = os.path.join(self.dir, "o.toml")
        with open(self.other, "w") as f:
            f.write(TINY.format(name="second", profiles='["h100"]'))
        self.out = os.path.join(self.dir, "out")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_results_are_never_mixed_or_overwritten_silently(self):
        self.assertEqual(run("run", self.exp, "--out", self.out, "--quiet").returncode, 0)
        one_error_line(self, run("run", self.exp, "--out", self.out, "--quiet"), "--resume")
        one_error_line(self, run("run", self.other, "--out", self.out, "--quiet"), "'first'", "--force")
        self.assertEqual(run("run", self.exp, "--out", self.out, "--quiet", "--resume").returncode, 0)
        self.assertEqual(run("run", self.other, "--out", self.out, "--quiet", "--force").returncode, 0)
        stranger = os.path.join(self.dir, "stranger")
        os.makedirs(stranger)
        open(os.path.join(stranger, "thesis.tex"), "w").close()
        one_error_line(self, run("run", self.exp, "--out", stranger, "--quiet"), "not empty")

    def test_resume_removes_what_a_killed_run_left(self):
        self.assertEqual(run("run", self.exp, "--out", self.out, "--quiet").returncode, 0)
        partial = os.path.join(self.out, "replicas", ".h100.impl.0.ckpt.tmp.999.0")
        render = os.path.join(self.out, "figures", ".fplab-render-abcdef")
        open(partial, "w").close()
        os.makedirs(render)
        r = run("run", self.exp, "--out", self.out, "--resume")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(partial))
        self.assertFalse(os.path.exists(render))

    def test_two_runs_on_one_folder_cannot_both_write(self):
        slow = os.path.join(self.dir, "slow.toml")
        with open(slow, "w") as f:
            f.write(TINY.format(name="first", profiles='["h100"]').replace("train_subset = 200", "train_subset = 30000")
                    .replace("epochs = 1", "epochs = 10").replace("hidden = [8]", "hidden = [256]"))
        first = subprocess.Popen([FPLAB, "run", slow, "--out", self.out, "--quiet"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            # Wait until the first run holds the folder (its marker is written after the lock).
            for _ in range(600):
                if os.path.exists(os.path.join(self.out, ".fplab-experiment")):
                    break
                if first.poll() is not None:
                    break
                subprocess.run(["sleep", "0.05"])
            self.assertIsNone(first.poll(), "the first run ended before the second could try")
            r = run("run", slow, "--out", self.out, "--quiet", "--resume")
            one_error_line(self, r, "another fplab run")
        finally:
            first.kill()
            first.wait()

    def test_jobs_beyond_what_the_system_gives_are_clamped(self):
        r = run("run", self.exp, "--out", self.out, "--jobs", "100000", "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr)


class KillAndResume(unittest.TestCase):
    """A run killed (SIGKILL) anywhere resumes to the same bits as one never interrupted."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.exp = os.path.join(self.dir, "e.toml")
        with open(self.exp, "w") as f:
            f.write(TINY.format(name="k", profiles='["v100"]').replace('variants = ["impl"]',
                                                                       'variants = ["impl", "algo"]')
                    .replace("replicas = 2", "replicas = 3").replace("train_subset = 200", "train_subset = 1500"))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def hashes(self, out):
        with open(os.path.join(out, "replicas.csv")) as f:
            rows = [line.split(",") for line in f.read().strip().splitlines()]
        header = rows[0]
        keep = [header.index(k) for k in ("profile", "variant", "replica", "weights_sha256", "predictions_sha256")]
        return sorted(tuple(r[i] for i in keep) for r in rows[1:])

    def test_killed_at_any_point_resumes_to_the_same_bits(self):
        whole = os.path.join(self.dir, "whole")
        r = run("run", self.exp, "--out", whole, "--quiet", "--jobs", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        reference = self.hashes(whole)
        for i, delay in enumerate([0.05, 0.3, 0.8, 1.5]):
            out = os.path.join(self.dir, f"killed{i}")
            p = subprocess.Popen([FPLAB, "run", self.exp, "--out", out, "--quiet", "--jobs", "2"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                p.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            r = run("run", self.exp, "--out", out, "--quiet", "--resume", "--jobs", "2")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.hashes(out), reference, f"killed after {delay} s")
            leftovers = [f for f in all_files(out) if ".tmp." in f or "fplab-render-" in f]
            self.assertEqual(leftovers, [])


class Numbers(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_training_numbers_out_of_range_are_refused_on_the_command_line(self):
        base = ["train", "--model", "mlp", "--train-subset", "100"]
        for option, value in [("--momentum", "nan"), ("--weight-decay", "inf"), ("--lr", "1e308"), ("--lr", "-1"),
                              ("--lr", "nan"), ("--dropout", "1"), ("--augment-pad", "1073741824"),
                              ("--hidden", "0"), ("--impl-seed", "-1"), ("--algo-seed", "99999999999999999999999"),
                              ("--epochs", "-1"), ("--lr-decay-factor", "0")]:
            one_error_line(self, run(*base, option, value), option)

    def test_the_same_numbers_are_refused_in_experiment_files(self):
        cases = [("[training]\nlr = nan\n", "training.lr"), ("[training]\nlr = -1.0\n", "training.lr"),
                 ("[training]\nmomentum = inf\n", "training.momentum"),
                 ("[data]\nimbalance_class = 260\n", "data.imbalance_class"),
                 ("[data]\naugment_pad = 4294967297\n", "data.augment_pad"),
                 ("[model]\ndropout = 1.5\n", "model.dropout"), ("[run]\nimpl_seed = -1\n", "run.impl_seed")]
        for i, (section, key) in enumerate(cases):
            path = os.path.join(self.dir, f"e{i}.toml")
            text = 'name = "n"\n' + section
            if "[run]" not in section:
                text += '[run]\nprofiles = ["h100"]\n'
            else:
                text += 'profiles = ["h100"]\n'
            with open(path, "w") as f:
                f.write(text)
            one_error_line(self, run("run", path, "--out", os.path.join(self.dir, f"o{i}")), key)

    def test_a_class_the_data_does_not_have_is_refused(self):
        path = os.path.join(self.dir, "e.toml")
        with open(path, "w") as f:
            f.write(TINY.format(name="n", profiles='["h100"]').replace("[data]\n", "[data]\nimbalance_class = 200\n"))
        one_error_line(self, run("run", path, "--out", os.path.join(self.dir, "o")), "class 200")

    def test_diverge_refuses_a_replica_the_experiment_does_not_have(self):
        path = os.path.join(self.dir, "e.toml")
        with open(path, "w") as f:
            f.write(TINY.format(name="n", profiles='["h100"]'))
        one_error_line(self, run("diverge", path, "--pair", "0", "99"), "replica 99")

    def test_config_keys_are_spelled_as_in_experiment_files(self):
        config = os.path.join(self.dir, "c.toml")
        with open(config, "w") as f:
            f.write("train_subset = 200\nhidden = [8]\nweight_decay = 0.0\n")
        r = run("train", "--config", config, "--json", "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(config, "w") as f:
            f.write("train_subset = 200\nlr = nan\n")
        one_error_line(self, run("train", "--config", config), "--lr")

    def test_a_checkpoint_resumes_only_the_exact_same_run(self):
        ckpt = os.path.join(self.dir, "c.ckpt")
        base = ["train", "--model", "mlp", "--hidden", "8", "--train-subset", "200", "--checkpoint", ckpt, "--quiet",
                "--optimizer", "sgd"]
        same = {"--lr": "0.001", "--momentum": "0.9", "--weight-decay": "0", "--dropout": "0"}
        flat = [x for kv in same.items() for x in kv]
        self.assertEqual(run(*base, *flat).returncode, 0)
        self.assertEqual(run(*base, *flat, "--resume").returncode, 0)  # the same run resumes
        # Values equal to six decimals used to print the same fingerprint and resume.
        for option, value in [("--lr", "0.0010004"), ("--momentum", "0.9000001"), ("--weight-decay", "1e-7"),
                              ("--dropout", "1e-9")]:
            changed = dict(same, **{option: value})
            args = base + [x for kv in changed.items() for x in kv] + ["--resume"]
            one_error_line(self, run(*args), "different run")


class Version(unittest.TestCase):
    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout.strip(), r"^fplab \d+\.\d+\.\d+")


if __name__ == "__main__":
    FPLAB = os.path.abspath(sys.argv.pop(1))
    SOURCE = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=1)
