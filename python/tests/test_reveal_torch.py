"""experiments/reveal_torch.py on the CPU: PyTorch's own kernels (here Debian's torch 1.13, MKL and
oneDNN) revealed through fplab.reveal_dot, replayed bit for bit, written as one JSON line each and
tabled; an unknown op refused with one line before anything is written.

On the GPU machine the same script reveals cuBLAS and cuDNN (scripts/gpu-check --only reveal;
docs/results/reveal_torch.md).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from torch_reference import needs_torch

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "reveal_torch.py")


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


@needs_torch
class RevealTorchOnTheCpu(unittest.TestCase):
    def test_kernels_are_revealed_and_replayed(self):
        with tempfile.TemporaryDirectory() as out:
            done = run_script("run", "--device", "cpu", "--ops", "sum,mm,linear_fwd,linear_dgrad,conv_fwd", "--max-n", "300",
                              "--modes", "default", "--tf32", "off", "--verify", "12", "--repeat", "2", "--out", out)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(os.path.join(out, "reveal.jsonl")) as f:
                rows = [json.loads(line) for line in f]
            ops = {r["op"] for r in rows}
            self.assertEqual(ops, {"sum", "linear_fwd", "linear_dgrad", "conv_fwd"})  # mm's K is over 300
            for r in rows:
                self.assertNotIn("error", r, r["key"])
                self.assertEqual(r["additions"], r["n"] - 1, r["key"])
                self.assertEqual(r["replays"][0]["identical"], 12, r["key"])
                self.assertEqual(r["run_to_run_differ"], 0, r["key"])
                if r["op"] != "sum":
                    self.assertEqual(r["factor_conversion"], "fp32", r["key"])
                    self.assertEqual(r["replays"][0]["arithmetic"], "fp32, products fused (FMA) onto the partial sum")
            # small_cnn's first convolution: 9 terms (1 channel, 3x3), one chain
            first = next(r for r in rows if r["key"] == "conv_fwd-64x1->16k3s1@28-default-tf32off")
            self.assertEqual(first["n"], 9)
            self.assertEqual(first["depth"], 8)
            again = run_script("run", "--device", "cpu", "--ops", "sum", "--max-n", "300", "--modes", "default",
                               "--tf32", "off", "--resume", "--out", out)
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertNotIn("calls", again.stdout)  # every target was there already
            table = run_script("table", out)
            self.assertEqual(table.returncode, 0, table.stderr)
            lines = table.stdout.splitlines()
            self.assertEqual(len(lines), 2 + len(rows))
            self.assertTrue(all(line.count(" | ") == 12 for line in lines[2:]), lines[2:4])  # '|' in schedules escaped
            renamed = run_script("table", "--rename", out)  # the stored trees named again: the same names
            self.assertEqual(renamed.returncode, 0, renamed.stderr)
            self.assertEqual(renamed.stdout, table.stdout)

    def test_a_weight_gradient_of_some_images_of_a_batch(self):
        # --wgrad-images: the kernel of batch 4, the terms of images 1 and 3 only (2 x 196 pixels)
        with tempfile.TemporaryDirectory() as out:
            done = run_script("run", "--device", "cpu", "--ops", "conv_wgrad", "--modes", "default", "--tf32", "off",
                              "--batch", "4", "--shapes", "conv_wgrad-4x16->32", "--wgrad-images", "1,3",
                              "--max-n", "2000", "--verify", "4", "--repeat", "1", "--out", out)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(os.path.join(out, "reveal.jsonl")) as f:
                rows = [json.loads(line) for line in f]
            self.assertEqual([r["key"] for r in rows], ["conv_wgrad-4x16->32k3s1@14+images1.3-default-tf32off"])
            self.assertEqual(rows[0]["n"], 2 * 14 * 14)
            self.assertEqual(rows[0]["replays"][0]["identical"], 4)
            bad = run_script("run", "--device", "cpu", "--ops", "conv_wgrad", "--wgrad-images", "1,1",
                             "--out", os.path.join(out, "r"))
            self.assertEqual(bad.returncode, 2)
            self.assertIn("distinct image indices", bad.stderr)
            self.assertFalse(os.path.exists(os.path.join(out, "r")))

    def test_a_probe_past_the_budget_is_recorded_as_given_up(self):
        with tempfile.TemporaryDirectory() as out:
            common = ["run", "--device", "cpu", "--ops", "sum", "--shapes", "sum-1000", "--modes", "default",
                      "--tf32", "off", "--verify", "100000000", "--repeat", "1", "--out", out]
            # 10^8 replays: far past 4 s anywhere (10^6 were not, on a 16-core Xeon)
            stopped = run_script(*common, "--budget", "4")
            self.assertEqual(stopped.returncode, 1, stopped.stderr)
            self.assertIn("recorded as given up", stopped.stdout)
            with open(os.path.join(out, "reveal.jsonl")) as f:
                rows = [json.loads(line) for line in f]
            self.assertTrue(rows[-1]["gave_up"], rows[-1])
            self.assertIn("gave up after", rows[-1]["error"])
            skipped = run_script(*common, "--resume")
            self.assertEqual(skipped.returncode, 0, skipped.stderr)
            self.assertNotIn("calls", skipped.stdout)  # a given-up target is not probed again unasked
            common[common.index("--verify") + 1] = "4"
            again = run_script(*common, "--resume", "--retry-gave-up")
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertIn(rows[-1]["key"] + ": n=", again.stdout)
            table = run_script("table", out)
            self.assertNotIn("gave up", table.stdout)  # the newest row of each target

    def test_bad_input_is_one_line(self):
        with tempfile.TemporaryDirectory() as out:
            done = run_script("run", "--device", "cpu", "--ops", "sum,matmul", "--out", os.path.join(out, "r"))
            self.assertEqual(done.returncode, 2)
            self.assertEqual(done.stderr.strip().count("\n"), 0, done.stderr)
            self.assertIn("unknown op 'matmul'", done.stderr)
            self.assertFalse(os.path.exists(os.path.join(out, "r")))
            cpu = run_script("kernels", "--device", "cpu", "--ops", "conv_wgrad")
            self.assertEqual(cpu.returncode, 2)
            self.assertEqual(cpu.stderr.strip().count("\n"), 0, cpu.stderr)
            self.assertIn("--device cuda only", cpu.stderr)
            missing = run_script("table", os.path.join(out, "nothing"))
            self.assertEqual(missing.returncode, 2)
            self.assertIn("no such file", missing.stderr)


if __name__ == "__main__":
    unittest.main()
