"""experiments/atomic_groups_torch.py on the CPU: the probe's three part values give three sums, its
groups are read back as rectangles, and under a profile it finds the groups fplab's engine draws
one order for (a GEMM's 4 x 64 output blocks: every output channel by 4 of (input channel, tap) in
a weight gradient, whose GEMM is (C*9) x C_out); natively on the CPU nothing varies; bad input is
one line."""

import contextlib
import io
import json
import os
import tempfile
import unittest

import numpy as np

from fplab_command import experiment_script
from torch_reference import needs_torch


class Helpers(unittest.TestCase):
    def setUp(self):
        self.script = experiment_script("atomic_groups_torch")

    def test_three_orders_three_sums(self):
        a, b, c = (np.float32(v) for v in self.script.part_values())
        sums = [self.script.sum_last(a, b, c, last) for last in range(3)]
        self.assertEqual(len({float(s) for s in sums}), 3)
        # the sum with part 2 last, by hand: (1 + 2^-24) rounds to 1 (a tie to even), then 1 - 1.5 * 2^-24
        self.assertEqual(float(sums[2]), float(np.float32(1) - np.float32(2.0 ** -23)))

    def test_groups_and_shapes(self):
        # 2 rows x 4 columns: rows' first halves one history, second halves another, one odd output
        histories = [(0, 1), (0, 1), (2, 2), (2, 2), (0, 1), (0, 1), (2, 2), (1, 1)]
        groups = self.script.groups_of(histories)
        self.assertEqual(groups, [[0, 1, 4, 5], [2, 3, 6], [7]])
        shapes = self.script.describe(groups, rows=2, cols=4)
        self.assertEqual(shapes["groups"], 3)
        self.assertEqual(shapes["rectangles"], 2)
        self.assertEqual(shapes["shapes"], {"2x2": 1, "other (3 outputs)": 1, "1x1": 1})


@needs_torch
class Probe(unittest.TestCase):
    def run_probe(self, *argv):
        script = experiment_script("atomic_groups_torch")
        with tempfile.TemporaryDirectory() as folder:
            table = io.StringIO()
            with contextlib.redirect_stdout(table):
                rc = script.main(["run", "--out", folder, *argv])
            self.assertEqual(rc, 0)
            with open(os.path.join(folder, "groups.jsonl")) as f:
                return [json.loads(line) for line in f], table.getvalue()

    def test_fplab_draws_one_order_per_output_block(self):
        rows, table = self.run_probe("--profile", "h100-torch", "--layers", "16x16x32x3x1x1x14", "--images",
                                     "0,1,2", "--runs", "8")
        (row,) = rows
        self.assertEqual(row["outputs"], 32 * 16 * 9)
        self.assertEqual(row["outputs_varying"], row["outputs"])  # a uniform draw moves every weight
        self.assertEqual(row["shapes"], {"32x4": 36})  # 144 columns of (channel, tap) in blocks of 4
        self.assertNotIn("-1", row["labels"])  # every sum is a fold of the three parts
        self.assertIn("| 16x16x32x3x1x1x14 | 0,1,2 | fplab h100-torch |", table)

    def test_native_cpu_kernel_does_not_vary(self):
        rows, _ = self.run_probe("--layers", "16x1x4x3x1x1x12", "--images", "3,7,9", "--runs", "3")
        self.assertEqual(rows[0]["outputs_varying"], 0)
        self.assertEqual(rows[0]["groups"], 1)

    def test_bad_input_is_one_line(self):
        script = experiment_script("atomic_groups_torch")
        for argv, expected in ((["--layers", "16x1"], "BATCHxCINxCOUT"), (["--images", "0,1"], "three distinct"),
                               (["--images", "0,1,99"], "three distinct"), (["--profile", "nosuch"], "--profile"),
                               (["--runs", "1"], "at least 2")):
            with self.subTest(argv=argv), tempfile.TemporaryDirectory() as folder:
                err = io.StringIO()
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    try:
                        rc = script.main(["run", "--out", folder, *argv])
                    except SystemExit as stop:
                        print(stop.code, file=err)
                        rc = 1
                self.assertNotEqual(rc, 0)
                self.assertIn(expected, err.getvalue())
                self.assertEqual(len(err.getvalue().strip().splitlines()), 1)
                self.assertFalse(os.path.exists(os.path.join(folder, "groups.jsonl")))


if __name__ == "__main__":
    unittest.main()
