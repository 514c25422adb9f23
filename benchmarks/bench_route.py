#!/usr/bin/env python
"""The route of ``--storage auto``: the constants of its cost model and the routes compared.

    python benchmarks/bench_route.py --parts constants
    python benchmarks/bench_route.py --parts routes [--rounds 3] [--seeds 0,1]

Parts:

- ``constants``: the unit costs of ``model/planning.route_costs`` on this machine (all
  threads): one rbf kernel value computed in a block and summed (``BlockedKernel``'s fused
  pass) at d = 2 and d = 20, giving a + b·d; the bytes of a fresh n×n array written while
  building K (the build's time less its n²/2 values); one full pass over K in memory per byte
  of K; the passes of one restart (Lloyd and Hartigan's refinement) on K in memory, and of a
  candidate on a 5,000-point sample, on blobs and on i.i.d. normal data; the kernel values of
  a candidate completed in blocks, in units of n²/k. Each printed next to the value the
  planner uses.
- ``routes``: ``kkmeans fit DATA -k K --kernel rbf`` with ``--storage auto``, ``matrix`` and
  ``blocked`` on blobs 20,000 × 10 (k = 8), moons 20,000 (noise 0.1, k = 2), i.i.d. normal
  12,000 × 5 (k = 6) and blobs 4,000 × 3 (k = 4), for each seed of the data; each fit in a
  fresh process, ``--rounds`` times; the median wall time and peak RSS (``VmHWM``), the
  objective, and auto's route. Checks auto within 1.5× (+0.3 s) of the faster explicit route
  and 2× (+0.3 GB) of the smaller, with an objective no higher than either's (1e-9
  relative).

The machine may be shared: the load average is printed with the results.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__))]
from bench_exact import load_text  # noqa: E402  (also puts the checkout on the path)

CASES = {  # name: (n, d, k)
    "blobs": (20_000, 10, 8),
    "moons": (20_000, 2, 2),
    "normal": (12_000, 5, 6),
    "small-blobs": (4_000, 3, 4),
}


def make(case, seed):
    """The data of a case, seeded."""
    from bench_scale import blobs

    n, d, k = CASES[case]
    if case == "moons":
        from sklearn.datasets import make_moons

        return make_moons(n, noise=0.1, random_state=seed)[0]
    if case == "normal":
        return np.random.default_rng(seed).normal(size=(n, d))
    return blobs(n, d, k, seed=seed)[0]


# -- workers (one per subprocess) ---------------------------------------------------------------
def worker_fit(args):
    from bench_scale import peak_rss_bytes

    from kkmeans_cli.cli import cli

    summary = os.path.join(tempfile.mkdtemp(), "s.json")
    argv = ["fit", args.data, "-k", str(args.k), "--kernel", "rbf", "--storage", args.storage,
            "--no-model", "--summary", summary, "--quiet"]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    t0 = time.perf_counter()
    with open(os.devnull, "w") as null:
        stdout, sys.stdout = sys.stdout, null
        try:
            cli.main(args=argv, prog_name="kkmeans", standalone_mode=False)
        except SystemExit as exc:
            if exc.code:
                raise
        finally:
            sys.stdout = stdout
    seconds = time.perf_counter() - t0
    stats = json.loads(open(summary).read())
    print(json.dumps({"seconds": seconds, "rss": peak_rss_bytes(), "inertia": stats["inertia"],
                      "storage": stats.get("storage"),
                      "reason": stats.get("storage_reason")}))


def child(worker, **params):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", worker]
    for key, value in params.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_seconds"] = time.perf_counter() - t0
    return out


# -- parts --------------------------------------------------------------------------------------
def part_constants(args):
    from bench_quality import best_of
    from bench_scale import blobs

    from kkmeans_cli.engine.records import FitSpec
    from kkmeans_cli.engine.run import run_restarts
    from kkmeans_cli.engine.threads import effective_n_threads
    from kkmeans_cli.kernels.functions import Kernel
    from kkmeans_cli.kernels.sources import BlockedKernel, InMemoryKernel
    from kkmeans_cli.model import planning

    threads = effective_n_threads(args.threads)
    n, k = 6000, 8
    rng = np.random.default_rng(0)
    labels = rng.integers(0, k, size=n).astype(np.int32)
    w = np.ones(n)
    per_value = {}
    for d in (2, 20):
        X = rng.normal(size=(n, d))
        src = BlockedKernel(Kernel("rbf", 1.0 / d), X, n_threads=threads)
        F = np.empty((k, n))
        per_value[d] = best_of(lambda: src.full_outer_sums(labels, w, F)) / (n * n)
    b = (per_value[20] - per_value[2]) / 18
    a = per_value[2] - 2 * b
    X = rng.normal(size=(n, 10))
    kernel = Kernel("rbf", 0.1)
    build = best_of(lambda: kernel.matrix(X, n_threads=threads))
    value10 = a + 10 * b
    touch = max(build - n * n / 2 * value10, 0.0) / (n * n * 8)
    K = kernel.matrix(X, n_threads=threads)
    mem = InMemoryKernel(K, n_threads=threads)
    F = np.empty((k, n))
    pass_s = best_of(lambda: mem.full_outer_sums(labels, w, F)) / (n * n * 8)
    rows = [("kernel value a (s)", a, planning.VALUE_SECONDS),
            ("kernel value b (s per feature)", b, planning.VALUE_FEATURE_SECONDS),
            ("first touch, per byte of K (s)", touch, planning.TOUCH_SECONDS_PER_BYTE),
            ("full pass over K, per byte (s)", pass_s, planning.PASS_SECONDS_PER_BYTE)]
    # passes of a restart on K in memory, and of a candidate on a 5,000-point sample
    for name, data in (("blobs", blobs(n, 10, k, seed=0)[0]),
                       ("normal", rng.normal(size=(n, 5)))):
        kern = Kernel("rbf", 1.0 / (2 * np.median(np.sum((data[:500, None] - data[None, :500])
                                                          ** 2, axis=2))))
        mem = InMemoryKernel(kern.matrix(data, n_threads=threads), n_threads=threads)
        spec = FitSpec(n_clusters=k, n_init=4, n_threads=threads, n_features=data.shape[1])
        t0 = time.perf_counter()
        run_restarts(mem, w, None, np.random.default_rng(0), spec)
        restart = (time.perf_counter() - t0) / 4
        rows.append((f"passes of a restart on K, {name}", restart / (n * n * 8 * pass_s),
                     planning.PASSES_PER_RESTART))
    # kernel values of a completion in blocks (blobs, 20,000 points, k = 8)
    from kkmeans_cli.engine import exact_restarts

    data = blobs(20_000, 10, k, seed=0)[0]
    src = BlockedKernel(Kernel("rbf", 0.02), data, n_threads=threads)
    spec = FitSpec(n_clusters=k, n_init=20, n_threads=threads, n_features=10)
    out, _ = exact_restarts.adaptive_restarts(
        src, np.ones(20_000), np.random.default_rng(0), spec, 20,
        lambda *a: sys.exit("the blobs' sample did not separate"))
    completed = len(out.inertias)
    evaluations = src.kernel_evaluations / completed - 20_000 * 4000
    rows.append(("kernel values of a completion in blocks / (n²/k), blobs",
                 evaluations / (20_000 ** 2 / k), planning.COMPLETION_VALUES))
    print(f"\n### cost model constants ({threads} threads; load average {load_text()})\n")
    print("| constant | measured | used by the planner |")
    print("|---|---|---|")
    for name, measured, used in rows:
        print(f"| {name} | {measured:.3g} | {used:.3g} |")


def part_routes(args):
    tmp = tempfile.mkdtemp()
    print(f"\n### --storage auto against the explicit routes (median of {args.rounds} fresh "
          f"processes; threads {args.threads or 'all'}; load average before {load_text()})\n")
    print("| data | seed | auto: route | auto s / GB | matrix s / GB | blocked s / GB | "
          "objective auto / matrix / blocked | auto within limits |")
    print("|---|---|---|---|---|---|---|---|")
    for seed in [int(s) for s in args.seeds.split(",")]:
        for case in args.cases.split(","):
            n, d, k = CASES[case]
            data = os.path.join(tmp, f"{case}-{seed}.npy")
            np.save(data, make(case, seed))
            res = {}
            for _ in range(args.rounds):
                for storage in ("auto", "matrix", "blocked"):
                    res.setdefault(storage, []).append(child(
                        "fit", data=data, k=k, storage=storage,
                        **({"threads": args.threads} if args.threads else {})))
            if any("error" in r for runs in res.values() for r in runs):
                print(f"| {case} | {seed} | failed: {res} |")
                continue
            med = {s: (statistics.median(r["process_seconds"] for r in runs),
                       statistics.median(r["rss"] for r in runs) / 1e9, runs[0]["inertia"])
                   for s, runs in res.items()}
            fast = min(med["matrix"][0], med["blocked"][0])
            small = min(med["matrix"][1], med["blocked"][1])
            low = min(med["matrix"][2], med["blocked"][2])
            ok = (med["auto"][0] <= 1.5 * fast + 0.3 and med["auto"][1] <= 2 * small + 0.3
                  and med["auto"][2] <= low * (1 + 1e-9))
            auto = res["auto"][0]
            print(f"| {case} {n:,} × {d}, k = {k} | {seed} | {auto['storage']} | "
                  + " | ".join(f"{med[s][0]:.1f} / {med[s][1]:.2f}"
                               for s in ("auto", "matrix", "blocked"))
                  + f" | {med['auto'][2]:.4f} / {med['matrix'][2]:.4f} / "
                    f"{med['blocked'][2]:.4f} | {'yes' if ok else 'NO'} |", flush=True)
            if args.reasons:
                print(f"|  | | {auto['reason']} | | | | | |")
    print(f"\nload average after: {load_text()}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="constants,routes")
    parser.add_argument("--threads", type=int, default=None,
                        help="the engine's threads (default: all cores)")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reasons", action="store_true", help="print auto's storage reason")
    parser.add_argument("--worker")
    parser.add_argument("--data")
    parser.add_argument("--k", type=int)
    parser.add_argument("--storage")
    args = parser.parse_args(argv)
    if args.worker:
        {"fit": worker_fit}[args.worker](args)
        return
    for part in args.parts.split(","):
        {"constants": part_constants, "routes": part_routes}[part](args)


if __name__ == "__main__":
    main()
