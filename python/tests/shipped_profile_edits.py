"""A shipped profile with some of its layer rules taken out, written to a temporary file: the
control of a test that checks a rule's bits (the same profile without that rule must miss them)."""

import os
import re
import tempfile

PROFILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "profiles", "shipped")


def without_rules(name: str, match: str, folder: str) -> str:
    """profiles/shipped/NAME.toml without every [[*.layers]] rule whose match line is
    `match = { MATCH }`, written into folder; returns the file's path (a profile path for
    fplab.torch.emulate, ":deterministic" may follow)."""
    with open(os.path.join(PROFILES, name + ".toml"), encoding="utf-8") as f:
        text = f.read()
    rule = re.compile(r"\[\[(?:default|deterministic)\.layers\]\]\nmatch = \{ " + re.escape(match) +
                      r" \}\n(?:(?!#|\[\[).+\n)*\n?")
    edited, count = rule.subn("", text)
    if count == 0:
        raise ValueError(f"{name}: no rule matches {{ {match} }}")
    path = os.path.join(folder, f"{name}-edited.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(edited.replace(f'name = "{name}"', f'name = "{name}-edited"', 1))
    return path


class EditedProfiles:
    """A temporary folder for edited profiles, removed with the test class (setUpClass/tearDownClass)."""

    def __init__(self) -> None:
        self.folder = tempfile.TemporaryDirectory(prefix="fplab-profiles-")

    def without(self, name: str, match: str) -> str:
        return without_rules(name, match, self.folder.name)

    def close(self) -> None:
        self.folder.cleanup()
