#!/usr/bin/env python3
"""The fplab command-line contract: one-line errors with exit code 2, JSON consistent with an
independent exact computation (Python's fractions), atomic output files, --help with examples.

Usage: test_cli.py PATH/TO/fplab
"""
import csv
import json
import os
import random
import re
import shutil
import struct
import subprocess
import time
import sys
import tempfile
import unittest
from fractions import Fraction

FPLAB = None


def run(*args, stdin=None, timeout=120):
    return subprocess.run([FPLAB, *args], input=stdin, capture_output=True, text=True, timeout=timeout)


def bf16_value(bits):  # bf16 is the top half of an fp32 pattern
    return struct.unpack(">f", struct.pack(">I", int(bits, 16) << 16))[0]


def fp32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def fp16(x):  # nearest-even, inf beyond the range (struct raises OverflowError there)
    try:
        return struct.unpack("e", struct.pack("e", x))[0]
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")


def exact_decimal(q):
    """Every digit of a dyadic rational, as plain decimal text (the independent reference)."""
    sign = "-" if q < 0 else ""
    q = abs(q)
    k = 0
    while q.denominator != 1:  # the denominator is a power of 2: times 10 until it is gone
        q *= 10
        k += 1
    digits = str(q.numerator).rjust(k + 1, "0")
    return sign + (digits[:-k] + "." + digits[-k:] if k else digits)


class Errors(unittest.TestCase):
    def check_error(self, *args, stdin=None):
        r = run(*args, stdin=stdin)
        self.assertEqual(r.returncode, 2, f"{args}: exit {r.returncode}, stderr {r.stderr!r}")
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, f"{args}: stderr is not one line: {r.stderr!r}")
        self.assertTrue(lines[0].startswith("fplab: error: "), lines[0])
        self.assertEqual(r.stdout, "", f"{args}: printed to stdout on error")
        return lines[0]

    def test_bad_inputs_give_one_line_and_exit_2(self):
        self.assertIn("e9m99", self.check_error("round", "1", "--format", "e9m99"))
        self.assertIn("abc", self.check_error("round", "abc"))
        self.assertIn("'xx'", self.check_error("round", "1", "--mode", "xx"))
        self.check_error("sum")
        foo = self.check_error("sum", "1", "2", "--orders", "seq,foo")
        for name in ("'foo'", "sorted-asc", "random:N", "numpy-2.2", "cuda-naive-sum(T,B)", "tc-h100-fp16"):
            self.assertIn(name, foo)  # the message lists every order there is
        self.assertIn("position", self.check_error("sum", "1", "2", "--orders", "seq,contig(4):sqe"))
        self.assertIn("splitk(4)", self.check_error("sum", "1", "2", "--orders", "splitk(0),seq"))
        self.assertIn("empty order", self.check_error("sum", "1", "2", "--orders", "seq,,rev"))
        self.check_error("sum", "--file", "/nonexistent/numbers.txt")
        self.assertIn("position", self.check_error("reduce", "--schedule", "contig(4):sqe", "--gen", "normal:10"))
        self.assertIn("all:", self.check_error("reduce", "--schedule", "contig(4):seq", "--gen", "normal:10"))
        self.check_error("reduce", "--schedule", "seq", "--gen", "gauss:10")
        self.check_error("reduce", "--schedule", "seq")
        self.check_error("reduce", "--gen", "normal:10")
        self.assertIn("bogus", self.check_error("bogus"))
        self.check_error("tree", "--schedule", "splitk(0)")
        self.check_error("explore", "--schedule", "atomic", "--gen", "normal:10", "--trials", "0")
        self.check_error("sum", "--file", "-", stdin="1\n2\nnot-a-number\n")
        with tempfile.TemporaryDirectory() as folder:
            self.assertIn("is a folder", self.check_error("sum", "--file", folder))


class Json(unittest.TestCase):
    def test_round_json_is_consistent_with_exact_arithmetic(self):
        r = run("round", "0.1", "1e-3", "70000", "--format", "bf16", "--mode", "all", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        results = json.loads(r.stdout)["results"]
        self.assertEqual(len(results), 3 * 7)
        for e in results:
            self.assertEqual(e["format"], "bf16")
            x = Fraction(e["input"])
            below, above = Fraction(bf16_value(e["below_bits"])), Fraction(bf16_value(e["above_bits"]))
            self.assertLessEqual(below, x)
            self.assertLessEqual(x, above)
            if e["value"] is None:  # overflow to inf
                self.assertTrue(e["overflow"])
                continue
            value = Fraction(bf16_value(e["bits"]))
            self.assertEqual(value, Fraction(e["value"]))
            self.assertIn(value, (below, above))
            nearer = below if x - below < above - x else above
            if e["mode"] == "rne" and x - below != above - x:
                self.assertEqual(value, nearer)
            if e["mode"] == "rz":
                self.assertEqual(value, below if x > 0 else above)
            self.assertAlmostEqual(e["error"], float(value - x), delta=abs(float(value - x)) * 1e-12)

    def test_sum_json_exact_matches_fractions(self):
        numbers = ["1e8", "1", "-1e8", "1", "0.25", "3"]
        r = run("sum", *numbers, "--format", "fp32", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        terms = [Fraction(fp32(float(x))) for x in numbers]
        self.assertEqual(Fraction(out["exact"]), sum(terms))  # exactly representable here
        names = [o["order"] for o in out["orders"]]
        self.assertEqual(names[:5], ["seq", "rev", "pairwise", "sorted-asc", "sorted-desc"])
        seq = next(o for o in out["orders"] if o["order"] == "seq")
        acc = fp32(float(terms[0]))
        for t in terms[1:]:
            acc = fp32(acc + float(t))  # fp32 additions of fp32 values: double rounding is innocuous
        self.assertEqual(seq["value"], acc)
        rnd = next(o for o in out["orders"] if o["order"].startswith("random:"))
        self.assertEqual(sum(b["count"] for b in rnd["histogram"]), rnd["permutations"])

    def test_sum_orders_take_presets_and_schedules(self):
        # 20 fp32 terms of mixed magnitude; each order is recomputed here in plain fp32 additions
        # (fp32 additions of fp32 values in doubles: double rounding is innocuous).
        numbers = [repr(fp32((-1) ** i * (1.5 ** (i % 13)) * (1 + i / 7))) for i in range(20)]
        terms = [fp32(float(x)) for x in numbers]
        add = lambda a, b: fp32(a + b)  # noqa: E731

        def tree(v):  # all:tree: the first floor(n/2) on the left
            return v[0] if len(v) == 1 else add(tree(v[:len(v) // 2]), tree(v[len(v) // 2:]))

        def numpy_pairwise(v):  # NumPy's pairwise_sum for 8 <= n <= 128: 8 accumulators, then the rest
            r = list(v[:8])
            for i in range(8, len(v) - len(v) % 8, 8):
                r = [add(r[j], v[i + j]) for j in range(8)]
            res = add(add(add(r[0], r[1]), add(r[2], r[3])), add(add(r[4], r[5]), add(r[6], r[7])))
            for x in v[len(v) - len(v) % 8:]:
                res = add(res, x)
            return res

        expected = {"numpy": numpy_pairwise(terms), "numpy-2.2": numpy_pairwise(terms),
                    "contig(2):seq | all:tree": tree([add(terms[i], terms[i + 1]) for i in range(0, 20, 2)]),
                    "pairwise": tree(terms)}
        orders = "seq, numpy,numpy-2.2,contig(2):seq | all:tree,pairwise,cuda-naive-sum(32,2),atomic"
        r = run("sum", *numbers, "--orders", orders, "--seed", "5", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = {o["order"]: o for o in json.loads(r.stdout)["orders"]}
        self.assertEqual(list(out), [o.strip() for o in re.split(r",(?![^(]*\))", orders)])
        for name, value in expected.items():
            self.assertEqual(out[name]["value"], value, name)
        self.assertEqual(len({out[name]["value"] for name in ("seq", "numpy", "contig(2):seq | all:tree")}), 3)
        self.assertEqual(out["numpy"]["schedule"], "all:numpy_pairwise")
        self.assertEqual(out["contig(2):seq | all:tree"]["schedule"], "contig(2):seq | all:tree")
        self.assertNotIn("schedule", out["seq"])
        # Random steps draw from --seed as reduce's --impl-seed: the same run of the same hardware.
        for name in ("cuda-naive-sum(32,2)", "atomic"):
            same = run("reduce", "--schedule", name, "--file", "-", "--impl-seed", "5", "--json",
                       stdin="\n".join(numbers))
            self.assertEqual(json.loads(same.stdout)["value"], out[name]["value"], name)
        text = run("sum", *numbers, "--orders", orders).stdout
        self.assertRegex(text, r"\n  contig\(2\):seq \| all:tree +\S+ +\S+ +\S+")
        # Under stochastic rounding the trace draws as the sum did.
        sr = run("sum", *numbers, "--orders", orders, "--mode", "sr", "--seed", "5", "--trace", "--json")
        self.assertEqual(sr.returncode, 0, sr.stderr)
        for o in json.loads(sr.stdout)["orders"]:
            last = next(s for s in o["trace"]["steps"] if s["step"] == o["trace"]["result"])
            self.assertEqual(last["value"], o["value"], o["order"])

    def test_sum_trace_lists_every_addition_against_fractions(self):
        numbers = ["1e8", "1", "-1e8", "1", "0.25", "3"]
        r = run("sum", *numbers, "--orders", "seq,sorted-desc,random:3,numpy,atomic,contig(2):seq | all:rev",
                "--trace", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        terms = [fp32(float(x)) for x in numbers]
        for order in out["orders"]:
            steps = order["trace"]["steps"]
            self.assertEqual(len(steps), len(numbers) - 1)
            results = {}
            for s in steps:
                values = [results[o["name"]] if o["name"].startswith("s") else terms[int(o["name"][1:])]
                          for o in s["operands"]]
                self.assertEqual([o["value"] for o in s["operands"]], values)
                exact = Fraction(values[0]) + Fraction(values[1])
                self.assertEqual(s["exact_text"], exact_decimal(exact))
                self.assertEqual(s["value"], fp32(float(exact)))  # exact is a double here
                self.assertEqual(Fraction(s["error"]), exact - Fraction(s["value"]))
                results[s["step"]] = s["value"]
            if "histogram" in order:  # random:N traces its first order, one of those counted
                self.assertIn(results[order["trace"]["result"]], [b["value"] for b in order["histogram"]])
            else:
                self.assertEqual(results[order["trace"]["result"]], order["value"])
            used = sorted(int(o["name"][1:]) for s in steps for o in s["operands"] if o["name"].startswith("t"))
            self.assertEqual(used, list(range(len(numbers))))
        seq = out["orders"][0]["trace"]["steps"]
        self.assertEqual((seq[0]["exact_text"], seq[0]["value"], seq[0]["error"]), ("100000001", 1e8, 1.0))
        text = run("sum", "1e8", "1", "-1e8", "1", "--orders", "seq", "--trace")
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, r"s1\s+t0 \+ t1\s+1e\+08 \+ 1\s+100000001\s+1e\+08\s+\+1")

    def test_reduce_trace_matches_the_value_and_shows_fused_alignment(self):
        for schedule in ("numpy", "tc-h100-fp16", "contig(4):kahan | all:tree"):
            r = run("reduce", "--schedule", schedule, "--gen", "normal:40", "--trace", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            steps = out["trace"]["steps"]
            last = next(s for s in steps if s["step"] == out["trace"]["result"])
            self.assertEqual(last["value"], out["value"])
            if schedule.startswith("tc"):
                self.assertTrue(all(s["kind"] == "fused" for s in steps))
                for s in steps:
                    for a in s["aligned"]:
                        self.assertEqual(Fraction(a["kept"]) + Fraction(a["dropped"]), Fraction(a["input"]))
                        self.assertEqual((Fraction(a["kept"]) / Fraction(2) ** s["grid_exponent"]).denominator, 1)
        text = run("reduce", "--schedule", "tc-h100-fp16", "--gen", "normal:20", "--trace")
        self.assertIn("aligned to the grid 2^", text.stdout)
        big = run("reduce", "--schedule", "all:seq", "--gen", "normal:100001", "--trace")
        self.assertEqual(big.returncode, 2)
        self.assertIn("at most 100000 terms", big.stderr)

    def test_reduce_json_prints_the_canonical_expansion(self):
        for preset, expansion in ((" numpy ", "all:numpy_pairwise"),
                                  ("numpy-2.2", "contig(8192):numpy_pairwise | all:seq")):
            r = run("reduce", "--schedule", preset, "--gen", "normal:1000", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertEqual(out["schedule"], expansion)
            for key in ("format", "value", "exact", "ulps"):
                self.assertIn(key, out)

    def test_sum_shows_the_exact_sum_and_its_rounding(self):
        # seq 1 100 in fp16: the exact sum 5050 is not an fp16 value; its rounding (5048) is not
        # what errors are measured from.
        r = run("sum", "--file", "-", "--format", "fp16", "--orders", "seq,pairwise", "--json",
                stdin="\n".join(str(i) for i in range(1, 101)))
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["exact_text"], "5050")
        self.assertEqual(out["exact"], 5050)
        self.assertEqual(out["correctly_rounded"], fp16(5050.0))
        self.assertEqual(out["correctly_rounded"], 5048)
        self.assertFalse(out["correctly_rounded_overflow"])
        self.assertEqual(out["error_from"], "exact")
        for o in out["orders"]:
            self.assertEqual(Fraction(o["error"]), Fraction(o["value"]) - 5050)
            self.assertEqual(o["ulps"], (o["value"] - 5050) / 4)  # the fp16 ulp from 4096 to 8192 is 4
        text = run("sum", "--file", "-", "--format", "fp16", "--orders", "seq",
                   stdin="\n".join(str(i) for i in range(1, 101))).stdout
        self.assertRegex(text, r"exact sum +5050\n")
        self.assertRegex(text, r"rounded +5048 ")

    def test_sum_exact_text_has_every_digit(self):
        for numbers, fmt in ((["0.1", "0.2", "0.3"], "fp64"), (["1e-300", "3"], "fp64"), (["-0.1", "1e-3"], "fp32"),
                             (["1e300", "1e300", "-1e-300"], "fp64")):
            r = run("sum", *numbers, "--format", fmt, "--orders", "seq", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            rounder = float if fmt == "fp64" else fp32
            exact = sum(Fraction(rounder(float(x))) for x in numbers)
            self.assertEqual(out["exact_text"], exact_decimal(exact), numbers)
            self.assertEqual(Fraction(out["exact_text"]), exact)
            self.assertEqual(out["exact"], float(exact))
            self.assertEqual(out["correctly_rounded"], rounder(float(exact)))
        # The terminal shortens the 750-digit expansion of 1e-300 visibly, not silently.
        text = run("sum", "1e-300", "--format", "fp64", "--orders", "seq").stdout
        self.assertRegex(text, r"exact sum +1\.0000000000000000250590918352087596856\d*\.\.\.\[\d+ more digits; --json has them all\]e-300")

    def test_sum_overflow_is_reported_as_overflow(self):
        numbers = "\n".join(str(i) for i in range(1, 1001))  # 500500: beyond fp16's 65504
        r = run("sum", "--file", "-", "--format", "fp16", "--orders", "seq,pairwise,random:10", "--json", stdin=numbers)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["exact_text"], "500500")
        self.assertTrue(out["correctly_rounded_overflow"])
        self.assertEqual(out["correctly_rounded_text"], "inf")
        for o in out["orders"][:2]:
            self.assertTrue(o["overflow"], o)
        text = run("sum", "--file", "-", "--format", "fp16", "--orders", "seq,pairwise,random:10", stdin=numbers).stdout
        self.assertNotIn("nan", text)
        self.assertNotIn("correctly rounded)", text)
        self.assertRegex(text, r"seq +inf +overflow")
        self.assertIn("overflow: beyond fp16's largest finite value 65504", text)

    def test_reduce_and_explore_show_the_exact_sum(self):
        for command in (["reduce"], ["explore", "--trials", "3"]):
            r = run(*command, "--schedule", "seq", "--format", "fp16", "--gen", "normal:100", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertEqual(out["error_from"], "exact")
            exact = Fraction(out["exact_text"])
            self.assertEqual(Fraction(float(exact)), exact)  # fp16 sums fit a double: one rounding below
            self.assertEqual(out["correctly_rounded"], fp16(float(exact)))
            if command == ["reduce"]:
                self.assertEqual(Fraction(out["error"]), Fraction(out["value"]) - exact)

    def test_round_keeps_the_sign_of_nan(self):
        for text, sign in (("nan", 0), ("+nan", 0), ("-nan", 1), ("-NaN", 1)):
            r = run("round", text, "--format", "bf16", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            e = json.loads(r.stdout)["results"][0]
            self.assertEqual(int(e["bits"], 16) >> 15, sign, text)
            self.assertEqual(e["value_text"], "-nan" if sign else "nan")
            self.assertIn("-> -nan" if sign else "-> nan", run("round", text, "--format", "bf16").stdout)

    def test_round_names_the_side_without_a_value(self):
        # e8m0 has no zero and no negative values: no "lies between nan and nan".
        for text, line in (("0", "no value of e8m0 lies on either side of it"),
                           ("-3", "no value of e8m0 lies on either side of it"),
                           ("1e-50", "no value of e8m0 lies below it; the nearest above is 5.877471754111438e-39 (0x00)"),
                           ("3", "lies between 2 (0x80) and 4 (0x81)")):
            r = run("round", text, "--format", "e8m0", "--mode", "rne")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.splitlines()[1].strip(), line, text)
            self.assertNotIn("between nan", r.stdout)
        # e2m1fn has no infinities: past its largest both neighbours are +-6, not "between 6 and 6"
        for text, line in (("7", "no value of e2m1fn lies above it; the nearest below is 6 (0x7)"),
                           ("-7", "no value of e2m1fn lies below it; the nearest above is -6 (0xf)")):
            r = run("round", text, "--format", "e2m1fn", "--mode", "rne")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.splitlines()[1].strip(), line, text)
        # e4m3 has no infinities and no value past 448 on either side of inf: say where it ends
        for text, line in (("inf", "e4m3 has no infinities; its finite values end at 448 (0x7e)"),
                           ("-inf", "e4m3 has no infinities; its finite values end at -448 (0xfe)")):
            r = run("round", text, "--format", "e4m3", "--saturate-infinities")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.splitlines()[1].strip(), line, text)

    def test_round_sr_with_given_bits_and_saturated_infinities(self):
        # 1.3 in e2m1fn lies 0.6 of the way from 1 to 1.5: truncated to 4 bits 9/16, so random
        # bits 0..6 keep 1 and 7..15 carry to 1.5.
        for given, want in (("0", 1.0), ("6", 1.0), ("7", 1.5), ("0xf", 1.5)):
            r = run("round", "1.3", "--format", "e2m1fn", "--mode", "sr", "--sr-bits", "4", "--random-bits", given,
                    "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["results"][0]["value"], want, given)
        for args, message in ((("--sr-bits", "4"), "--sr-bits needs --mode sr"),
                              (("--mode", "sr", "--sr-bits", "4", "--random-bits", "16"), "does not fit"),
                              (("--mode", "sr", "--sr-bits", "0"), "--sr-bits")):
            r = run("round", "1.3", "--format", "e2m1fn", *args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(message, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        r = run("round", "-inf", "--format", "e5m2", "--saturate-infinities", "--json")
        self.assertEqual(json.loads(r.stdout)["results"][0]["value"], -57344.0)
        r = run("round", "-inf", "--format", "e5m2", "--saturate", "--json")
        self.assertIsNone(json.loads(r.stdout)["results"][0]["value"])  # -inf has no JSON number

    def test_sum_exact_of_inputs_or_terms(self):
        # Each 1.0004 is 1 in fp16, so the terms sum to 3 exactly; the inputs' sum rounds to 3.00195.
        for exact_of, want in (("terms", 3.0), ("inputs", 3.001953125)):
            r = run("sum", "1.0004", "1.0004", "1.0004", "--format", "fp16", "--orders", "seq", "--exact-of", exact_of,
                    "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertEqual(out["correctly_rounded"], want)
            self.assertEqual(out["exact_of"], exact_of)
        r = run("sum", "1", "--exact-of", "typed")
        self.assertEqual(r.returncode, 2)

    def test_sum_reads_stdin(self):
        r = run("sum", "--file", "-", "--format", "fp64", "--orders", "seq", "--json", stdin="# a comment\n1\n\n2\n0x1p-1\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["exact"], 3.5)


def round_fp32(q):
    """A rational rounded to the nearest fp32, ties to even (exactly: no double rounding)."""
    if q == 0:
        return 0.0
    sign, q = (-1 if q < 0 else 1), abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()  # 2^e <= q < 2^(e+2)
    if Fraction(2) ** e > q:
        e -= 1
    quantum = Fraction(2) ** (max(e, -126) - 23)
    n, rest = divmod(q, quantum)
    n += rest > quantum / 2 or (rest == quantum / 2 and n % 2 == 1)
    return sign * float(n * quantum)


class Dot(unittest.TestCase):
    """fplab dot against exact rationals: the exact value, its rounding, and fp32 loops written out."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        rng = random.Random(19)
        self.a = [fp32(rng.gauss(0, 1) * 2.0 ** rng.randint(-12, 12)) for _ in range(60)]
        self.b = [fp32(rng.gauss(0, 1) * 2.0 ** rng.randint(-12, 12)) for _ in range(60)]

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, name, numbers):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write("".join(f"{float(x).hex()}\n" for x in numbers))  # exact: no input is rounded
        return path

    def dot(self, *args, a=None, b=None):
        r = run("dot", "--a", self.write("a.txt", a or self.a), "--b", self.write("b.txt", b or self.b), *args, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_exact_value_and_its_rounding_match_fractions(self):
        out = self.dot("--schedule", "seq")
        exact = sum(Fraction(x) * Fraction(y) for x, y in zip(self.a, self.b))
        self.assertEqual(Fraction(out["exact_text"]), exact)
        self.assertEqual(out["correctly_rounded"], round_fp32(exact))
        self.assertEqual((out["pairs"], out["inputs_rounded"], out["arithmetic"]), (60, 0, "fp32/rne/fused"))
        r = out["results"][0]
        self.assertEqual(r["error"], float(Fraction(r["value"]) - exact))  # rounded once to a double

    def test_seq_is_the_fp32_loop_of_each_products_mode(self):
        p = [Fraction(x) * Fraction(y) for x, y in zip(self.a, self.b)]
        fused = rounded = round_fp32(p[0])
        exact = round_fp32(p[0] + p[1])  # two exact products meet: one rounding
        fused = round_fp32(Fraction(fused) + p[1])  # FMA: the left product was rounded first
        rounded = round_fp32(Fraction(rounded) + Fraction(round_fp32(p[1])))
        for q in p[2:]:
            fused = round_fp32(Fraction(fused) + q)  # acc = fma(a, b, acc)
            exact = round_fp32(Fraction(exact) + q)
            rounded = round_fp32(Fraction(rounded) + Fraction(round_fp32(q)))  # no FMA
        values = {}
        for mode, want in (("fused", fused), ("exact", exact), ("rounded", rounded)):
            with self.subTest(products=mode):
                values[mode] = self.dot("--schedule", "seq", "--products", mode)["results"][0]["value"]
                self.assertEqual(values[mode], want)
        self.assertNotEqual(values["fused"], values["rounded"])  # else this data could not tell them apart

    def test_several_schedules_and_seeds(self):
        out = self.dot("--schedule", "seq, cuda-naive-sum(32,1),contig(4):seq | all:tree,atomic", "--impl-seed", "4")
        self.assertEqual([r["name"] for r in out["results"]],
                         ["seq", "cuda-naive-sum(32,1)", "contig(4):seq | all:tree", "atomic"])
        self.assertEqual(out["results"][1]["schedule"],
                         "strided(32):seq | contig(32):shfl_down | contig(1):seq | all:atomic")
        self.assertEqual([r["nondeterministic"] for r in out["results"]], [False, True, False, True])
        p = [Fraction(x) * Fraction(y) for x, y in zip(self.a, self.b)]
        fma = lambda acc, q: round_fp32(Fraction(acc) + q)  # noqa: E731
        parts = []
        for i in range(0, 60, 4):  # contig(4):seq: an FMA chain per part; then a tree of rounded parts
            acc = round_fp32(p[i])
            for q in p[i + 1:i + 4]:
                acc = fma(acc, q)
            parts.append(acc)

        def tree(v):
            return v[0] if len(v) == 1 else round_fp32(Fraction(tree(v[:len(v) // 2])) + Fraction(tree(v[len(v) // 2:])))
        self.assertEqual(out["results"][2]["value"], tree(parts))
        again = self.dot("--schedule", "atomic", "--impl-seed", "4")["results"][0]["value"]
        self.assertEqual(again, out["results"][3]["value"])
        seeds = {self.dot("--schedule", "atomic", "--impl-seed", str(s))["results"][0]["value"] for s in range(8)}
        self.assertGreater(len(seeds), 1)

    def test_text_output_and_stdin(self):
        r = run("dot", "--a", self.write("a.txt", [1e8, 1, -1e8, 1]), "--b", "-", "--schedule", "seq,pairwise",
                stdin="1\n1\n1\n1\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"exact sum +2\n")
        self.assertRegex(r.stdout, r"\n  seq +1 +-1 = ")
        self.assertRegex(r.stdout, r"\n  pairwise +0 +-2 = ")

    def test_bad_inputs_are_one_line(self):
        a, short = self.write("a.txt", [1, 2, 3]), self.write("short.txt", [1, 2])
        empty = os.path.join(self.dir, "empty.txt")
        with open(empty, "w") as f:
            f.write("# nothing\n\n")
        bad = os.path.join(self.dir, "bad.txt")
        with open(bad, "w") as f:
            f.write("1\n2\nthree\n")
        check = Errors.check_error
        self.assertIn("same length", check(self, "dot", "--a", a, "--b", short, "--schedule", "seq"))
        self.assertIn("--b", check(self, "dot", "--a", a, "--b", empty, "--schedule", "seq"))
        self.assertIn("--a", check(self, "dot", "--a", os.path.join(self.dir, "missing"), "--b", a, "--schedule", "seq"))
        self.assertIn("is a folder", check(self, "dot", "--a", self.dir, "--b", a, "--schedule", "seq"))
        message = check(self, "dot", "--a", a, "--b", bad, "--schedule", "seq")
        self.assertIn("--b", message)
        self.assertIn("three", message)
        self.assertIn("stdin", check(self, "dot", "--a", "-", "--b", "-", "--schedule", "seq", stdin="1\n"))
        self.assertIn("position", check(self, "dot", "--a", a, "--b", a, "--schedule", "seq,contig(4):sqe"))
        self.assertIn("--b", check(self, "dot", "--a", a, "--schedule", "seq"))
        self.assertIn("products", check(self, "dot", "--a", a, "--b", a, "--schedule", "seq", "--products", "fma"))
        # A sum has no products: reduce no longer takes an option that could not change its result.
        self.assertIn("--products", check(self, "reduce", "--schedule", "seq", "--gen", "normal:10", "--products",
                                          "exact"))


class Files(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_tree_writes_dot_atomically(self):
        path = os.path.join(self.dir, "t.dot")
        r = run("tree", "--schedule", "contig(4):seq | all:shfl_down", "--n", "16", "--dot", path, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(path) as f:
            self.assertTrue(f.read().startswith("digraph"))
        self.assertEqual(json.loads(r.stdout)["additions"], 15)
        self.assertEqual(os.listdir(self.dir), ["t.dot"])  # no temporary left behind

    def test_tree_draws_fused_steps_as_a_chain(self):
        # all:fused(8,25) over 40 terms is what a tensor core runs: five steps, each the previous
        # result (acc) plus 8 terms rounded once; the depth is 5 roundings, not 1.
        path = os.path.join(self.dir, "f.dot")
        r = run("tree", "--schedule", "all:fused(8,25)", "--n", "40", "--dot", path, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual((out["additions"], out["fused_operations"], out["depth"], out["nodes"]), (0, 5, 5, 45))
        with open(path) as f:
            dot = f.read()
        self.assertEqual(dot.count('label="fused: 8 terms\\n1 rounding"'), 1)
        self.assertEqual(dot.count('label="fused: acc + 8 terms\\n1 rounding"'), 4)
        self.assertEqual(dot.count('[label="acc", style=bold]'), 4)
        out = json.loads(run("tree", "--schedule", "tc-h100-fp16", "--n", "40", "--json").stdout)  # 16 per step
        self.assertEqual((out["fused_operations"], out["depth"]), (3, 3))
        text = run("tree", "--schedule", "all:fused(8,25)", "--n", "40", "--dot", path).stdout
        self.assertIn("0 additions, 5 fused operations", text)
        self.assertIn("depth 5", text)
        # explore's error bound uses the same depth
        out = json.loads(run("explore", "--schedule", "all:fused(8,25)", "--gen", "normal:40", "--trials", "1",
                             "--json").stdout)
        self.assertEqual(out["depth"], 5)

    def test_lane_stages_in_tree_reduce_and_dot(self):
        # perm, body(M)[...] and @FORMAT (docs/schedules.md): the tree of 7 terms under a body of 4
        # is 6 additions, the rest (4, 5, 6) first; bad text is one line naming the token.
        out = json.loads(run("tree", "--schedule", "body(4)[strided(2):seq] | all:seq@fp64", "--n", "7",
                             "--json").stdout)
        self.assertEqual((out["additions"], out["schedule"]), (6, "body(4)[strided(2):seq] | all:seq@fp64"))
        self.assertEqual(json.loads(run("tree", "--schedule", "perm(1,0) | contig(2):seq | all:tree", "--n", "8",
                                        "--json").stdout)["depth"], 3)
        # float products into a double accumulator: below 32 terms that is all of OpenBLAS's sdot
        path = os.path.join(self.dir, "a.txt")
        with open(path, "w") as f:
            f.write("1.0001220703125\n" * 3)
        dot = json.loads(run("dot", "--a", path, "--b", path, "--schedule", "all:seq@fp64,openblas-sdot",
                             "--json").stdout)
        self.assertEqual([r["schedule"] for r in dot["results"]][0], "all:seq@fp64")
        self.assertEqual(dot["results"][0]["value"], dot["results"][1]["value"])  # n < 32: sdot's tail alone
        r = run("reduce", "--schedule", "body(4)[all:seq | all:tree", "--gen", "normal:10")
        self.assertEqual(r.returncode, 2)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("body(M)[ is not closed by ']' at position 27", lines[0])
        r = run("reduce", "--schedule", "perm(0,0) | all:seq", "--gen", "normal:10")
        self.assertEqual(r.returncode, 2)
        self.assertIn("perm lane 0 named twice at position 8", r.stderr)
        r = run("sum", "1", "2", "3", "--orders", "openblas-sdot,strided(8):seq@fp64 | all:seq@fp64", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("strided(8):seq@fp64 | all:seq@fp64", r.stdout)

    def test_tree_terms_in_index_order(self):
        r = run("tree", "--schedule", "strided(4):seq | all:tree", "--n", "16")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rank=same", r.stdout)
        chain = re.findall(r"n(\d+) -> n(\d+) \[style=invis\]", r.stdout)
        self.assertEqual([(int(a), int(b)) for a, b in chain], [(i, i + 1) for i in range(15)])  # t0..t15 are n0..n15
        self.assertIn("ordering=in", r.stdout)

    def test_tree_refuses_what_graphviz_cannot_lay_out(self):
        r = run("tree", "--schedule", "seq", "--n", "100000", "--svg", os.path.join(self.dir, "t.svg"))
        self.assertEqual(r.returncode, 2)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("199999 nodes, more than --max-nodes 4000", lines[0])
        self.assertEqual(os.listdir(self.dir), [])
        self.assertEqual(run("tree", "--schedule", "seq", "--n", "16", "--max-nodes", "30").returncode, 2)
        self.assertEqual(run("tree", "--schedule", "seq", "--n", "16", "--max-nodes", "31").returncode, 0)
        r = run("tree", "--schedule", "seq", "--n", "100000", "--json")  # counts only: nothing to lay out
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["additions"], 99999)

    def test_unwritable_output_fails_cleanly(self):
        r = run("tree", "--schedule", "seq", "--n", "4", "--dot", os.path.join(self.dir, "missing", "t.dot"))
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_explore_plot_is_a_png(self):
        if shutil.which("gnuplot") is None:
            self.skipTest("gnuplot not installed (scripts/setup installs gnuplot-nox)")
        path = os.path.join(self.dir, "h.png")
        r = run("explore", "--schedule", "atomic", "--gen", "cancel:200", "--trials", "20", "--plot", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertEqual(os.listdir(self.dir), ["h.png"])


class Train(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_missing_dataset_is_one_line_naming_the_file(self):
        r = run("train", "--data-dir", os.path.join(self.dir, "nowhere"), "--quiet")
        self.assertEqual(r.returncode, 2)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("nowhere", lines[0])

    def test_config_file_and_json(self):
        config = os.path.join(self.dir, "run.toml")
        with open(config, "w") as f:
            f.write('model = "mlp"\nhidden = [16]\ntrain-subset = 500\nepochs = 1\nschedules = "gpu"\n')
        r = run("train", "--config", config, "--quiet", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        for key in ("test_accuracy", "train_loss", "weights_sha256", "predictions_sha256", "epochs"):
            self.assertIn(key, out)
        self.assertEqual(out["epochs"], 1)
        self.assertIn("atomic", out["schedules"])
        self.assertEqual(len(out["per_class_accuracy"]), 10)
        with open(config, "a") as f:
            f.write("no-such-option = 3\n")
        r = run("train", "--config", config, "--quiet")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_profile_schedules_and_devices(self):
        common = ["train", "--hidden", "16", "--train-subset", "500", "--quiet", "--json"]
        r = run(*common, "--profile", "h100:deterministic")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["device"], "cpu")
        self.assertIn("bias_grad=strided(1024):seq | contig(32):seq | all:shfl_up", out["schedules"])
        # --device auto runs wherever it is (the GPU gives the same bits for these schedules)
        auto = run(*common, "--profile", "h100:deterministic", "--device", "auto")
        self.assertEqual(auto.returncode, 0, auto.stderr)
        self.assertEqual(json.loads(auto.stdout)["weights_sha256"], out["weights_sha256"])
        for bad in (["--profile", "h100:fastest"], ["--profile", "no-such-chip"], ["--device", "tpu"],
                    ["--profile", "h100", "--schedules", "gpu"]):
            r = run(*common, *bad)
            self.assertEqual(r.returncode, 2, bad)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertTrue(r.stderr.startswith("fplab: error: "), r.stderr)

    @unittest.skipIf(shutil.which("nvidia-smi"), "a GPU may be here: the no-GPU errors are not expected")
    def test_cuda_without_a_gpu_is_one_line(self):
        for args in (["train", "--device", "cuda", "--train-subset", "100", "--quiet"], ["validate"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, r.stderr)
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertTrue(lines[0].startswith("fplab: error: "), lines[0])
            self.assertTrue("CUDA" in lines[0], lines[0])
            self.assertEqual(r.stdout, "")

    def test_zero_width_layer_and_empty_config_array_are_one_line(self):
        # Both once crashed fplab: --hidden 0 made a GEMM with K = 0 (SIGSEGV in the engine), and
        # an empty array in a --config file gave a flag no value at all (SIGSEGV in CLI11).
        for hidden in (["0"], ["16", "0"]):
            r = run("train", "--model", "mlp", "--hidden", *hidden, "--train-subset", "100", "--quiet")
            self.assertEqual(r.returncode, 2, r.stderr)
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertTrue(lines[0].startswith("fplab: error: ") and "hidden" in lines[0], lines[0])
        config = os.path.join(self.dir, "c.toml")
        for key in ("flip", "hidden", "schedules"):
            with open(config, "w") as f:
                f.write(f"quiet = true\n{key} = []\n")
            r = run("train", "--config", config)
            self.assertEqual(r.returncode, 2, r.stderr)
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(f"{config}:2: key '{key}'", lines[0])
            self.assertIn("empty array", lines[0])
        # The TOML parser quotes the character it stopped at, here a newline: still one line.
        with open(config, "w") as f:
            f.write("quiet = true\nflip = t\nepochs = 1\n")
        r = run("train", "--config", config)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(f"{config}:2:", r.stderr)

    def test_mlp_resume_reads_its_own_checkpoint(self):
        # An MLP checkpoint holds empty arrays; reading them was undefined behaviour (memcpy to a
        # null pointer), which the sanitizer build (scripts/test --sanitize) turns into a failure.
        checkpoint = os.path.join(self.dir, "mlp.ckpt")
        common = ["train", "--model", "mlp", "--hidden", "8", "--train-subset", "100", "--quiet", "--json",
                  "--checkpoint", checkpoint, "--checkpoint-every", "1"]
        first = run(*common, timeout=600)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertTrue(os.path.exists(checkpoint))
        resumed = run(*common, "--resume", timeout=600)
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        self.assertEqual(json.loads(first.stdout)["weights_sha256"], json.loads(resumed.stdout)["weights_sha256"])

    # Three trainings of a small CNN take about a minute each in Release and several times that
    # under ASan + UBSan (scripts/test --sanitize exports FPLAB_SANITIZE), past ctest's timeout.
    # There the checkpoint reader is still exercised, by test_mlp_resume_reads_its_own_checkpoint.
    @unittest.skipIf(os.environ.get("FPLAB_SANITIZE"), "too slow under the sanitizers (see the comment)")
    def test_sigkill_then_resume_gives_the_same_bits(self):
        common = ["train", "--model", "small_cnn_bn", "--train-subset", "2000", "--epochs", "2", "--schedules", "gpu",
                  "--impl-seed", "3", "--quiet", "--json"]
        # Each run takes about a minute on an idle core (evaluating 10000 test images under the gpu
        # schedules dominates); the timeouts only catch a hang, on a machine that may be busy.
        whole = run(*common, timeout=900)
        self.assertEqual(whole.returncode, 0, whole.stderr)
        checkpoint = os.path.join(self.dir, "run.ckpt")
        resumable = common + ["--checkpoint", checkpoint, "--checkpoint-every", "4", "--resume"]
        p = subprocess.Popen([FPLAB, *resumable], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # wait for a checkpoint, then kill without warning
            if os.path.exists(checkpoint) or p.poll() is not None:
                break
            time.sleep(0.05)
        p.kill()
        p.wait()
        self.assertTrue(os.path.exists(checkpoint), "no checkpoint was written before the kill")
        resumed = run(*resumable, timeout=900)
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        a, b = json.loads(whole.stdout), json.loads(resumed.stdout)
        self.assertTrue(b["resumed"])
        self.assertEqual(a["weights_sha256"], b["weights_sha256"])
        self.assertEqual(a["predictions_sha256"], b["predictions_sha256"])
        self.assertEqual([n for n in os.listdir(self.dir) if n.endswith(".tmp")], [])


class Progress(unittest.TestCase):
    """Long work reports progress on stderr: plain lines where stderr is not a terminal (a log
    keeps them readable), one line rewritten with carriage returns where it is."""

    TRAIN = ["train", "--model", "mlp", "--hidden", "16", "--format", "bf16", "--train-subset", "500", "--epochs", "1"]

    # Every update at once, so that what is asserted does not depend on how fast this machine is
    # (by default progress waits 1 s and then writes a plain line at most every 10 s).
    def setUp(self):
        os.environ["FPLAB_PROGRESS"] = "all"

    def tearDown(self):
        os.environ.pop("FPLAB_PROGRESS", None)

    def test_plain_lines_when_stderr_is_not_a_terminal(self):
        r = run(*self.TRAIN)  # about 5 s, most of it evaluating 10000 test images in bf16
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("\r", r.stderr)
        self.assertRegex(r.stderr, r"(?m)^  epoch 1/1: evaluating, \d+/10000 test images$")
        r = run("explore", "--schedule", "atomic", "--gen", "normal:200000", "--trials", "200")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("\r", r.stderr)
        self.assertRegex(r.stderr, r"(?m)^  \d+ / 200 seeds$")
        with tempfile.TemporaryDirectory() as folder:
            config = os.path.join(folder, "bf16.toml")
            with open(config, "w") as f:
                f.write(Run.TINY.replace("600", "200").replace('["impl", "control"]', '["control"]')
                        .replace('name = "mlp"', 'name = "small_cnn"'))  # long enough to report
            r = run("diverge", config, "--variant", "control", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("\r", r.stderr)
            self.assertRegex(r.stderr, r"(?m)^replica [ab]: evaluating, \d+/10000 test images$")

    def test_one_rewritten_line_on_a_terminal(self):
        import pty
        master, slave = pty.openpty()
        p = subprocess.Popen([FPLAB, *self.TRAIN], stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        os.close(master)
        self.assertEqual(p.wait(timeout=300), 0)
        text = seen.decode()
        self.assertRegex(text, r"\r  epoch 1/1: evaluating, \d+/10000 test images")
        self.assertIn("epoch 1/1: train loss", text)


class Run(unittest.TestCase):
    TINY = """name = "tiny"
[data]
train_subset = 600
[model]
name = "mlp"
hidden = [16]
[training]
epochs = 1
batch = 50
[run]
profiles = ["v100"]
variants = ["impl", "control"]
replicas = 3
"""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.config = os.path.join(self.dir, "tiny.toml")
        with open(self.config, "w") as f:
            f.write(self.TINY)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_run_writes_every_result_file_and_control_is_identical(self):
        out = os.path.join(self.dir, "out dir")  # a space: the recorded command must quote it
        r = run("run", self.config, "--out", out, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        summary = json.loads(r.stdout)
        control = next(g for g in summary["results"] if g["variant"] == "control")
        self.assertTrue(control["identical_replicas"])
        self.assertEqual(control["churn_mean"], 0)
        for name in ("summary.json", "replicas.csv", "per_class.csv", "pairs.csv", "report.md", "report.html"):
            self.assertTrue(os.path.exists(os.path.join(out, name)), name)
        with open(os.path.join(out, "summary.json")) as f:
            self.assertEqual(json.load(f), summary)
        # The exact command line, quoted as a shell would need it, and the version that ran it.
        self.assertTrue(summary["command"].endswith(" run " + self.config + " --out '" + out + "' --json"), summary["command"])
        version = run("--version").stdout.strip()
        self.assertEqual("fplab " + summary["fplab_version"], version)

    def test_unknown_profile_is_one_line(self):
        with open(self.config, "a") as f:
            f.write("")
        bad = self.config.replace("tiny", "bad")
        with open(bad, "w") as f:
            f.write(self.TINY.replace('"v100"', '"v999"'))
        r = run("run", bad, "--out", os.path.join(self.dir, "x"))
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("v999", r.stderr)

    def test_device_cuda_without_a_gpu_is_one_line_and_claims_no_folder(self):
        if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi"], capture_output=True).returncode == 0:
            self.skipTest("SKIPPED: this machine has a GPU (scripts/gpu-check's run step covers --device cuda)")
        out = os.path.join(self.dir, "gpu")
        for device, says in (("cuda", "--device cuda: "), ("gpu", "--device must be cpu, cuda or auto")):
            r = run("run", self.config, "--out", out, "--device", device)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(says, r.stderr)
            self.assertFalse(os.path.exists(out), "a refused run must not claim its output folder")

    def test_device_auto_without_a_gpu_trains_on_the_cpu_with_the_same_result(self):
        if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi"], capture_output=True).returncode == 0:
            self.skipTest("SKIPPED: this machine has a GPU (scripts/gpu-check's run step covers --device cuda)")
        cpu, auto = os.path.join(self.dir, "cpu"), os.path.join(self.dir, "auto")
        r_cpu = run("run", self.config, "--out", cpu, "--quiet")
        r_auto = run("run", self.config, "--out", auto, "--device", "auto")
        self.assertEqual(r_cpu.returncode, 0, r_cpu.stderr)
        self.assertEqual(r_auto.returncode, 0, r_auto.stderr)
        self.assertIn("--device auto: ", r_auto.stderr)
        self.assertIn("training on the CPU", r_auto.stderr)
        with open(os.path.join(cpu, "replicas.csv")) as f:
            want = [line.split(",")[:9] for line in f]  # every column but the seconds
        with open(os.path.join(auto, "replicas.csv")) as f:
            self.assertEqual([line.split(",")[:9] for line in f], want)

    def test_mpirun_two_ranks_gives_the_single_process_result(self):
        if shutil.which("mpirun") is None:
            self.skipTest("SKIPPED: mpirun not installed (scripts/setup installs openmpi-bin)")
        single, split = os.path.join(self.dir, "single"), os.path.join(self.dir, "split")
        self.assertEqual(run("run", self.config, "--out", single, "--quiet").returncode, 0)
        r = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", FPLAB, "run", self.config,
                            "--out", split, "--quiet"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(single, "summary.json")) as a, open(os.path.join(split, "summary.json")) as b:
            one, two = json.load(a), json.load(b)
        # The command lines differ (--out, the launcher); everything measured must not.
        self.assertIn("--out " + single, one.pop("command"))
        self.assertIn("--out " + split, two.pop("command"))
        self.assertEqual(one, two)

    MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]

    def mpmd(self, *ranks):
        """One rank per (working folder, extra arguments): MPI's MPMD form, each rank in its own folder."""
        command = list(self.MPIRUN)
        for i, (folder, extra) in enumerate(ranks):
            os.makedirs(folder, exist_ok=True)
            command += ([":"] if i else []) + ["-n", "1", "--wdir", folder, FPLAB, "run",
                                               os.path.abspath(self.config), "--out", "out", "--quiet"] + extra
        return subprocess.run(command, capture_output=True, text=True, timeout=300)

    def test_mpirun_ranks_need_no_shared_folder(self):
        if shutil.which("mpirun") is None:
            self.skipTest("SKIPPED: mpirun not installed (scripts/setup installs openmpi-bin)")
        single = os.path.join(self.dir, "single")
        self.assertEqual(run("run", self.config, "--out", single, "--quiet").returncode, 0)
        a, b = os.path.join(self.dir, "machine_a"), os.path.join(self.dir, "machine_b")
        r = self.mpmd((a, []), (b, []))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(single, "summary.json")) as f1, open(os.path.join(a, "out", "summary.json")) as f2:
            one, two = json.load(f1), json.load(f2)
        one.pop("command"), two.pop("command")
        self.assertEqual(one, two)
        # Rank 0's folder holds every replica (what rank 1 sent), rank 1's only its own share.
        every = sorted(os.listdir(os.path.join(single, "replicas")))
        self.assertEqual(sorted(os.listdir(os.path.join(a, "out", "replicas"))), every)
        share = sorted(os.listdir(os.path.join(b, "out", "replicas")))
        self.assertTrue(0 < len(share) < len(every), share)
        self.assertFalse(os.path.exists(os.path.join(b, "out", "summary.json")))
        for name in share:
            with open(os.path.join(b, "out", "replicas", name), "rb") as x, \
                    open(os.path.join(a, "out", "replicas", name), "rb") as y:
                self.assertEqual(x.read(), y.read(), name)

    def test_mpirun_a_rank_that_cannot_start_stops_every_rank(self):
        if shutil.which("mpirun") is None:
            self.skipTest("SKIPPED: mpirun not installed (scripts/setup installs openmpi-bin)")
        a, b = os.path.join(self.dir, "rank_a"), os.path.join(self.dir, "rank_b")
        r = self.mpmd((a, []), (b, ["--data-dir", os.path.join(self.dir, "no-such-data")]))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no-such-data", r.stderr)
        self.assertIn("rank 1 stopped before training (its error is above)", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(a, "out", "replicas")))


    def test_diverge_control_identical_impl_and_flip_part_ways(self):
        control = json.loads(run("diverge", self.config, "--variant", "control", "--json").stdout)
        self.assertEqual(control["first_step"], -1)
        self.assertTrue(all(p["l2"] == 0 and p["differing"] == 0 for p in control["curve"]))
        csv = os.path.join(self.dir, "impl.csv")
        r = run("diverge", self.config, "--variant", "impl", "--csv", csv, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        impl = json.loads(r.stdout)
        self.assertGreaterEqual(impl["first_step"], 1)  # the initial weights are the same
        for p in impl["curve"]:
            self.assertEqual(p["differing"] > 0, p["step"] >= impl["first_step"], p)
        self.assertTrue(any("weight" in name for name in impl["first_layers"]))
        with open(csv) as f:
            rows = f.read().strip().splitlines()[1:]
        self.assertEqual(len(rows), len(impl["curve"]))
        for row, p in zip(rows, impl["curve"]):  # full precision: distances of 1e-9 must survive
            step, l2, relative, differing = row.split(",")
            self.assertEqual((int(step), float(l2), float(relative), int(differing)),
                             (p["step"], p["l2"], p["relative_l2"], p["differing"]))
        # 'flip' changes exactly one bit of one initial weight of replica 1
        flip_config = self.config.replace("tiny", "flip")
        with open(flip_config, "w") as f:
            f.write(self.TINY.replace('["impl", "control"]', '["flip"]'))
        flip = json.loads(run("diverge", flip_config, "--variant", "flip", "--json").stdout)
        self.assertEqual(flip["first_step"], 0)
        self.assertEqual(flip["curve"][0]["differing"], 1)


HELP_COMMANDS = ([], ["round"], ["sum"], ["reduce"], ["dot"], ["tree"], ["explore"], ["train"], ["run"], ["diverge"], ["serve"],
                 ["profile"], ["profile", "list"], ["profile", "show"], ["validate"], ["reveal"])


class OwnData(unittest.TestCase):
    """--data-dir: a data set of one's own (3 classes of 12x12 images, files not gzipped)."""

    CONFIG = """name = "own"
[data]
train_subset = 90
[model]
name = "small_cnn"
[training]
epochs = 1
batch = 30
[run]
profiles = ["h100"]
variants = ["impl"]
replicas = 2
"""

    @staticmethod
    def idx(magic, dims, data):
        return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.data = os.path.join(self.dir, "shapes")
        os.mkdir(self.data)
        rng = random.Random(7)
        for split, n in (("train", 120), ("t10k", 30)):
            labels = [i % 3 for i in range(n)]
            # Each class its own brightness, so that even one epoch learns something.
            pixels = [min(255, 60 * labels[i] + rng.randrange(60)) for i in range(n) for _ in range(144)]
            with open(os.path.join(self.data, f"{split}-images-idx3-ubyte"), "wb") as f:
                f.write(self.idx(0x803, [n, 12, 12], pixels))
            with open(os.path.join(self.data, f"{split}-labels-idx1-ubyte"), "wb") as f:
                f.write(self.idx(0x801, [n], labels))
        with open(os.path.join(self.data, "classes.txt"), "w") as f:
            f.write("dark\ngrey\nlight\n")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_train_and_run_take_any_idx_data_set(self):
        r = run("train", "--data-dir", self.data, "--model", "mlp", "--epochs", "2", "--json", "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(json.loads(r.stdout)["test_accuracy"], 0.5)  # chance is 1/3
        config = os.path.join(self.dir, "own.toml")
        with open(config, "w") as f:
            f.write(self.CONFIG)
        out = os.path.join(self.dir, "out")
        r = run("run", config, "--data-dir", self.data, "--out", out, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "per_class.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(sorted({row["class_name"] for row in rows}), ["dark", "grey", "light"])

    def test_a_missing_file_is_one_line(self):
        os.remove(os.path.join(self.data, "t10k-labels-idx1-ubyte"))
        r = run("train", "--data-dir", self.data, "--json")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("t10k-labels-idx1-ubyte.gz: cannot open", r.stderr)


class Reveal(unittest.TestCase):
    """fplab reveal on tests/reveal_targets.cpp's functions: the report, the files, and the refusals."""

    def library(self):
        return os.path.join(os.path.dirname(os.path.dirname(FPLAB)), "tests", "libreveal_targets.so")

    def setUp(self):
        if not os.path.exists(self.library()):
            self.skipTest(f"{self.library()} is not built (tests/CMakeLists.txt builds it with the tests)")
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_json_report_and_files(self):
        dot, report = os.path.join(self.dir, "t.dot"), os.path.join(self.dir, "r.json")
        r = run("reveal", "--so", self.library(), "--symbol", "double_sum", "--n", "20", "--verify", "40",
                "--tree-dot", dot, "--json-out", report, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        with open(report) as f:
            self.assertEqual(json.load(f), doc)
        self.assertEqual(doc["tree"], "(" * 19 + "0+1)" + "".join(f"+{i})" for i in range(2, 20)))
        self.assertIn("all:seq", doc["schedules"])
        self.assertEqual((doc["additions"], doc["depth"]), (19, 19))
        best = doc["verify"]["replays"][0]
        self.assertEqual(best, {"arithmetic": "fp64 accumulation, rounded to fp32 once", "identical": 40})
        with open(dot) as f:
            self.assertTrue(f.read().startswith("digraph"))

    def test_an_order_that_varies_per_call(self):
        # Blocks of eight, added in a fresh random order at every call: a plain probe finds no one
        # tree; --runs finds the blocks, their loops, and a chain of them in a varying order.
        check = Errors.check_error.__get__(self)
        self.assertIn("--runs probes a varying order",
                      check("reveal", "--so", self.library(), "--symbol", "blocks_any_order_sum", "--n", "64"))
        r = run("reveal", "--so", self.library(), "--symbol", "blocks_any_order_sum", "--n", "64", "--runs", "6",
                "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertTrue(doc["varies"])
        self.assertEqual(doc["parts"], [list(range(k, k + 8)) for k in range(0, 64, 8)])
        self.assertEqual(doc["schedules"][0], "contig(8):seq | all:atomic")
        self.assertTrue(doc["chain_of_parts"])
        self.assertLess(doc["uniform_order_distance"], 0.15)
        self.assertIn("--runs", check("reveal", "--so", self.library(), "--symbol", "seq_sum", "--runs", "1"))
        r = run("reveal", "--so", self.library(), "--symbol", "blocks_any_order_sum", "--n", "40", "--runs", "4",
                "--verify", "10", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        verify = json.loads(r.stdout)["verify"]
        self.assertEqual(verify["replays"][0], {"arithmetic": "fp32 additions", "identical": 10})
        self.assertEqual((verify["orders_per_trial"], verify["every_order"]), (120, True))

    def test_tiles_that_restart_at_every_image(self):
        # Images of 20 terms in tiles of 8, 8 and 4, the tiles added in a varying order: the parts
        # restart at every image, and reveal names them each(20)[contig(8):seq] | all:atomic.
        r = run("reveal", "--so", self.library(), "--symbol", "image_tiles_any_order_sum", "--n", "60", "--runs", "6",
                "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertTrue(doc["varies"])
        tiles = [list(range(a, b)) for image in range(0, 60, 20)
                 for a, b in ((image, image + 8), (image + 8, image + 16), (image + 16, image + 20))]
        self.assertEqual(doc["parts"], tiles)
        self.assertIn("each(20)[contig(8):seq] | all:atomic", doc["schedules"])

    def test_blas_signatures(self):
        r = run("reveal", "--so", self.library(), "--symbol", "lanes8_cblas_sdot", "--signature", "cblas_sdot",
                "--n", "24", "--verify", "20", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        report = json.loads(r.stdout)
        self.assertEqual((report["signature"], report["form"]), ("cblas_sdot", "dot"))
        self.assertIn("strided(8):seq | all:tree", report["schedules"])
        r = run("reveal", "--so", self.library(), "--symbol", "fma_chain_cblas_sgemm", "--signature", "cblas_sgemm",
                "--gemm-shape", "4,6", "--n", "12", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("all:seq", json.loads(r.stdout)["schedules"])

    def test_refusals_are_one_line(self):
        check = Errors.check_error.__get__(self)
        self.assertIn("--gemm-shape", check("reveal", "--so", self.library(), "--symbol", "fma_chain_cblas_sgemm",
                                            "--signature", "cblas_sgemm", "--gemm-shape", "0,6"))
        self.assertIn("--signature", check("reveal", "--so", self.library(), "--symbol", "seq_sum", "--signature", "gemv"))
        self.assertIn("cannot load", check("reveal", "--so", os.path.join(self.dir, "none.so"), "--symbol", "f"))
        self.assertIn("no symbol nothing", check("reveal", "--so", self.library(), "--symbol", "nothing"))
        self.assertIn("not a count of 1s", check("reveal", "--so", self.library(), "--symbol", "twice_the_first"))
        self.assertIn("--n", check("reveal", "--so", self.library(), "--symbol", "seq_sum", "--n", "1"))
        missing = os.path.join(self.dir, "missing", "t.dot")
        self.assertIn("missing", check("reveal", "--so", self.library(), "--symbol", "seq_sum", "--tree-dot", missing))


def help_examples(command):
    """The example lines of a command's --help: the indented lines after 'Examples:'."""
    lines = run(*command, "--help").stdout.splitlines()
    start = lines.index("Examples:") + 1
    examples = []
    for line in lines[start:]:
        if not line.startswith(" "):
            break
        examples.append(line.strip())
    return examples


class Help(unittest.TestCase):
    def test_every_command_has_help_with_examples(self):
        section = run("--help").stdout.split("Subcommands:\n")[1].split("\n\n")[0]
        listed = [line.split()[0] for line in section.splitlines()]
        self.assertIn("validate", listed)
        for name in listed:  # a new command must be added to HELP_COMMANDS
            self.assertIn([name], HELP_COMMANDS, name)
        for command in HELP_COMMANDS:
            r = run(*command, "--help")
            self.assertEqual(r.returncode, 0, command)
            self.assertTrue(help_examples(command), command)

    def test_every_help_example_runs_when_pasted(self):
        """Runs every example line of every --help through /bin/sh -c, expecting exit 0.

        The rules, so that the whole takes a few minutes on 2 cores:
        - the lines run from a temporary folder holding profiles/shipped/ and experiments/, and build/
          (the build folder: 'fplab reveal' examples probe build/tests/libreveal_targets.so), with
          fplab's folder on PATH, so files they write land there;
        - experiments/ there holds the shipped TOMLs shrunk: train_subset 200, epochs 1, replicas
          2, only the first profile (the examples are checked for running, not for results);
        - 'fplab train' lines get --train-subset 200 and --epochs 1 (replacing the line's own);
        - explained exclusions: 'fplab validate' needs an NVIDIA GPU (without one it fails
          cleanly, see Train.test_cuda_without_a_gpu_is_one_line), so does '--device cuda';
          lines needing a program that is not installed (mpirun; dot for --svg; gnuplot for
          --plot; scripts/setup installs them all) are skipped.
        """
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        has_gpu = shutil.which("nvidia-smi") is not None
        with tempfile.TemporaryDirectory() as work:
            os.symlink(os.path.join(root, "profiles"), os.path.join(work, "profiles"))
            os.symlink(os.path.dirname(os.path.dirname(FPLAB)), os.path.join(work, "build"))
            os.mkdir(os.path.join(work, "experiments"))
            for name in os.listdir(os.path.join(root, "experiments")):
                if name.endswith(".toml"):
                    with open(os.path.join(root, "experiments", name)) as f:
                        text = f.read()
                    text = re.sub(r"(?m)^train_subset = \d+", "train_subset = 200", text)
                    text = re.sub(r"(?m)^epochs = \d+", "epochs = 1", text)
                    text = re.sub(r"(?m)^replicas = \d+", "replicas = 2", text)
                    text = re.sub(r'(?m)^profiles = \[("[^"]+").*\]', r"profiles = [\1]", text)
                    with open(os.path.join(work, "experiments", name), "w") as f:
                        f.write(text)
            env = dict(os.environ, PATH=os.path.dirname(FPLAB) + os.pathsep + os.environ["PATH"],
                       OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       OMPI_MCA_rmaps_base_oversubscribe="1")
            ran = 0
            for command in HELP_COMMANDS:
                for line in help_examples(command):
                    self.assertIn("fplab", line, f"{command}: example is not an fplab command: {line}")
                    if line.startswith("fplab validate") or ("--device cuda" in line and not has_gpu):
                        continue
                    needs = {"mpirun": line.startswith("mpirun"), "dot": "--svg" in line, "gnuplot": "--plot" in line}
                    if any(needed and shutil.which(program) is None for program, needed in needs.items()):
                        continue
                    shell = line
                    if "fplab train" in line:
                        code, hash_, comment = line.partition(" #")
                        code = re.sub(r"--(train-subset|epochs) \d+", "", code)
                        shell = code.rstrip() + " --train-subset 200 --epochs 1" + hash_ + comment
                    if line.startswith("fplab serve"):
                        # A server runs until stopped: it must start and print its address (on a
                        # free port, since another may hold 8765), then it is stopped.
                        code, _, _ = line.partition("#")
                        code = code.replace("--port 0", "") + " --port 0"
                        server = subprocess.Popen(["/bin/sh", "-c", "exec " + code], cwd=work, env=env,
                                                  stdout=subprocess.PIPE, text=True)
                        try:
                            self.assertIn("http://127.0.0.1:", server.stdout.readline(), line)
                        finally:
                            server.terminate()
                            server.wait(timeout=10)
                        self.assertEqual(server.returncode, 0, line)  # SIGTERM stops it cleanly
                        ran += 1
                        continue
                    r = subprocess.run(["/bin/sh", "-c", shell], cwd=work, env=env, capture_output=True, text=True,
                                       timeout=600)
                    self.assertEqual(r.returncode, 0, f"fplab {' '.join(command)} --help example failed: {line}\n"
                                                      f"ran: {shell}\nstderr: {r.stderr[-2000:]}")
                    ran += 1
            self.assertGreater(ran, 25)


if __name__ == "__main__":
    FPLAB = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=1)
