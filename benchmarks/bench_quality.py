"""Benchmark the quality measures and the sweep over k.

(a) exact feature-space silhouette at n points vs one plain streaming read of K (``K.sum()``);
    the target is a ratio ≤ 2 (docs/performance.md).
(b) ``sweep`` over k = 2..10 with every measure (exact silhouette) at n points, d = 10, rbf:
    total seconds (the peer comparison is in another benchmark).

Usage: python benchmarks/bench_quality.py [N_SILHOUETTE=20000] [N_SWEEP=10000] [N_INIT=1]
                                          [N_THREADS=all]
"""
import sys
import time

import numpy as np
from sklearn.datasets import make_blobs

from kkmeans_cli.measures import metrics
from kkmeans_cli.engine.threads import effective_n_threads
from kkmeans_cli.kernels.functions import Kernel
from kkmeans_cli.model.sweep import sweep


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench_silhouette(n, n_threads):
    X, _ = make_blobs(n, n_features=10, centers=8, random_state=0)
    K = Kernel("rbf", gamma=0.01).matrix(X, n_threads=n_threads)
    labels = np.random.default_rng(0).integers(0, 8, n)
    t_read = best_of(lambda: K.sum())
    t_sil = best_of(lambda: metrics.silhouette(K, labels, n_threads=n_threads))
    del K
    return t_read, t_sil


def bench_sweep(n, n_init, n_threads):
    X, _ = make_blobs(n, n_features=10, centers=6, random_state=1)
    t = time.perf_counter()
    res = sweep(X, range(2, 11), metric="silhouette", kernel="rbf", n_init=n_init,
                random_state=0, n_threads=n_threads)
    total = time.perf_counter() - t
    return total, res


def main(argv):
    n_sil = int(argv[1]) if len(argv) > 1 else 20_000
    n_sweep = int(argv[2]) if len(argv) > 2 else 10_000
    n_init = int(argv[3]) if len(argv) > 3 else 1
    n_threads = effective_n_threads(int(argv[4]) if len(argv) > 4 else None)

    t_read, t_sil = bench_silhouette(n_sil, n_threads)
    total, res = bench_sweep(n_sweep, n_init, n_threads)

    print(f"threads: {n_threads}")
    print(f"{'benchmark':<44}{'n':>8}{'seconds':>10}{'ratio':>8}")
    print(f"{'(a) K.sum() (one read of K, float64)':<44}{n_sil:>8}{t_read:>10.3f}{'':>8}")
    print(f"{'(a) exact silhouette':<44}{n_sil:>8}{t_sil:>10.3f}{t_sil / t_read:>8.2f}")
    print(f"{'(b) sweep k=2..10, n_init=%d, total' % n_init:<44}{n_sweep:>8}{total:>10.3f}")
    print(f"{'    of which the kernel matrix':<44}{'':>8}{res.kernel_seconds:>10.3f}")
    print()
    print(f"{'k':>3}{'inertia':>14}{'silhouette':>12}{'n_iter':>8}{'fit s':>8}{'total s':>9}")
    for row, fit_s in zip(res.rows, res.fit_seconds):
        print(f"{row['k']:>3}{row['inertia']:>14.3f}{row['silhouette']:>12.4f}"
              f"{row['n_iter']:>8}{fit_s:>8.3f}{row['seconds']:>9.3f}")
    print(f"best k by silhouette: {res.best_k}")
    print(f"target (a): exact silhouette <= 2x K.sum(): "
          f"{'PASS' if t_sil <= 2 * t_read else 'FAIL'} ({t_sil / t_read:.2f}x)")


if __name__ == "__main__":
    main(sys.argv)
