"""fplab.Schedule and the hardware profiles, against docs/schedules.md and the shipped TOML files."""

import os
import pickle
import tomllib
import unittest

import fplab

SHIPPED = os.path.join(os.path.dirname(__file__), "..", "..", "profiles", "shipped")


class Schedules(unittest.TestCase):
    def test_canonical_text_and_presets(self):
        self.assertEqual(fplab.Schedule("numpy").text, "all:numpy_pairwise")  # docs/schedules.md
        self.assertEqual(fplab.Schedule("numpy-2.2").text, "contig(8192):numpy_pairwise | all:seq")
        self.assertEqual(fplab.Schedule("splitk(4)").text, "split(4):seq | all:seq")
        self.assertEqual(fplab.Schedule(" contig( 32 ) : shfl_down|all :seq").text, "contig(32):shfl_down | all:seq")
        s = fplab.Schedule("cuda-naive-sum(256,64)")
        self.assertEqual(fplab.Schedule(s.text), s)
        self.assertEqual(hash(fplab.Schedule(s.text)), hash(s))
        self.assertEqual(pickle.loads(pickle.dumps(s)), s)
        self.assertEqual(repr(fplab.Schedule("seq")), "Schedule('all:seq')")
        self.assertEqual(str(fplab.Schedule("seq")), "all:seq")

    def test_properties(self):
        self.assertTrue(fplab.Schedule("atomic").nondeterministic)
        self.assertFalse(fplab.Schedule("pairwise").nondeterministic)
        self.assertTrue(fplab.Schedule("exact").order_independent)
        self.assertFalse(fplab.Schedule("seq").order_independent)

    def test_tree_as_dot(self):
        dot = fplab.Schedule("pairwise").dot(4)
        self.assertTrue(dot.startswith("digraph"))
        # Three additions for four terms, one node each, beside the four terms.
        self.assertEqual(dot.count("shape=circle"), 3)


class Profiles(unittest.TestCase):
    def test_every_shipped_profile_is_listed(self):
        shipped = {f[: -len(".toml")] for f in os.listdir(SHIPPED) if f.endswith(".toml")}
        self.assertTrue(shipped)
        self.assertTrue(shipped <= set(fplab.profiles()))
        self.assertEqual(fplab.profiles(), sorted(fplab.profiles()))

    def test_profile_tables_equal_the_toml_files(self):
        for name in ("h100", "v100", "tpu-v3", "rtx5000-tc"):
            with open(os.path.join(SHIPPED, name + ".toml"), "rb") as f:
                toml = tomllib.load(f)
            p = fplab.profile(name)
            with self.subTest(profile=name):
                self.assertEqual(p.name, name)
                self.assertEqual(p.description, toml["description"])
                # built in, or this file where $FPLAB_HW_PROFILES names the folder (scripts/gpu-check)
                self.assertTrue(p.path.endswith((name + ".toml (built in)", os.sep + name + ".toml")), p.path)
                self.assertEqual(p.parallelism, toml.get("parallelism", {}))
                for mode in ("default", "deterministic"):
                    table = getattr(p, mode)
                    self.assertEqual(list(table), ["fwd", "dgrad", "wgrad", "bias_grad", "bn_stats", "softmax", "loss"])
                    for op, choice in table.items():
                        entry = toml[mode][op]
                        text = entry if isinstance(entry, str) else entry["schedule"]
                        self.assertEqual(choice.schedule, fplab.Schedule(text))
                        fmt = entry.get("format") if isinstance(entry, dict) else None
                        self.assertEqual(choice.arithmetic.format, fmt or toml[mode].get("format", "fp32"))
                        self.assertEqual(choice.arithmetic.mode, toml[mode].get("mode", "rne"))

    def test_deterministic_tables_draw_no_noise(self):
        for name in fplab.profiles():
            for op, choice in fplab.profile(name).deterministic.items():
                with self.subTest(profile=name, op=op):
                    self.assertFalse(choice.nondeterministic)

    def test_layer_rules(self):
        rules = fplab.profile("h100-torch").layer_rules
        rule = rules["default"][0]
        self.assertEqual(str(rule), "conv kernel=3 height=14: wgrad=contig(196):seq | all:atomic fp32/rne/fused")
        self.assertEqual(rule.match, "conv kernel=3 height=14")
        self.assertEqual(list(rule.ops), ["wgrad"])
        self.assertTrue(rule.ops["wgrad"].nondeterministic)
        self.assertTrue(rule.matches("conv", 16, 32, 3, 1, 14))
        self.assertTrue(rule.matches("conv", 1, 8, kernel=3, stride=2, height=14))
        self.assertFalse(rule.matches("conv", 16, 32, 3, 1, 7))
        self.assertFalse(rule.matches("conv", 16, 32, 5, 1, 14))
        self.assertFalse(rule.matches("linear", 16, 32))
        with self.assertRaisesRegex(fplab.Error, "layer must be 'conv', 'linear' or 'bn'"):
            rule.matches("pool", 1, 1)
        # eight Winograd weight gradients, three convolutions, eight linear layers, nine bias sums, fourteen batch norms
        self.assertEqual(len(rules["deterministic"]), 42)
        at32 = next(r for r in rules["deterministic"] if r.match == "conv height=14 batch=32")
        self.assertTrue(at32.matches("conv", 16, 32, 3, 1, 14, 32))  # the batch's images
        self.assertFalse(at32.matches("conv", 16, 32, 3, 1, 14, 64))
        split_k = [r for r in rules["deterministic"] if r.match in ("linear in=512 out=10", "linear in=784 out=128")]
        self.assertEqual([str(r.ops["fwd"].schedule) for r in split_k],
                         ["contig(104):seq | all:seq", "contig(112):seq | all:seq"])
        by_rows = next(r for r in rules["deterministic"] if r.match == "linear in=512 out=10 batch=128")
        self.assertTrue(by_rows.matches("linear", 512, 10, batch=128))
        self.assertFalse(by_rows.matches("linear", 512, 10, batch=64))
        bn = [r for r in rules["deterministic"] if r.batch_norm is not None]
        at28_8, at14_8 = bn.pop(0), bn.pop(0)  # the last batch of small_cnn_bn's recipes: the singleread kernels
        self.assertEqual((at28_8.match, at28_8.batch_norm), ("bn height=28 batch=8", "cudnn"))
        self.assertEqual((at14_8.match, at14_8.batch_norm), ("bn height=14 batch=8", "cudnn"))
        self.assertTrue(at28_8.matches("bn", 16, 0, 0, 0, 28, 8))
        self.assertFalse(at28_8.matches("bn", 16, 0, 0, 0, 28, 64))
        self.assertTrue(at14_8.matches("bn", 32, 0, 0, 0, 14, 8))
        self.assertFalse(at14_8.matches("bn", 32, 0, 0, 0, 28, 8))
        at28_128 = bn.pop(1)
        self.assertEqual((at28_128.match, at28_128.batch_norm), ("bn height=28 batch=128", "cudnn-nchw"))
        self.assertTrue(at28_128.matches("bn", 64, 0, 0, 0, 28, 128))
        self.assertEqual([(r.match, r.batch_norm) for r in bn],
                         [("bn height=28 batch=64", "cudnn-nchw"), ("bn height=16 batch=128", "cudnn-nchw"),
                          ("bn height=32 batch=128", "cudnn-nchw"), ("bn height=14 batch=128", "cudnn-nchw-backward"),
                          ("bn height=14 batch=64", "cudnn"), ("bn height=8", "cudnn"), ("bn height=7 batch=8", "cudnn")]
                         + [(f"bn height={h}", "cudnn") for h in (7, 4, 3, 1)])
        at14 = bn[4]
        self.assertTrue(at14.matches("bn", 32, 0, 0, 0, 14, 64))
        self.assertFalse(at14.matches("bn", 32, 0, 0, 0, 14, 128))  # cuDNN's other backward kernel there: bn[3]
        self.assertTrue(bn[3].matches("bn", 32, 0, 0, 0, 14, 128))
        self.assertTrue(bn[7].matches("bn", 256, 0, 0, 0, 7, 128))
        self.assertFalse(bn[6].matches("bn", 256, 0, 0, 0, 7, 128))  # the 8-image rule
        self.assertFalse(at14.matches("bn", 16, 0, 0, 0, 28, 64))
        self.assertTrue(bn[0].matches("bn", 16, 0, 0, 0, 28, 64))
        self.assertFalse(at14.matches("conv", 32, 32, 3, 1, 14))
        self.assertEqual(sorted(at14.ops), ["bias_grad", "bn_stats"])
        self.assertEqual(sorted(bn[0].ops), [])  # the NCHW kernels' own orders: no schedule
        self.assertIsNone(rule.batch_norm)
        winograd = [r for r in rules["deterministic"] if r.conv_wgrad is not None]
        at8 = winograd.pop(0)  # the last batch of small_cnn_bn's recipes: cuDNN leaves Winograd
        self.assertEqual((at8.match, at8.conv_wgrad), ("conv in=1 out=16 kernel=3 stride=1 height=28 batch=8", "gemm"))
        self.assertTrue(at8.matches("conv", 1, 16, 3, 1, 28, 8))
        self.assertFalse(at8.matches("conv", 1, 16, 3, 1, 28, 64))
        self.assertEqual([(r.match, r.conv_wgrad) for r in winograd],
                         [("conv in=1 out=16 kernel=3 stride=1 height=28", "winograd"),
                          ("conv in=32 out=32 kernel=3 stride=1 height=7", "winograd"),
                          ("conv in=32 out=64 kernel=3 stride=1 height=7", "winograd"),
                          ("conv in=64 out=128 kernel=3 stride=1 height=3", "winograd")]
                         + [(f"conv in={c} out={c} kernel=3 stride=1 height={h}", "winograd")
                            for c, h in ((64, 32), (128, 16), (256, 8), (512, 4))])
        self.assertEqual(str(winograd[0].ops["wgrad"].schedule), "strided(32):seq | all:shfl_down")  # cuBLAS's gemv
        self.assertFalse(winograd[3].matches("conv", 64, 128, 3, 1, 7))
        self.assertTrue(winograd[1].matches("conv", 32, 32, 3, 1, 7))
        self.assertIsNone(rule.conv_wgrad)
        self.assertIn("conv_wgrad=winograd", str(winograd[0]))
        self.assertEqual(fplab.profile("h100").layer_rules, {"default": [], "deterministic": []})

    def test_arguments_feed_reduce_dot_and_matmul(self):
        import numpy as np

        a = np.ones((4, 8), np.float32)
        for op in fplab.profile("h100").default.values():
            self.assertEqual(fplab.matmul(a, a.T.copy(), **op.arguments())[0, 0], 8.0)
            self.assertEqual(fplab.reduce(np.ones(8), **op.arguments()), 8.0)

    def test_a_profile_file_by_path_and_profiles_dir(self):
        path = os.path.join(SHIPPED, "t4.toml")
        self.assertEqual(fplab.profile(path).name, "t4")
        self.assertEqual(fplab.profile(path).path, path)
        self.assertIn("t4", fplab.profiles([SHIPPED]))


if __name__ == "__main__":
    unittest.main()
