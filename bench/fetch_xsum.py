#!/usr/bin/python3
"""Fetches xsum's header (Radford Neal's exact summation, C++ port by Y. Afshar) for the benchmark.

    bench/fetch_xsum.py BUILD_FOLDER

Downloads the source distribution of PyPI's `xsum` 2.0.0 with pip, checks its SHA-256, and
writes xsum.hpp to BUILD_FOLDER/xsum/. Configure again (`cmake BUILD_FOLDER`) and
bench_exact_sum gains xsum's large and small accumulators beside fplab's exact sum, measured in
the same run. Nothing else uses it; without it the benchmark compares against the naive ordered
sum only. Debian carries no xsum.
"""
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile

VERSION = "2.0.0"
SHA256 = "e4bdab1d4b5058ad04c2ae30cc26b3610ef04959d131a60ee8e4e48f896e5129"
MEMBER = f"xsum-{VERSION}/xsum/xsum.hpp"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench/fetch_xsum.py BUILD_FOLDER")
    build = sys.argv[1]
    if not os.path.isdir(build):
        sys.exit(f"fetch_xsum: {build} is not a folder")
    out_dir = os.path.join(build, "xsum")
    with tempfile.TemporaryDirectory() as download:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        f"xsum=={VERSION}", "-d", download], check=True)
        archive = os.path.join(download, f"xsum-{VERSION}.tar.gz")
        with open(archive, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != SHA256:
            sys.exit(f"fetch_xsum: {archive} has SHA-256 {digest}, expected {SHA256}")
        with tarfile.open(archive) as tar:
            header = tar.extractfile(MEMBER).read()
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, "xsum.hpp")
    with tempfile.NamedTemporaryFile(dir=out_dir, delete=False) as f:
        f.write(header)
    os.replace(f.name, target)
    print(f"wrote {target}; now run: cmake {build}")


if __name__ == "__main__":
    main()
