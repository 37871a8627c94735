"""What the tests that compare with the `fplab` command share: where the command, the data and the
experiments/ scripts are."""

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


def experiment_script(name):
    """experiments/NAME.py loaded as a module, so that a test calls its main(argv) in this process."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script
