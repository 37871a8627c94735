"""fplab.reveal_sum: the order of a Python callable's sum, found by probing it.

A float32 loop written in Python is a sequential chain; NumPy's own sum of float32 (pairwise, with
eight accumulators below 128 terms) is fplab's numpy_pairwise, and replays bit for bit in fp32;
a sum in Python floats (fp64) is a chain whose replay needs the fp64 accumulator; something that
is not a sum is refused with fplab.Error.
"""

import unittest

import numpy as np

import fplab


def float32_loop(x):
    s = np.float32(0)
    for v in x:
        s = np.float32(s + v)
    return s


def float64_loop(x):
    # A written-out loop: Python 3.12's sum() of floats is compensated (Neumaier), not a plain fold.
    total = 0.0
    for v in x:
        total += float(v)
    return total


def rounded_product_loop(a, b):
    s = np.float32(0)
    for x, y in zip(a, b):
        s = np.float32(s + np.float32(x * y))
    return s


class RevealSum(unittest.TestCase):
    def test_a_python_loop_is_a_chain(self):
        r = fplab.reveal_sum(float32_loop, 20, verify=40)
        self.assertIn("all:seq", r["schedules"])
        self.assertEqual(r["tree"], "(" * 19 + "0+1)" + "".join(f"+{i})" for i in range(2, 20)))
        self.assertLessEqual(r["calls"], 3 * 20)
        self.assertEqual(r["replays"][0], {"arithmetic": "fp32 additions", "identical": 40, "trials": 40})

    def test_numpy_sum_is_numpy_pairwise(self):
        for n in (7, 100, 300):
            r = fplab.reveal_sum(lambda x: np.add.reduce(x, dtype=np.float32), n, verify=40)
            self.assertIn("all:numpy_pairwise", r["schedules"], n)
            self.assertEqual(r["replays"][0]["identical"], 40, n)
            self.assertTrue(r["dot"].startswith("digraph"))

    def test_fp64_accumulation_is_told_apart(self):
        r = fplab.reveal_sum(float64_loop, 16, verify=80)
        self.assertEqual(r["replays"][0]["arithmetic"], "fp64 accumulation, rounded to fp32 once")
        self.assertEqual(r["replays"][0]["identical"], 80)
        self.assertLess(r["replays"][1]["identical"], 80)

    def test_what_is_not_a_sum_is_refused(self):
        with self.assertRaises(fplab.Error) as caught:
            fplab.reveal_sum(lambda x: 2 * float(x[0]), 8)
        self.assertIn("not a count of 1s", str(caught.exception))
        self.assertNotIn("\n", str(caught.exception))
        with self.assertRaises(fplab.Error):
            fplab.reveal_sum(float32_loop, 1)

    def test_an_exception_in_the_function_passes_through(self):
        def broken(x):
            raise KeyError("inside")

        with self.assertRaises(KeyError):
            fplab.reveal_sum(broken, 8)


if __name__ == "__main__":
    unittest.main()


class RevealDot(unittest.TestCase):
    def test_a_loop_of_rounded_products(self):
        r = fplab.reveal_dot(rounded_product_loop, 12, verify=60)
        self.assertIn("all:seq", r["schedules"])
        self.assertEqual(r["replays"][0], {"arithmetic": "fp32, products rounded first", "identical": 60, "trials": 60})
        fused = next(p for p in r["replays"] if p["arithmetic"].startswith("fp32, products fused"))
        self.assertLess(fused["identical"], 60)

    def test_the_tree_as_data(self):
        r = fplab.reveal_dot(rounded_product_loop, 5)
        self.assertEqual([sorted(c) for c in r["nodes"]], [[0, 1], [2, 5], [3, 6], [4, 7]])  # children in any order
        self.assertEqual((r["root"], r["additions"], r["multi_term_nodes"], r["depth"]), (8, 4, 0, 4))

    def test_bad_n(self):
        with self.assertRaises(fplab.Error):
            fplab.reveal_dot(rounded_product_loop, 0)

    def test_an_nhwc_kernel_is_named_and_a_stored_tree_named_again(self):
        """A 3x3 convolution's output over 4 channels as an NHWC kernel adds it: by kernel position,
        channels inner, where the terms come in fplab's order (channel, position): cols(9)."""
        order = [c * 9 + p for p in range(9) for c in range(4)]

        def nhwc(a, b):
            acc = np.float32(0)
            for t in order:
                acc = np.float32(acc + np.float32(a[t] * b[t]))
            return acc

        r = fplab.reveal_dot(nhwc, 36)
        self.assertIn("cols(9) | all:seq", r["schedules"])
        self.assertEqual(fplab.name_tree(r["nodes"], 36), r["schedules"])
        self.assertEqual(fplab.name_tree([[0, 1], [4, 2], [5, 3]], 4)[0], "all:seq")
        for nodes, why in (([[0, 1], [4, 2]], "not one tree"), ([[0, 0], [4, 2], [5, 3]], "a child twice"),
                           ([[0, 7], [4, 2], [5, 3]], "not a term or an earlier node")):
            with self.assertRaisesRegex(fplab.Error, why):
                fplab.name_tree(nodes, 4)

    def test_a_time_limit_gives_up_in_one_line(self):
        import time

        def slow(a, b):
            time.sleep(0.005)
            return rounded_product_loop(a, b)
        start = time.monotonic()
        with self.assertRaisesRegex(fplab.Error, r"^gave up after \d+ calls: the time limit of 0.2 s") as caught:
            fplab.reveal_dot(slow, 300, seconds=0.2)
        self.assertLess(time.monotonic() - start, 2)  # a whole probe would take seconds
        self.assertNotIn("\n", str(caught.exception))
        self.assertEqual(fplab.reveal_dot(rounded_product_loop, 5, seconds=60)["tree"], "((((0+1)+2)+3)+4)")
        for bad in (-1, float("nan"), "1", True):
            with self.assertRaisesRegex(fplab.Error, "seconds must be 0"):
                fplab.reveal_dot(rounded_product_loop, 5, seconds=bad)

    def test_a_schedule_replays_what_no_single_arithmetic_does(self):
        # float FMA lanes, then a tail of float products added in double: the preset names the
        # tree, and only its replay, with its stages' formats, gives the function's bits every time
        def sdot(a, b):
            return fplab.dot(a, b, "openblas-sdot-haswell")

        r = fplab.reveal_dot(sdot, 100, verify=40)
        self.assertIn("openblas-sdot-haswell", r["schedules"])
        named = next(p for p in r["schedule_replays"] if p["schedule"] == "openblas-sdot-haswell")
        self.assertEqual(named, {"schedule": "openblas-sdot-haswell", "identical": 40, "trials": 40})
        self.assertLess(max(p["identical"] for p in r["replays"]), 40)
        self.assertEqual(fplab.reveal_dot(sdot, 100)["schedule_replays"], [])  # nothing replayed without verify



class RevealVarying(unittest.TestCase):
    """runs >= 2: a sum whose order changes per call, here blocks added in a fresh random order."""

    @staticmethod
    def blocks_in_random_order(block, seed=0):
        rng = np.random.default_rng(seed)

        def fn(x):
            partials = [float32_loop(x[k:k + block]) for k in range(0, len(x), block)]
            return float32_loop([partials[k] for k in rng.permutation(len(partials))])

        return fn

    def test_blocks_added_in_a_random_order(self):
        revealed = fplab.reveal_sum(self.blocks_in_random_order(8), 48, runs=6)
        self.assertTrue(revealed["varies"])
        self.assertEqual(revealed["parts"], [list(range(k, k + 8)) for k in range(0, 48, 8)])
        self.assertIn("contig(8):seq | all:atomic", revealed["schedules"])
        self.assertTrue(revealed["chain_of_parts"])
        self.assertEqual(set(revealed["parts_met"]), set(range(2, 7)))
        self.assertLess(revealed["uniform_order_distance"], 0.15)
        self.assertEqual(revealed["calls"] - sum(revealed["cross_meets"].values()) > 0, True)

    def test_a_deterministic_loop_is_one_part(self):
        revealed = fplab.reveal_sum(float32_loop, 20, runs=2)
        self.assertFalse(revealed["varies"])
        self.assertEqual(revealed["parts"], [list(range(20))])
        self.assertIn("all:seq", revealed["schedules"])

    def test_the_skeleton_replays_in_some_order(self):
        revealed = fplab.reveal_sum(self.blocks_in_random_order(8, seed=1), 32, runs=6, verify=10)
        best = revealed["replays"][0]
        self.assertEqual((best["arithmetic"], best["identical"], best["trials"]), ("fp32 additions", 10, 10))
        self.assertEqual((best["orders_per_trial"], best["every_order"]), (24, True))

    def test_bad_runs(self):
        with self.assertRaisesRegex(fplab.Error, "runs must be 0"):
            fplab.reveal_sum(float32_loop, 8, runs=1)
