#!/usr/bin/env python
"""Where does a kkmeans fit spend its time? (n=10,000, d=10, k=8, rbf, one restart by default)

    python benchmarks/profile_fit.py [--n 10000] [--d 10] [--k 8] [--threads 2] [--dtype float64]

Two parts, both printed as Markdown:

1. Kernel matrix. ``Kernel.matrix`` is re-run stage by stage with the engine's own building
   blocks (``np.matmul`` for the Gram block, ``_kernel_matrix.rbf_exponent``, the parallel
   ``np.exp`` and ``_kernel_matrix.mirror_rows``), block for block as ``kernels.py`` does, once
   into a freshly allocated K (page faults included) and once into an already-touched K. The
   page-fault cost of the fresh n×n array is also measured on its own (first ``fill`` minus a
   second ``fill``).
2. Iterations. One ``KernelKMeans.fit`` with timing wrappers installed around the engine calls
   (k-means++, full passes, incremental updates, assign, inner sums/objective, empty-cluster
   relocation), by monkey-patching in this process only — no file of the package is changed.
"""
import argparse
import collections
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench_fit import make_data, median_gamma  # noqa: E402  (same data as bench_fit)


class Timers:
    def __init__(self):
        self.sec = collections.defaultdict(float)
        self.calls = collections.Counter()
        self.extra = collections.defaultdict(list)

    def wrap(self, name, fn):
        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.sec[name] += time.perf_counter() - t0
                self.calls[name] += 1
        return timed


def profile_kernel(X, gamma, dtype, n_threads):
    from kkmeans_cli.kernels import _kernel_matrix
    from kkmeans_cli.engine.threads import blas_threads
    from kkmeans_cli.kernels.functions import (BLAS_THREADS_MIN_FEATURES, Kernel, _parallel_exp,
                                     row_blocks, _row_sq_norms)

    n = X.shape[0]
    out = {}
    # whole call, as fit does it (fresh K)
    with blas_threads(1):
        t0 = time.perf_counter()
        K = Kernel("rbf", gamma).matrix(X, dtype=dtype, n_threads=n_threads)
        out["Kernel.matrix (fresh K)"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        Kernel("rbf", gamma).matrix(X, dtype=dtype, n_threads=n_threads, out=K)
        out["Kernel.matrix (into touched K)"] = time.perf_counter() - t0
    del K
    # page faults alone
    t0 = time.perf_counter()
    A = np.empty((n, n), dtype=dtype)
    A.fill(0)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    A.fill(0)
    second = time.perf_counter() - t0
    del A
    out["page faults of a fresh n×n K (1st fill − 2nd fill)"] = first - second

    def stages(K):
        st = collections.defaultdict(float)
        Xc = np.ascontiguousarray(X, dtype=np.float64)
        sq = _row_sq_norms(Xc)
        G_buf = None
        for i0, i1 in row_blocks(n, n):
            t = time.perf_counter()
            rows, cols = i1 - i0, i1
            if G_buf is None or G_buf.size < rows * cols:
                G_buf = np.empty(rows * cols)
            G = G_buf[:rows * cols].reshape(rows, cols)
            with blas_threads(n_threads if X.shape[1] >= BLAS_THREADS_MIN_FEATURES else 1):
                np.matmul(Xc[i0:i1], Xc[:i1].T, out=G)
            t2 = time.perf_counter()
            st["GEMM X_blk·X[:i1]ᵀ (incl. workspace first touch)"] += t2 - t
            _kernel_matrix.rbf_exponent(G, sq[i0:i1], sq[:i1], gamma, n_threads)
            t3 = time.perf_counter()
            st["exponent pass (Cython/OpenMP)"] += t3 - t2
            _parallel_exp(G, K[i0:i1, :i1], n_threads)
            t4 = time.perf_counter()
            st["exp into K (NumPy, thread pool)"] += t4 - t3
            _kernel_matrix.mirror_rows(K, i0, i1, n_threads)
            st["mirror to upper triangle"] += time.perf_counter() - t4
        return st

    with blas_threads(1):
        K = np.empty((n, n), dtype=dtype)
        fresh = stages(K)
        touched = stages(K)
    del K
    return out, fresh, touched


def profile_iterations(X, gamma, k, dtype, n_threads, seed):
    from kkmeans_cli.engine import _lloyd, lloyd
    from kkmeans_cli.model import estimator
    from kkmeans_cli.kernels import sources as kernel_source
    from kkmeans_cli import KernelKMeans

    T = Timers()

    class LloydProxy:  # what lloyd.py sees as ``_lloyd``
        def __getattr__(self, name):
            return getattr(_lloyd, name)

    proxy = LloydProxy()
    proxy.assign = T.wrap("assign (argmin over k, OpenMP)", _lloyd.assign)

    src = kernel_source.InMemoryKernel
    orig_full, orig_upd = src.full_outer_sums, src.update_outer_sums

    def upd(self, moved, *a):
        T.extra["moved"].append(len(moved))
        return orig_upd(self, moved, *a)

    patches = [
        (lloyd, "_lloyd", proxy),
        (src, "full_outer_sums", T.wrap("full passes (outer_sums_rows)", orig_full)),
        (src, "update_outer_sums", T.wrap("incremental updates (update_outer_sums)", upd)),
        (lloyd, "inner_sums", T.wrap("inner sums from F (NumPy)", lloyd.inner_sums)),
        (lloyd, "objective", T.wrap("objective (NumPy)", lloyd.objective)),
        (lloyd, "relocate_empty_clusters",
         T.wrap("empty-cluster check (NumPy)", lloyd.relocate_empty_clusters)),
        (estimator, "kmeans_plusplus", T.wrap("k-means++ (greedy, rows of K)",
                                              estimator.kmeans_plusplus)),
        (src, "__init__", T.wrap("InMemoryKernel init (diag copy)", src.__init__)),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    try:
        for obj, name, new in patches:
            setattr(obj, name, new)
        est = KernelKMeans(k, kernel="rbf", gamma=gamma, n_init=1, random_state=seed,
                           dtype=dtype, n_threads=n_threads)
        t0 = time.perf_counter()
        est.fit(X)
        total = time.perf_counter() - t0
    finally:
        for obj, name, old in saved:
            setattr(obj, name, old)
    return est, total, T


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--data", choices=("blobs", "normal"), default="blobs")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    from kkmeans_cli.engine.threads import effective_n_threads

    n_threads = effective_n_threads(args.threads)
    dtype = np.dtype(args.dtype).type
    X = make_data(args.data, args.n, args.d, args.k, args.seed)
    gamma = median_gamma(X, args.seed)
    print(f"# kkmeans fit profile: {args.data} n={args.n}, d={args.d}, k={args.k}, rbf "
          f"gamma={gamma:.6g}, K {args.dtype}, {n_threads} threads\n")

    est, total, T = profile_iterations(X, gamma, args.k, dtype, n_threads, args.seed)
    fs = est.fit_stats_
    print("## Whole fit\n")
    print("| part | seconds | share |")
    print("|---|---:|---:|")
    for name, v in (("fit() total", total), ("kernel matrix (fit_stats_)", fs["kernel_seconds"]),
                    ("iterations incl. k-means++ (fit_stats_)", fs["iteration_seconds"]),
                    ("other (validation, gamma, attributes)",
                     total - fs["kernel_seconds"] - fs["iteration_seconds"])):
        print(f"| {name} | {v:.3f} | {v / total:.0%} |")
    print(f"\nn_iter = {est.n_iter_}, converged = {est.converged_}\n")

    print("## Iterations\n")
    print("| stage | calls | seconds | share of iteration time |")
    print("|---|---:|---:|---:|")
    it = fs["iteration_seconds"]
    acc = 0.0
    for name in T.sec:
        if name.startswith("InMemoryKernel"):
            continue
        acc += T.sec[name]
        print(f"| {name} | {T.calls[name]} | {T.sec[name]:.4f} | {T.sec[name] / it:.0%} |")
    print(f"| rest (Python glue: flatnonzero, bookkeeping) | | {it - acc:.4f} | "
          f"{(it - acc) / it:.0%} |")
    if T.extra["moved"]:
        print(f"\npoints moved per incremental update: {T.extra['moved']}")
    print(f"\n(InMemoryKernel init, counted inside fit_stats_ iteration time: "
          f"{T.sec.get('InMemoryKernel init (diag copy)', 0):.4f} s)\n")

    whole, fresh, touched = profile_kernel(X, gamma, dtype, n_threads)
    print("## Kernel matrix\n")
    for name, v in whole.items():
        print(f"- {name}: {v:.3f} s")
    print("\n| stage | fresh K, s | already-touched K, s |")
    print("|---|---:|---:|")
    for name in fresh:
        print(f"| {name} | {fresh[name]:.3f} | {touched[name]:.3f} |")
    print(f"| **sum** | {sum(fresh.values()):.3f} | {sum(touched.values()):.3f} |\n")


if __name__ == "__main__":
    main()
