"""One Markdown table of the results of several experiment folders (``fplab run`` or
fplab.torch.experiment): a row per (profile, variant) of each folder's summary.json, with the
95% intervals the summary states (bootstrap over replicas).

>>> from fplab.torch.summary_table import markdown
>>> print(markdown(["results/hardware-torch", "results/hardware-native"]))

``seed_comparison`` sets a profile's churn beside a reference's (``native``) over algo seeds, one
folder per seed.
"""

from __future__ import annotations

import json
import os
from typing import List, Sequence

_HEADER = ("| run | profile | variant | replicas | accuracy % (mean) | accuracy sd % [95% CI] | churn % [95% CI] "
           "| L2 [95% CI] | per-class sd max % | identical |\n|---|---|---|---|---|---|---|---|---|---|\n")


def groups(folders: Sequence[str]) -> List[dict]:
    """Every (profile, variant) group of the folders' summary.json, the folder's name added as 'run'."""
    out = []
    for folder in folders:
        with open(os.path.join(folder, "summary.json")) as f:
            summary = json.load(f)
        for g in summary["results"]:
            out.append(dict(g, run=os.path.basename(os.path.normpath(folder))))
    return out


def _percent(x: float) -> str:
    return f"{100 * x:.2f}"


def markdown(folders: Sequence[str]) -> str:
    """The table: accuracy, its sd, churn and L2 with their 95% intervals over replicas, the largest
    per-class accuracy sd, and whether the replicas were bit-identical."""
    rows = []
    for g in groups(folders):
        low, high = g["churn_ci95_replicas"]
        l2_low, l2_high = g["l2_ci95_replicas"]
        sd_low, sd_high = g["accuracy_std_ci95_replicas"]
        rows.append(f"| {g['run']} | {g['profile']} | {g['variant']} | {g['replicas']} "
                    f"| {_percent(g['accuracy_mean'])} "
                    f"| {_percent(g['accuracy_std'])} [{_percent(sd_low)}, {_percent(sd_high)}] "
                    f"| {_percent(g['churn_mean'])} [{_percent(low)}, {_percent(high)}] "
                    f"| {g['l2_mean']:.4g} [{l2_low:.4g}, {l2_high:.4g}] "
                    f"| {_percent(g['per_class_std_max'])} | {'yes' if g['identical_replicas'] else 'no'} |\n")
    return _HEADER + "".join(rows)


def _algo_seed(folder: str) -> int:
    with open(os.path.join(folder, "summary.json")) as f:
        return int(json.load(f)["recipe"]["run"]["algo_seed"])


# A bootstrap over two seeds has four outcomes: no interval at all.
_LEAST_SEEDS_FOR_AN_INTERVAL = 3


def seed_comparison(folders: Sequence[str], reference: str = "native", resamples: int = 10000,
                    seed: int = 1) -> str:
    """A profile's IMPL churn against a reference's (``native``: a real device) over several algo
    seeds, one folder per algo seed holding both: a row per seed (the seed's 95% intervals are over
    its replicas), then the mean over seeds with a 95% interval over algo seeds (a percentile
    bootstrap that resamples the seeds, each seed's value its replicas' mean churn; from three seeds
    on).

    Why over seeds: which near-ties a run meets is fixed by its algo seed (weights, batches), and
    it moves the IMPL churn of that seed by more than its replica interval, on a real device and
    in an emulation alike; a comparison at one seed can miss either way by chance."""
    import numpy as np

    if len(folders) < 2:
        raise ValueError("a comparison over algo seeds needs at least two folders")
    by_seed: dict = {}
    for folder in folders:
        algo = _algo_seed(folder)
        for g in groups([folder]):
            if g["variant"] == "impl":
                by_seed.setdefault(algo, {})[g["profile"]] = g
    if len(by_seed) < 2:
        raise ValueError("the folders hold fewer than two distinct algo seeds")
    profiles = sorted({p for row in by_seed.values() for p in row if p != reference})
    seeds = sorted(by_seed)
    for algo in seeds:
        if reference not in by_seed[algo]:
            raise ValueError(f"algo seed {algo}: no '{reference}' impl replicas among the folders")
    lines = ["| algo seed | " + " | ".join([f"{reference} churn % [95% CI]"] +
                                           [f"{p} churn % [95% CI] | inside" for p in profiles]) + " |",
             "|---|" + "---|" * (1 + 2 * len(profiles))]
    for algo in seeds:
        ref = by_seed[algo][reference]
        cells = [f"{_percent(ref['churn_mean'])} [{_percent(ref['churn_ci95_replicas'][0])}, "
                 f"{_percent(ref['churn_ci95_replicas'][1])}]"]
        for p in profiles:
            g = by_seed[algo].get(p)
            if g is None:
                cells += ["—", "—"]
                continue
            low, high = ref["churn_ci95_replicas"]
            cells += [f"{_percent(g['churn_mean'])} [{_percent(g['churn_ci95_replicas'][0])}, "
                      f"{_percent(g['churn_ci95_replicas'][1])}]", "yes" if low <= g["churn_mean"] <= high else "no"]
        lines.append(f"| {algo} | " + " | ".join(cells) + " |")
    rng = np.random.default_rng(seed)
    lines += ["", f"| profile | algo seeds | {reference} churn % (mean over seeds) | profile's | difference, "
                  f"points [95% CI over seeds] | ratio [95% CI over seeds] |", "|---|---|---|---|---|---|"]
    for p in profiles:
        both = [s for s in seeds if p in by_seed[s]]
        if len(both) < 2:
            continue
        ref = np.array([by_seed[s][reference]["churn_mean"] for s in both])
        emu = np.array([by_seed[s][p]["churn_mean"] for s in both])
        difference, ratio = f"{100 * (emu - ref).mean():+.2f}", f"{emu.mean() / ref.mean():.3f}"
        if len(both) >= _LEAST_SEEDS_FOR_AN_INTERVAL:
            draws = rng.integers(0, len(both), (resamples, len(both)))
            d_low, d_high = np.percentile((emu[draws] - ref[draws]).mean(axis=1), [2.5, 97.5])
            r_low, r_high = np.percentile(emu[draws].mean(axis=1) / ref[draws].mean(axis=1), [2.5, 97.5])
            difference += f" [{100 * d_low:+.2f}, {100 * d_high:+.2f}]"
            ratio += f" [{r_low:.3f}, {r_high:.3f}]"
        else:
            difference += " (no interval from so few seeds)"
        lines.append(f"| {p} | {len(both)} | {_percent(ref.mean())} | {_percent(emu.mean())} | {difference} | {ratio} |")
    return "\n".join(lines) + "\n"
