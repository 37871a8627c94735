#!/usr/bin/python3
"""Compares the benchmarks of two builds of fplab in one run.

    bench/compare_builds.py BEFORE_BUILD AFTER_BUILD [--rounds N] [--min-time S] [--only PROGRAM...]
                            [--filter REGEX]

Runs each Google Benchmark program of bench/ from both build folders in turn, ROUNDS times
(before, after, before, after, ...), so that the two builds see the same machine load, and prints
one Markdown row per benchmark: the best (smallest) real time of each build over the rounds and
after/before. The best of several rounds is the least disturbed by other work on the machine; a
ratio above 1 is a slowdown. Programs missing from either build are skipped with a line saying so.
"""
import argparse
import json
import os
import subprocess
import sys

PROGRAMS = {
    "bench_exact_dot": [],
    "bench_rounding": [],
    "bench_gemm": ["--benchmark_filter=BM_openblas|BM_fplab_gemm/(seq_fma_chain|warp_tree|splitk4_atomic|"
                   "tc_h100_tf32|tc_h100_bf16|tc_a100)$"],
    "bench_long_reductions": [],
    "bench_training": ["--benchmark_filter=BM_(libtorch|fplab)_epoch/(mlp|mlp_seq|small_cnn|small_cnn_seq)/"],
}


def run(program, extra, min_time):
    command = [program, "--benchmark_format=json", *extra]
    if min_time is not None and "bench_training" not in program:
        command.append(f"--benchmark_min_time={min_time}")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"compare_builds: {program} failed: {result.stderr.strip().splitlines()[-1:]}")
    # The JSON document, then whatever the program prints after it (bench_training: a table).
    document, _ = json.JSONDecoder().raw_decode(result.stdout[result.stdout.find("{"):])
    return {b["name"]: b["real_time"] for b in document["benchmarks"]
            if b.get("run_type", "iteration") == "iteration"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--only", nargs="*", default=list(PROGRAMS))
    parser.add_argument("--filter", help="a --benchmark_filter for every program, instead of the usual ones")
    args = parser.parse_args()
    for name in args.only:
        if name not in PROGRAMS:
            sys.exit(f"compare_builds: unknown program '{name}' (known: {', '.join(PROGRAMS)})")
    print("| program | benchmark | before (best) | after (best) | after/before |")
    print("|---|---|---|---|---|")
    for name in args.only:
        paths = [os.path.join(build, "bench", name) for build in (args.before, args.after)]
        missing = [p for p in paths if not os.access(p, os.X_OK)]
        if missing:
            print(f"compare_builds: {name}: skipped, {missing[0]} not built", file=sys.stderr)
            continue
        best = [{}, {}]
        for _ in range(args.rounds):
            for side, path in enumerate(paths):
                extra = [f"--benchmark_filter={args.filter}"] if args.filter else PROGRAMS[name]
                for bench, t in run(path, extra, args.min_time).items():
                    best[side][bench] = min(t, best[side].get(bench, float("inf")))
        for bench in best[0]:
            if bench in best[1]:
                b, a = best[0][bench], best[1][bench]
                print(f"| {name} | {bench} | {b:.4g} | {a:.4g} | {a / b:.3f} |", flush=True)


if __name__ == "__main__":
    main()
