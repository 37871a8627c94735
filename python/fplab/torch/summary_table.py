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


def _summary(folder: str) -> dict:
    with open(os.path.join(folder, "summary.json")) as f:
        return json.load(f)


def groups(folders: Sequence[str]) -> List[dict]:
    """Every (profile, variant) group of the folders' summary.json, the folder's name added as 'run'."""
    return [dict(g, run=os.path.basename(os.path.normpath(folder)))
            for folder in folders for g in _summary(folder)["results"]]


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


def _churn_cell(g: dict) -> str:
    interval = g.get("churn_ci95_replicas")
    if not interval:  # fewer than two replicas: no interval
        return _percent(g["churn_mean"])
    return f"{_percent(g['churn_mean'])} [{_percent(interval[0])}, {_percent(interval[1])}]"


def _experiment(summary: dict) -> tuple:
    """What makes two folders one experiment, and what each says of its profiles: (name, the
    description without its "Profile NAME: ..." paragraphs), and {NAME: that paragraph} (the
    software, device and TF32 switches a profile ran with; an emulated profile's exp, log and loss,
    which folders written before 2026-11-30 do not say). Folders are one experiment where the
    first parts are equal and every profile both describe is described alike, so that a profile
    rerun alone at a seed still compares with the reference's folder, but not with another device."""
    base, profiles = [], {}
    for paragraph in (summary.get("description") or "").split("\n\n"):
        if paragraph.startswith("Profile ") and ": " in paragraph:  # a name may hold ":" (NAME:deterministic)
            profiles[paragraph[len("Profile "):paragraph.index(": ")]] = paragraph
        else:
            base.append(paragraph)
    return (summary.get("experiment"), "\n\n".join(base)), profiles


def seed_comparison(folders: Sequence[str], reference: str = "native", later_wins: bool = False) -> str:
    """A profile's IMPL churn against a reference's (``native``: a real device) over several algo
    seeds, one folder per algo seed holding both, every folder the same experiment (name and
    description, which records TF32's switch): a row per seed with the seed's 95% intervals over
    its replicas, then per profile the mean over seeds and the mean of the seeds' differences with
    its 95% Student-t interval (experiments/paired_interval.hpp: the seeds the sample, their
    differences roughly normal), also relative to the reference's mean.

    Why over seeds: which near-ties a run meets is fixed by its algo seed (weights, batches), and
    it moves the IMPL churn of that seed by more than its replica interval, on a real device and
    in an emulation alike; a comparison at one seed can miss either way by chance.

    A profile's replicas at one seed in two folders are an error, unless ``later_wins``: then the
    later folder's are taken (a profile rerun after a change, beside the reference's first run),
    and a note under the table names what was replaced."""
    from fplab import _core

    if len(folders) < 2:
        raise ValueError("a comparison over algo seeds needs at least two folders")
    if len({os.path.realpath(f) for f in folders}) != len(folders):
        raise ValueError("a folder is given twice")
    by_seed: dict = {}
    source: dict = {}
    replaced: List[str] = []
    described: dict = {}  # profile -> (its paragraph, the folder that first said it)
    first = None
    for folder in folders:
        summary = _summary(folder)
        algo = summary.get("recipe", {}).get("run", {}).get("algo_seed")
        if algo is None:
            raise ValueError(f"{folder}: its summary.json names no algo seed (recipe.run.algo_seed)")
        what, profiles = _experiment(summary)
        if first is None:
            first = (folder, what)
        elif what != first[1]:
            raise ValueError(f"{folder}: another experiment than {first[0]}'s (name or description, which records "
                             f"TF32's switch, differ): one experiment at several algo seeds is compared")
        for name, paragraph in profiles.items():
            said = described.setdefault(name, (paragraph, folder))
            if said[0] != paragraph:
                raise ValueError(f"{folder}: another experiment than {said[1]}'s (profile '{name}' ran with other "
                                 f"software, device or TF32 switches)")
        for g in summary["results"]:
            if g["variant"] != "impl":
                continue
            if g["profile"] in by_seed.setdefault(int(algo), {}):
                if not later_wins:
                    raise ValueError(f"{folder}: algo seed {algo} has '{g['profile']}' impl replicas in two folders "
                                     f"(--later-wins takes the later folder's)")
                replaced.append(f"{g['profile']} at seed {algo}: {folder}'s, not {source[int(algo), g['profile']]}'s")
            by_seed[int(algo)][g["profile"]] = g
            source[int(algo), g["profile"]] = folder
    if len(by_seed) < 2:
        raise ValueError("the folders' impl replicas span fewer than two algo seeds")
    seeds = sorted(by_seed)
    for algo in seeds:
        if reference not in by_seed[algo]:
            raise ValueError(f"algo seed {algo}: no '{reference}' impl replicas among the folders")
    profiles = sorted({p for row in by_seed.values() for p in row if p != reference})
    lines = ["| algo seed | " + " | ".join([f"{reference} churn % [95% CI]"] +
                                           [f"{p} churn % [95% CI] | inside" for p in profiles]) + " |",
             "|---|" + "---|" * (1 + 2 * len(profiles))]
    for algo in seeds:
        ref = by_seed[algo][reference]
        interval = ref.get("churn_ci95_replicas")
        cells = [_churn_cell(ref)]
        for p in profiles:
            g = by_seed[algo].get(p)
            if g is None:
                cells += ["—", "—"]
                continue
            inside = "—" if not interval else "yes" if interval[0] <= g["churn_mean"] <= interval[1] else "no"
            cells += [_churn_cell(g), inside]
        lines.append(f"| {algo} | " + " | ".join(cells) + " |")
    if replaced:
        lines += ["", "(replicas taken from the later folder: " + "; ".join(replaced) + ".)"]
    lines += ["", "(inside: the profile's mean churn within the reference's interval over replicas; both are noisy, "
                  "so even one distribution on both sides misses it now and then.)",
              "", f"| profile | algo seeds | {reference} churn % (mean over seeds) | profile's | difference, points "
                  f"[95% t interval over seeds] | relative to {reference}'s mean |", "|---|---|---|---|---|---|"]
    for p in profiles:
        both = [s for s in seeds if p in by_seed[s]]
        ref = [by_seed[s][reference]["churn_mean"] for s in both]
        emu = [by_seed[s][p]["churn_mean"] for s in both]
        if len(both) < 2:
            lines.append(f"| {p} | {len(both)} | — | — | fewer than two seeds | — |")
            continue
        mean, low, high = _core.paired_t_interval([e - r for e, r in zip(emu, ref)])
        base = sum(ref) / len(ref)
        relative = "—" if base == 0 else f"{mean / base:+.1%} [{low / base:+.1%}, {high / base:+.1%}]"
        lines.append(f"| {p} | {len(both)} | {_percent(base)} | {_percent(sum(emu) / len(emu))} "
                     f"| {100 * mean:+.2f} [{100 * low:+.2f}, {100 * high:+.2f}] | {relative} |")
    return "\n".join(lines) + "\n"
