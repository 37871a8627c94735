"""What the tests that compare with the `fplab` command share: where the command and the data are."""

import os

#: Fashion-MNIST: the system's copy, or $FPLAB_DATA_DIR (scripts/gpu-check sets it to its copy).
DATA = os.environ.get("FPLAB_DATA_DIR", "/usr/share/datasets/fashion-mnist")


def fplab_binary():
    """The fplab command: $FPLAB_BINARY, else build/apps/fplab beside build/python/fplab; None if neither."""
    path = os.environ.get("FPLAB_BINARY")
    if not path:
        import fplab

        path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(fplab.__file__)))),
                            "apps", "fplab")
    return path if path and os.access(path, os.X_OK) else None
