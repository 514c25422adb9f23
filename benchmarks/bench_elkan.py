#!/usr/bin/env python
"""Lloyd against Elkan: time, distances and kernel values, in memory and blocked (target 8 of
docs/performance.md).

    python benchmarks/bench_elkan.py                     # n=20,000, k ∈ {5,50,200}, d ∈ {2,50}
    python benchmarks/bench_elkan.py --n 5000 --k 5 50 --d 2

For every (d, k): seeded blobs (k centres uniform in [−10, 10]^d, unit spread), rbf with the
median gamma, one k-means++ start, and from that same start

- ``memory``: Lloyd and Elkan on the kernel matrix held in memory (``InMemoryKernel``; the
  matrix itself is not timed);
- ``blocked``: Lloyd and Elkan on ``BlockedKernel`` (kernel rows recomputed on demand);
- ``nystroem``: Lloyd and Elkan on explicit Nyström features of 400 landmarks
  (``FeatureSpaceSource``; the features are not timed).

Columns: seconds, point–centre distances evaluated, kernel values read or computed (memory,
blocked), and the Lloyd/Elkan time ratio; the two runs must give the same labels, inertia and
iterations (checked, printed as ``same``). Prints Markdown. The machine may be shared: note
its load when quoting numbers.
"""
import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from kkmeans_cli.engine.threads import blas_threads, effective_n_threads  # noqa: E402
from kkmeans_cli.engine.elkan import elkan  # noqa: E402
from kkmeans_cli.engine.starts import kmeans_plusplus  # noqa: E402
from kkmeans_cli.kernels.sources import BlockedKernel, InMemoryKernel  # noqa: E402
from kkmeans_cli.kernels.functions import Kernel, resolve_gamma  # noqa: E402
from kkmeans_cli.engine.lloyd import lloyd  # noqa: E402
from kkmeans_cli.engine.feature_source import FeatureSpaceSource  # noqa: E402
from kkmeans_cli.kernels.nystroem import fit_features  # noqa: E402


def blobs(n, d, k, seed):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, size=(k, d))
    return centres[rng.integers(0, k, size=n)] + rng.normal(size=(n, d))


def run(algorithm, source, weights, start, k, n_threads):
    t = time.perf_counter()
    result = algorithm(source, weights, start, k, n_threads=n_threads)
    return time.perf_counter() - t, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--k", type=int, nargs="+", default=[5, 50, 200])
    parser.add_argument("--d", type=int, nargs="+", default=[2, 50])
    parser.add_argument("--modes", nargs="+", default=["memory", "blocked", "nystroem"])
    parser.add_argument("--landmarks", type=int, default=400)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    n_threads = effective_n_threads(args.threads)
    print(f"n = {args.n:,}, rbf (median gamma), one k-means++ start, {n_threads} threads\n")
    print("| d | k | mode | Lloyd s | Elkan s | Lloyd/Elkan | Lloyd distances | "
          "Elkan distances | Lloyd kernel values | Elkan kernel values | iterations | same |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    weights = np.ones(args.n)
    with blas_threads(1):
        for d in args.d:
            X = blobs(args.n, d, max(args.k), args.seed)
            gamma = resolve_gamma("rbf", "median", X, np.random.default_rng(args.seed))
            kernel = Kernel("rbf", gamma=gamma)
            K = kernel.matrix(X, n_threads=n_threads) if "memory" in args.modes else None
            Phi = None
            if "nystroem" in args.modes:
                Phi = fit_features(X, kernel, args.landmarks, args.seed,
                                   n_threads=n_threads).Phi
            for k in args.k:
                start_source = InMemoryKernel(K, n_threads=n_threads) if K is not None \
                    else BlockedKernel(kernel, X, n_threads=n_threads)
                start = kmeans_plusplus(start_source, weights, k,
                                        np.random.default_rng(args.seed + k))[0]
                for mode in args.modes:
                    def make():
                        if mode == "memory":
                            return InMemoryKernel(K, n_threads=n_threads)
                        if mode == "blocked":
                            return BlockedKernel(kernel, X, n_threads=n_threads)
                        return FeatureSpaceSource(Phi, n_threads=n_threads)
                    results = []
                    for algorithm in (lloyd, elkan):
                        source = make()
                        seconds, result = run(algorithm, source, weights, start, k, n_threads)
                        results.append((seconds, result, getattr(source, "kernel_evaluations",
                                                                 None)))
                    (tl, rl, el), (te, re, ee) = results
                    same = (np.array_equal(rl.labels, re.labels) and rl.n_iter == re.n_iter
                            and abs(rl.inertia - re.inertia) <= 1e-9 * abs(rl.inertia))
                    row = [d, k, mode, f"{tl:.2f}", f"{te:.2f}", f"{tl / te:.2f}×",
                           f"{rl.n_distances:,}", f"{re.n_distances:,}",
                           "–" if el is None else f"{el:,}", "–" if ee is None else f"{ee:,}",
                           rl.n_iter, "yes" if same else "NO"]
                    print("| " + " | ".join(str(v) for v in row) + " |", flush=True)
            del K


if __name__ == "__main__":
    main()
