"""One Markdown table of the results of several experiment folders (``fplab run`` or
fplab.torch.experiment): a row per (profile, variant) of each folder's summary.json, with the
95% intervals the summary states (bootstrap over replicas).

>>> from fplab.torch.summary_table import markdown
>>> print(markdown(["results/hardware-torch", "results/hardware-native"]))
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
