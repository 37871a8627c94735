#!/usr/bin/env python3
"""One of fplab's experiment recipes (a TOML file of experiments/) trained in PyTorch: emulated
profiles beside PyTorch's own kernels, in the same training program.

  experiments/recipe_torch.py run experiments/hardware.toml --profiles h100-torch,native \\
      --variants impl --replicas 24 --device cuda --workers 4 --out results/hardware-torch
  experiments/recipe_torch.py table results/hardware-torch results/hardware-tf32
  for s in 1 2 3 4; do experiments/recipe_torch.py run experiments/batchnorm_sgd.toml --algo-seed $s \
      --profiles native,h100-torch --variants impl --device cuda --workers 4 --out results/bsgd-$s; done
  experiments/recipe_torch.py compare results/bsgd-1 results/bsgd-2 results/bsgd-3 results/bsgd-4
  experiments/recipe_torch.py diverge experiments/hardware.toml --profiles h100-torch,native \\
      --pairs 4 --device cuda --out results/hardware-diverge.csv
  experiments/recipe_torch.py figure --out diverge.png results/hardware-diverge.csv

``run`` reads the file as ``fplab run`` does (the same checks and defaults), builds the model with
fplab's initial weights (fplab.torch.models.build), takes the training subset ``fplab run`` takes
(fplab._core.training_examples of the run's algo seed) and trains every (profile, variant, replica)
through fplab.torch.experiment: the emulated profiles through fplab.torch.emulate, ``native`` with
PyTorch's own kernels on the device. It writes ``fplab run``'s files into --out; --resume keeps the
replicas already there.

``--math`` says whose exp and log the emulated replicas take, and with them the loss's formulas:
``libm`` (the default) the C library's and fplab's C++ layers' (SoftmaxCrossEntropy), so that the
replicas are the bits ``fplab run`` gives; ``torch`` PyTorch's own composition (log_softmax, then
nll_loss) with the device's exp and log, as PyTorch's kernels on that device compute them. Set
beside a GPU's ``native`` replicas, take ``torch``: with ``libm`` every step's loss gradient
differs from the chip's in the last bits, so the emulation trains from another trajectory than the
chip's from the first step on (``diverge --against``; docs/results/calibration_torch.md).

Why: ``fplab run`` replays a recipe in fplab's C++ trainer, a real GPU trains it in PyTorch. Both
here run one program, so that an emulated profile's churn and a real device's can be compared with
nothing else different (issue 18's calibration; docs/results.md).

Not taken: augmentation (data.augment_pad, data.flip) and run.format other than fp32 (say so and
stop). The training subset is the one of the run's algo seed for every replica: the ALGO variants'
replicas differ in weights, order and dropout, not in which examples they see (fplab run draws the
subset per algo seed too when data.train_subset is set; use the impl and control variants for an
exact match).

``diverge`` trains pairs of replicas of the IMPL variant in lockstep (the same weights and
batches, impl seeds run.impl_seed + 2p and + 2p + 1 for an emulated profile; two runs of PyTorch's
default mode for ``native``, of its deterministic mode for ``native:deterministic``) and writes the
L2 distance between the pair's weights after every step to a CSV (profile, pair, step, l2; the L2
of fplab run's reports, || w1 / ||w1|| - w2 / ||w2|| ||) — with ``--tensors K`` also, for the first
K steps, per parameter tensor and per layer what differs — with a table of the median over pairs at
a few steps on stdout: where two profiles' final churn differs, whether the distance starts apart
(the size of a step's noise) or grows apart (the training's amplification of it). With
``--against PROFILE`` each pair's second twin trains under PROFILE: ``--profiles
native:deterministic --against h100-torch:deterministic`` says after which step (epoch, batch,
batch size) a device's deterministic training and its emulation first part, and with ``--tensors
K`` in which tensor and layer. (A process that trains a ``native:deterministic`` twin sets
cuBLAS's deterministic workspace, :4096:8, for its default-mode twins too.)

``compare`` sets a profile's IMPL churn beside a reference's (``native``) over several algo seeds,
one ``run`` folder per seed: which near-ties a run meets (two max-pool inputs an ulp apart, say) is
fixed by its algo seed and moves that seed's churn by more than its replica interval, on a device
and in an emulation alike, so a single seed can miss either way by chance; the mean over seeds
(with an interval that resamples the seeds) is the calibration's measure.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Sequence

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


class FplabModel:
    """model_fn for fplab.torch.experiment: fplab's model with the algo seed's initial weights (a
    class at the top of the module, so that worker processes can unpickle it)."""

    def __init__(self, model: dict, input_shape: Sequence[int], classes: int) -> None:
        self.model, self.input_shape, self.classes = model, list(input_shape), classes

    def __call__(self, seed: int):
        from fplab.torch.models import build

        m = self.model
        return build(m["name"], hidden=m.get("hidden", [128]), kernel=m.get("kernel", 3),
                     dropout=m.get("dropout", 0.0), algo_seed=seed, input_shape=self.input_shape,
                     classes=self.classes)


class FplabLoss:
    """loss_fn: softmax cross-entropy under the last layer's index, as fplab's C++ trainer keys it."""

    def __init__(self, last_layer: int) -> None:
        self.last_layer = last_layer

    def __call__(self, logits, labels):
        import torch.nn.functional as F

        from fplab.torch import layer

        with layer(self.last_layer):
            return F.cross_entropy(logits, labels)


def _arguments(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  %(prog)s run experiments/quick.toml --profiles h100-torch,native --variants impl "
               "--replicas 2 --out /tmp/quick-torch\n"
               "  %(prog)s table /tmp/quick-torch\n"
               "  %(prog)s run experiments/quick.toml --algo-seed 2 --profiles h100-torch,native --variants impl "
               "--replicas 2 --out /tmp/quick-torch-2\n"
               "  %(prog)s compare /tmp/quick-torch /tmp/quick-torch-2\n")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="train the replicas of a recipe and write fplab run's files")
    run.add_argument("recipe", help="an experiment TOML file (experiments/*.toml)")
    run.add_argument("--profiles", help="comma-separated profile names, 'native' for PyTorch's own kernels "
                                        "(default: the file's run.profiles)")
    run.add_argument("--variants", help="comma-separated (default: the file's run.variants)")
    run.add_argument("--replicas", type=int, help="per profile and variant (default: the file's run.replicas)")
    run.add_argument("--data-dir", default=DEFAULT_DATA, help="the four IDX files (default: %(default)s)")
    run.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default: %(default)s)")
    run.add_argument("--workers", type=int, default=1, help="replicas trained at a time (default: %(default)s)")
    run.add_argument("--tf32", choices=("off", "on"), default="off",
                     help="PyTorch's TF32 switches for the native replicas (default: off; 'on' turns on TF32 in "
                          "cuDNN's convolutions only, PyTorch's default)")
    run.add_argument("--math", choices=("libm", "torch"), default="libm",
                     help="the emulated replicas' exp, log and loss: the C library's and fplab's C++ layers' "
                          "(default: fplab run's bits) or PyTorch's on the device (beside a GPU's native replicas)")
    run.add_argument("--out", required=True, help="the results folder")
    run.add_argument("--resume", action="store_true", help="keep the replicas already in --out")
    run.add_argument("--algo-seed", type=int, help="the run's algo seed (default: the file's run.algo_seed): "
                                                   "initial weights, training subset, batch order")
    diverge = commands.add_parser("diverge", help="the weight distance of IMPL pairs trained in lockstep, step by step")
    diverge.add_argument("recipe", help="an experiment TOML file (experiments/*.toml)")
    diverge.add_argument("--profiles", required=True,
                         help="comma-separated profile names, 'native' for PyTorch's own kernels in its default "
                              "mode, 'native:deterministic' in its deterministic mode")
    diverge.add_argument("--pairs", type=int, default=4, help="pairs per profile (default: %(default)s)")
    diverge.add_argument("--data-dir", default=DEFAULT_DATA, help="the four IDX files (default: %(default)s)")
    diverge.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default: %(default)s)")
    diverge.add_argument("--tf32", choices=("off", "on"), default="off", help="as for run (default: off)")
    diverge.add_argument("--math", choices=("libm", "torch"), default="libm", help="as for run (default: libm)")
    diverge.add_argument("--culprit", default="", metavar="NPZ",
                         help="at the first step where the twins part (weights equal before it), the block that "
                              "computed the first differing value from equal inputs, saved for an offline fit: its "
                              "input, output gradient, parameters and both twins' values (NumPy .npz, written whole)")
    diverge.add_argument("--out", required=True, help="the CSV file (written whole: a temporary name, then renamed)")
    diverge.add_argument("--algo-seed", type=int, help="as for run (default: the file's run.algo_seed)")
    diverge.add_argument("--against", default="", metavar="PROFILE",
                         help="train each pair's second twin under PROFILE instead of the first's profile: where "
                              "two setups given the same weights and batches part, step by step (native, "
                              "native:deterministic or an emulated profile; e.g. --profiles native:deterministic "
                              "--against h100-torch:deterministic)")
    diverge.add_argument("--steps", type=int, default=0, metavar="S",
                         help="stop every pair after S steps, or at the run's end if sooner (default: 0, the "
                              "recipe's whole run)")
    diverge.add_argument("--tensors", type=int, default=0, metavar="K",
                         help="also write OUT's stem + .tensors.csv: per parameter tensor and each of the first K "
                              "steps, the twins' gradients and weights compared; and + .layers.csv: per layer, its "
                              "outputs and their gradients compared, and for a max-pool layer the windows whose "
                              "largest input differs (default: 0, none)")
    table = commands.add_parser("table", help="one Markdown table of the summary.json of several runs")
    table.add_argument("folders", nargs="+")
    compare = commands.add_parser("compare", help="IMPL churn against a reference profile over algo seeds: one "
                                                  "run folder per algo seed (run --algo-seed), both profiles in each")
    compare.add_argument("--reference", default="native", help="the profile compared with (default: %(default)s)")
    compare.add_argument("--later-wins", action="store_true",
                         help="where two folders hold a profile's replicas at one seed, take the later folder's (a "
                              "profile rerun after a change) instead of stopping; the table notes each")
    compare.add_argument("folders", nargs="+")
    figure = commands.add_parser("figure", help="diverge's curves: the median distance over pairs, step by step")
    figure.add_argument("--out", required=True, help="the figure: .png, .svg or .pdf")
    figure.add_argument("--title", default="Weight distance of IMPL twins trained in lockstep (median over pairs)")
    figure.add_argument("csvs", nargs="+", metavar="CSV", help="diverge's CSV files; each curve is named "
                                                                "'FILE: profile'")
    return parser.parse_args(argv)


class Setting:
    """A recipe file read and checked, PyTorch's TF32 switches set, the data set and training subset loaded."""

    def __init__(self, args: argparse.Namespace) -> None:
        import numpy as np
        import torch

        import fplab
        from fplab import _core

        self.recipe = json.loads(_core.load_experiment_file(args.recipe))
        data_keys, run = self.recipe["data"], self.recipe["run"]
        if args.algo_seed is not None:
            if not 0 <= args.algo_seed < 2**63:
                raise fplab.Error(f"recipe_torch.py: --algo-seed {args.algo_seed}: a seed is 0 to 2^63 - 1")
            run["algo_seed"] = args.algo_seed
        if data_keys["augment_pad"] or data_keys["flip"]:
            raise fplab.Error(f"{args.recipe}: augmentation (data.augment_pad, data.flip) is not taken here")
        if run["format"] != "fp32":
            raise fplab.Error(f"{args.recipe}: run.format {run['format']} is not taken here (fp32 only)")
        # PyTorch's default: TF32 in cuDNN's convolutions, not in cuBLAS's matmuls.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = args.tf32 == "on"
        self.data = _core.load_image_dataset(args.data_dir)
        examples = _core.training_examples(self.data.labels("train"), data_keys["train_subset"],
                                           data_keys.get("imbalance_class", -1),
                                           data_keys.get("imbalance_percent", 100.0), run["algo_seed"])
        chosen = torch.from_numpy(examples.astype(np.int64))
        images = torch.from_numpy(np.array(self.data.images("train")))
        labels = torch.from_numpy(np.array(self.data.labels("train"))).long()
        self.train = (images[chosen], labels[chosen])
        self.test = (torch.from_numpy(np.array(self.data.images("test"))),
                     torch.from_numpy(np.array(self.data.labels("test"))).long())
        self.model_fn = FplabModel(self.recipe["model"], images.shape[1:], self.data.classes)
        self.loss_fn = FplabLoss(self.model_fn(run["algo_seed"]).indices[-1])


def _run(args: argparse.Namespace) -> None:
    import fplab.torch

    setting = Setting(args)
    recipe, data = setting.recipe, setting.data
    training, run = recipe["training"], recipe["run"]
    fplab.torch.experiment(
        setting.model_fn, setting.train, setting.test, training,
        args.profiles.split(",") if args.profiles else run["profiles"],
        args.variants.split(",") if args.variants else run["variants"],
        args.replicas if args.replicas is not None else run["replicas"], args.out,
        name=recipe["name"], description=f"{recipe['description']} Trained in PyTorch (experiments/recipe_torch.py); "
                                         f"TF32 in cuDNN's convolutions {args.tf32}.",
        class_names=data.class_names, loss_fn=setting.loss_fn, algo_seed=run["algo_seed"],
        impl_seed=run["impl_seed"], resume=args.resume, device=args.device, math=args.math, workers=args.workers)


_DIVERGE_STEPS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)

#: diverge's names for PyTorch's own kernels: whether each runs in deterministic mode
_NATIVE_MODES = {"native": False, "native:deterministic": True}


_TENSOR_HEADER = ("profile,pair,step,tensor,elements,gradient_differing,gradient_max_difference,gradient_max,"
                  "gradient_sign_differing,weight_differing,weight_max_difference")


def _tensor_rows(profile: str, pair: int, step: int, names, gradients, weights1, weights2) -> List[str]:
    """Per parameter tensor after a lockstep step: how many elements of the twins' gradients and
    weights differ, by how much at most, and how many gradients differ in sign (or are 0 in one)."""
    import torch

    rows = []
    for name, g1, g2, w1, w2 in zip(names, gradients[0], gradients[1], weights1, weights2):
        dg, dw = (g1.double() - g2.double()).abs(), (w1.detach().double() - w2.detach().double()).abs()
        sign = int((torch.sign(g1) != torch.sign(g2)).sum())
        rows.append(f"{profile},{pair},{step},{name},{g1.numel()},{int((g1 != g2).sum())},{float(dg.max()):.6g},"
                    f"{float(g1.abs().max()):.6g},{sign},{int((w1 != w2).sum())},{float(dw.max()):.6g}")
    return rows


def _tensors_path(out: str, kind: str = "tensors") -> str:
    stem = out[:-4] if out.endswith(".csv") else out
    return f"{stem}.{kind}.csv"


_LAYER_HEADER = "profile,pair,step,layer,block,value,elements,differing,max_difference,max_magnitude,window_flips"


class LayerWatch:
    """Forward hooks on a FplabNet's blocks for one pass: each block's output and, after the
    backward pass, its output's gradient; a max-pool block's input too (which window's largest
    element wins); with ``inputs``, every block's input in ``self.inputs`` (for --culprit)."""

    def __init__(self, model, inputs: bool = False) -> None:
        from fplab.torch.models import MaxPool

        self.values: dict = {}
        self.inputs: dict = {}
        self.keep_inputs = inputs
        self.handles = [block.register_forward_hook(self._hook(i, isinstance(block, MaxPool)))
                        for i, block in enumerate(model.blocks)]

    def _hook(self, index: int, pool: bool):
        def hook(module, inputs, output):
            self.values[index, "output"] = output.detach().clone()
            if self.keep_inputs or pool:
                kept = inputs[0].detach().clone()
                if self.keep_inputs:
                    self.inputs[index] = kept
                if pool:
                    self.values[index, "input"] = kept
            if output.requires_grad:
                output.register_hook(lambda g: self.values.__setitem__((index, "gradient"), g.detach().clone()))
        return hook

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _window_argmax(x):
    """The position of the first largest element of every 2 x 2 window of x (B, C, H, W)."""
    return x.unfold(2, 2, 2).unfold(3, 2, 2).reshape(*x.shape[:2], x.shape[2] // 2, x.shape[3] // 2, 4).argmax(-1)


def _layer_rows(profile: str, pair: int, step: int, descriptions, first: dict, second: dict) -> List[str]:
    """Per block of one lockstep step: how many elements of the twins' outputs and output gradients
    differ and by how much at most; for a max-pool block, how many windows' winners differ."""
    rows = []
    for (index, value) in sorted(k for k in first if k in second):
        a, b = first[index, value], second[index, value]
        flips = ""
        if value == "input":
            if a.dim() != 4 or a.shape[2] < 2 or a.shape[3] < 2:
                continue
            flips = str(int((_window_argmax(a) != _window_argmax(b)).sum()))
        difference = (a.double() - b.double()).abs()
        rows.append(f"{profile},{pair},{step},{index},\"{descriptions[index]}\",{value},{a.numel()},"
                    f"{int((a != b).sum())},{float(difference.max()):.6g},{float(a.abs().max()):.6g},{flips}")
    return rows


def _culprit(blocks: int, watches, gradients, names) -> tuple:
    """Where a step of two twins that started it with equal weights first parts, as (block, what,
    twin 0's value, twin 1's value), or None: in the forward pass the first block whose output
    differs (its input is equal: the block before it agreed); else, in the backward pass, from the
    last block down, a block whose output gradient differs (the loss's gradient if it is the last
    block, else the next block's input gradient: what = "loss gradient" or "input gradient"), or
    whose parameters' gradient differs (what = "gradient of NAME")."""
    first, second = watches[0].values, watches[1].values
    for i in range(blocks):
        if (i, "output") in first and not bool((first[i, "output"] == second[i, "output"]).all()):
            return i, "output", first[i, "output"], second[i, "output"]
    by_block: dict = {}
    for name, g0, g1 in zip(names, gradients[0], gradients[1]):
        by_block.setdefault(int(name.split(".")[1]), []).append((name, g0, g1))
    for j in reversed(range(blocks)):
        if (j, "gradient") in first and not bool((first[j, "gradient"] == second[j, "gradient"]).all()):
            return ((j, "loss gradient") if j == blocks - 1 else (j + 1, "input gradient")) + (
                first[j, "gradient"], second[j, "gradient"])
        for name, g0, g1 in by_block.get(j, []):
            if not bool((g0 == g1).all()):
                return j, f"gradient of {name}", g0, g1
    return None


def _save_culprit(path: str, step: int, found: tuple, model, watch, before: dict) -> str:
    """found (of _culprit) with what an offline fit needs, as an .npz written whole: the block's
    input and output gradient (twin 0's, equal in both), its parameters before the step's update,
    and both twins' differing values; returns a line saying what was saved."""
    import os

    import numpy as np

    block, what, a, b = found
    description = "the loss" if what == "loss gradient" else model.descriptions[block]
    arrays = {"step": np.array(step), "block": np.array(block), "twin0": a.cpu().numpy(), "twin1": b.cpu().numpy()}
    if what == "loss gradient":  # the loss has no parameters; its input is the logits
        arrays["input"] = watch.values[block, "output"].cpu().numpy()
    else:
        arrays["input"] = watch.inputs[block].cpu().numpy()
        if (block, "gradient") in watch.values:
            arrays["output_gradient"] = watch.values[block, "gradient"].cpu().numpy()
        prefix = f"blocks.{block}."
        arrays.update({"parameter:" + k[len(prefix):]: v.cpu().numpy() for k, v in before.items()
                       if k.startswith(prefix)})
    folder, base = os.path.split(os.path.abspath(path))
    temporary = os.path.join(folder, f".{base}.tmp.npz")
    np.savez_compressed(temporary, what=np.array(what), description=np.array(description), **arrays)
    os.replace(temporary, path)
    differing = int((a != b).sum())
    return (f"culprit at step {step}: block {block} ({description}), its {what}: {differing} of {a.numel()} "
            f"elements differ; saved to {path}")


def _write_whole(path: str, rows: List[str]) -> None:
    """The rows as a file, written whole or not at all (fplab's own atomic write)."""
    from fplab import _core

    _core.write_file_atomically(path, "\n".join(rows) + "\n")


def _diverge(args: argparse.Namespace) -> None:
    import os

    import numpy as np
    import torch

    import fplab
    from fplab import _core
    from fplab.torch import emulate
    from fplab.torch._native_run import NativeMode, prepare_deterministic_cublas
    from fplab.torch._table import load_table
    from fplab.torch.models import Optimizer

    if args.pairs < 1:
        raise fplab.Error("recipe_torch.py diverge: --pairs must be at least 1")
    if args.steps < 0:
        raise fplab.Error("recipe_torch.py diverge: --steps must be 0 (the whole run) or more")
    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise fplab.Error(f"recipe_torch.py diverge: cannot write into {folder} (--out)")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise fplab.Error(f"recipe_torch.py diverge: --device {args.device}, but this PyTorch sees no CUDA device")
    profiles = args.profiles.split(",")
    for profile in profiles + ([args.against] if args.against else []):  # resolved before anything trains
        if profile not in _NATIVE_MODES:
            load_table(profile)
    if any(_NATIVE_MODES.get(p) for p in profiles + [args.against]):
        prepare_deterministic_cublas(torch.device(args.device))  # before this process's first GEMM
    setting = Setting(args)
    training, run = setting.recipe["training"], setting.recipe["run"]
    x, y = (t.to(args.device) for t in setting.train)
    n = len(x)
    size = n if training["batch"] == 0 else min(training["batch"], n)
    batches = (n + size - 1) // size
    last = args.steps or training["epochs"] * batches
    rows = ["profile,pair,step,l2"]
    tensor_rows, layer_rows = [_TENSOR_HEADER], [_LAYER_HEADER]
    medians = {}
    first_differences = []
    culprit_line = ""
    for profile in profiles:
        second = args.against or profile
        label = profile if second == profile else f"{profile} vs {second}"
        curves = []
        for pair in range(args.pairs):
            twins = []
            for member in range(2):
                torch.manual_seed(run["algo_seed"])
                model = setting.model_fn(run["algo_seed"]).to(args.device)
                model.train()
                trained = [p for p in model.parameters() if p.requires_grad]
                optimizer = Optimizer([(p, p.dim() > 1) for p in trained], training["optimizer"], training["lr"],
                                      training.get("momentum", 0.9), training.get("weight_decay", 0.0),
                                      decay_every=training.get("lr_decay_every", 0),
                                      decay_factor=training.get("lr_decay_factor", 0.1))
                name = profile if member == 0 else second
                mode = (NativeMode(_NATIVE_MODES[name]) if name in _NATIVE_MODES
                        else emulate(name, run["impl_seed"] + 2 * pair + member, math=args.math))
                twins.append((model, trained, optimizer, mode))
            curve, step, first_difference = [], 0, None
            names = [name for name, p in twins[0][0].named_parameters() if p.requires_grad]
            for epoch in range(training["epochs"]):
                if step >= last:
                    break
                order = torch.from_numpy(np.asarray(_core.epoch_order(n, run["algo_seed"], epoch), dtype=np.int64))
                for b in range(min(batches, last - step)):
                    chosen = order[b * size:(b + 1) * size].to(args.device)
                    gradients, layers, watches, before = [], [], [], {}
                    hunting = bool(args.culprit) and not culprit_line and first_difference is None
                    for model, trained, optimizer, mode in twins:
                        model.set_step(step)  # fplab's dropout masks, keyed by the step
                        for p in trained:
                            p.grad = None
                        watch = LayerWatch(model, inputs=hunting) if step < args.tensors or hunting else None
                        with mode:
                            setting.loss_fn(model(x[chosen]), y[chosen]).backward()
                        if watch is not None:
                            watch.close()
                            layers.append(watch.values)
                            watches.append(watch)
                            gradients.append([p.grad.detach().clone() for p in trained])
                        if hunting and not before:  # the first twin's parameters, before the update
                            before = {k: v.detach().clone() for k, v in model.named_parameters()}
                        optimizer.step(epoch)
                    found = _culprit(len(twins[0][0].blocks), watches, gradients, names) if hunting else None
                    if found is not None:
                        culprit_line = _save_culprit(args.culprit, step + 1, found, twins[0][0], watches[0], before)
                        print(culprit_line, file=sys.stderr, flush=True)
                    step += 1
                    if step <= args.tensors:
                        tensor_rows += _tensor_rows(label, pair, step, names, gradients, twins[0][1], twins[1][1])
                        layer_rows += _layer_rows(label, pair, step, twins[0][0].descriptions, *layers)
                    with torch.no_grad():  # fplab run's L2: || w1 / ||w1|| - w2 / ||w2|| ||
                        w1, w2 = (torch.cat([p.double().reshape(-1) for p in t[1]]) for t in twins)
                        l2 = float(torch.linalg.norm(w1 / torch.linalg.norm(w1) - w2 / torch.linalg.norm(w2)))
                        if first_difference is None and bool((w1 != w2).any()):
                            first_difference = (step, epoch, b, len(chosen))
                    curve.append(l2)
                    rows.append(f"{label},{pair},{step},{l2:.9g}")
            curves.append(curve)
            where = ("weights equal throughout" if first_difference is None else
                     "weights first differ after step {} (epoch {}, batch {} of {} examples)".format(*first_difference))
            print(f"{label} pair {pair}: L2 {curve[-1]:.4g} after {step} steps; {where}", file=sys.stderr, flush=True)
            first_differences.append((label, pair, where))
        medians[label] = np.median(np.array(curves), axis=0)
    _write_whole(args.out, rows)
    if args.tensors:
        _write_whole(_tensors_path(args.out), tensor_rows)
        _write_whole(_tensors_path(args.out, "layers"), layer_rows)
    steps = [s for s in _DIVERGE_STEPS if s <= len(next(iter(medians.values())))]
    print("| profile | " + " | ".join(f"step {s}" for s in steps) + " |")
    print("|---|" + "---|" * len(steps))
    for profile, median in medians.items():
        print(f"| {profile} | " + " | ".join(f"{median[s - 1]:.3g}" for s in steps) + " |")
    for label, pair, where in first_differences:
        print(f"{label}, pair {pair}: {where}")
    if args.culprit:
        print(culprit_line or "no culprit: the twins never parted (nothing saved)")


def _figure(args: argparse.Namespace) -> None:
    """One line per (file, profile): the median over pairs of the distance after each step, log scale."""
    import os

    import numpy as np

    from fplab import _core

    curves = []
    for path in args.csvs:
        by_profile: dict = {}
        for row in _csv_rows(path):
            by_profile.setdefault(row["profile"], {}).setdefault(int(row["pair"]), []).append(float(row["l2"]))
        stem = os.path.splitext(os.path.basename(path))[0]
        for profile, pairs in by_profile.items():
            steps = min(len(c) for c in pairs.values())
            curves.append((f"{stem}: {profile}", np.median(np.array([c[:steps] for c in pairs.values()]), axis=0)))
    if not curves:
        raise ValueError("no rows in the CSV files given")
    steps = max(len(c) for _, c in curves)
    lines = [" ".join([str(s + 1)] + [f"{c[s]:.6g}" if s < len(c) and c[s] > 0 else "NaN" for _, c in curves])
             for s in range(steps)]
    plots = ", ".join(f"'data.dat' using 1:{k + 2} with lines lw 2 title {_core.gnuplot_quoted(name)} noenhanced"
                      for k, (name, _) in enumerate(curves))
    script = (f"set title {_core.gnuplot_quoted(args.title)}\nset xlabel 'training step'\n"
              "set ylabel 'normalised L2 distance of the weights'\nset logscale y\nset format y '10^{%L}'\n"
              "set grid\nset key top left\nset datafile missing 'NaN'\n"
              f"plot {plots}\n")
    _core.render_gnuplot(args.out, script, "\n".join(lines) + "\n", 1000, 560)


def _csv_rows(path: str) -> List[dict]:
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main(argv: List[str]) -> int:
    args = _arguments(argv)
    if args.command in ("table", "compare", "figure"):
        from fplab.torch.summary_table import markdown, seed_comparison

        try:
            if args.command == "table":
                sys.stdout.write(markdown(args.folders))
            elif args.command == "compare":
                sys.stdout.write(seed_comparison(args.folders, args.reference, args.later_wins))
            else:
                _figure(args)
        except (OSError, KeyError, ValueError, RuntimeError) as error:
            print(f"recipe_torch.py: {error}", file=sys.stderr)
            return 2
        return 0
    import fplab

    try:
        _run(args) if args.command == "run" else _diverge(args)
    except fplab.Error as error:
        print(error, file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as error:  # a file that cannot be written; torch's device errors
        print(f"recipe_torch.py: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
