#!/usr/bin/env python
"""Exact kernel k-means at 100,000 points with the defaults: the blocked route, screened
restarts, Hartigan without the kernel matrix, fused predict.

    python benchmarks/bench_exact.py                    # every part (~10 min on 2 idle cores)
    python benchmarks/bench_exact.py --parts fit,predict
    python benchmarks/bench_exact.py --parts peer --rounds 5

Parts (each fit in its own Python subprocess; peak RSS is the child's ``VmHWM``):

- ``fit``: ``kkmeans fit DATA -k K --kernel rbf`` (the command line, the exact route's
  defaults) on seeded blobs
  (``bench_scale.blobs``: centres uniform in [-10, 10]^d, std 2): 100,000 × 10 with k = 10 and
  50,000 × 10 with k = 5. Reports the wall time of the command, its peak RSS, the route it
  took and why, the ARI against the generating labels and the kernel k-means objective of its
  labels and of the generating labels (Σ_i K_ii − Σ_c Σ_{i,j∈c} K_ij/|c|, computed here with
  the fit's gamma from kernel values in blocks).
- ``peer``: the 10,000 × 10 overlapping-blobs fit of ``bench_fit.py`` (k = 8, one restart,
  the median gamma) by kkmeans (defaults otherwise) and by PyPI ``kkmeans`` (import name
  ``KKMeans``, lloyd), each in its own process, alternating, ``--rounds`` times. Each process
  fits twice and times the second fit (memory warmed). The objective of both is computed by
  one function on the same float64 kernel matrix (scikit-learn's ``rbf_kernel``).
- ``optima``: the data sets of ``bench_optima.py`` (moons, circles, blobs, iris, wine,
  digits) fitted with the defaults on the kernel matrix and on the blocked kernel, scored by
  that benchmark's ``score``; plus 30,000-point moons and blobs on the blocked route with
  screened restarts (the default) against 20 full restarts.
- ``predict``: ``predict`` of 1,000,000 points with a 10,000-point model against the limit
  of the 10^10 kernel values it needs, measured in the same run: 10^10 exponentials at
  NumPy's one-core rate spread over 2 cores, plus the 10^6 × 10 by 10 × 10^4 distance
  product by BLAS (2 threads). Alternating, ``--rounds`` times; the ratio of the medians.

The machine may be shared: the load average is printed with the results.
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)


def load_text():
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def blocked_objective(X, labels, gamma):
    """Σ_i K_ii − Σ_c Σ_{i,j∈c} K_ij/|c| for the rbf kernel with ``gamma``, from kernel values
    in blocks (no n×n matrix)."""
    from kkmeans_cli.kernels.sources import BlockedKernel
    from kkmeans_cli.kernels.functions import Kernel

    _, lab = np.unique(labels, return_inverse=True)
    lab = lab.astype(np.int32)
    k = int(lab.max()) + 1
    src = BlockedKernel(Kernel("rbf", gamma), X, n_threads=2)
    w = np.ones(X.shape[0])
    own = src.own_outer_sums(lab, w, k)
    g = np.bincount(lab, weights=own, minlength=k)
    sizes = np.bincount(lab, minlength=k)
    return float(src.diag.sum() - np.sum(g[sizes > 0] / sizes[sizes > 0]))


# -- workers (one per subprocess) -------------------------------------------------------------
def worker_fit(args):
    from bench_scale import blobs, peak_rss_bytes

    from kkmeans_cli.cli import cli

    X, y = blobs(args.n, args.d, args.k, seed=0)
    tmp = tempfile.mkdtemp()
    data = os.path.join(tmp, "data.npy")
    np.save(data, X)
    labels_path, summary = os.path.join(tmp, "labels.csv"), os.path.join(tmp, "s.json")
    argv = ["fit", data, "-k", str(args.k), "--kernel", "rbf", "--no-model", "--labels",
            labels_path, "--summary", summary, "--quiet"]
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        cli.main(args=argv, prog_name="kkmeans", standalone_mode=False)
    except SystemExit as exc:
        if exc.code:
            raise
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = peak_rss_bytes()
    stats = json.loads(open(summary).read())
    labels = np.loadtxt(labels_path, dtype=np.int64)
    from sklearn.metrics import adjusted_rand_score

    out = {"seconds": seconds, "cpu": cpu, "rss": rss, "storage": stats.get("storage"),
           "storage_reason": stats.get("storage_reason"), "inertia": stats["inertia"],
           "ari": adjusted_rand_score(y, labels), "gamma": stats["gamma"],
           "objective": blocked_objective(X, labels, stats["gamma"]),
           "truth_objective": blocked_objective(X, y, stats["gamma"]),
           "n_init": stats.get("n_init"), "best_start": stats.get("best_start")}
    print(json.dumps(out))


def worker_peer(args):
    from bench_fit import make_data, median_gamma

    X = make_data("blobs", 10_000, 10, 8, 0)
    gamma = median_gamma(X, 0)
    if args.method == "kkmeans":
        from kkmeans_cli import KernelKMeans

        def fit():
            est = KernelKMeans(8, kernel="rbf", gamma=gamma, n_init=1, random_state=0).fit(X)
            return est.labels_, est.fit_stats_.get("storage")
    else:
        np.NINF = -np.inf  # removed in NumPy 2, still used by KKMeans 0.1.0
        from KKMeans import KKMeans

        def fit():
            est = KKMeans(n_clusters=8, init="kmeans++", n_init=1, kernel="rbf", gamma=gamma,
                          rng=0, algorithm="lloyd")
            with contextlib.redirect_stdout(sys.stderr):
                est.fit(X)
            return est.labels_, None
    fit()                                   # warm-up: the memory the fit touches
    t0 = time.perf_counter()
    labels, storage = fit()
    seconds = time.perf_counter() - t0
    from sklearn.metrics.pairwise import rbf_kernel

    K = rbf_kernel(X, gamma=gamma)
    np.fill_diagonal(K, 1.0)
    _, lab = np.unique(labels, return_inverse=True)
    Z = np.zeros((lab.size, lab.max() + 1))
    Z[np.arange(lab.size), lab] = 1.0
    links = np.einsum("ic,ic->c", Z, K @ Z)
    objective = float(np.trace(K) - np.sum(links / Z.sum(axis=0)))
    print(json.dumps({"seconds": seconds, "objective": objective, "storage": storage}))


def worker_optima(args):
    import warnings

    from bench_optima import load, score
    from sklearn.metrics.pairwise import rbf_kernel

    from kkmeans_cli import KernelKMeans

    rows = []
    for name in ("moons", "circles", "blobs", "iris", "wine", "digits"):
        X, y, k, gamma, _ = load(name)
        K = rbf_kernel(X, gamma=gamma)
        np.fill_diagonal(K, 1.0)
        row = {"data": f"{name} ({X.shape[0]}, k={k})"}
        for storage in ("matrix", "blocked"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = KernelKMeans(k, kernel="rbf", gamma=gamma, random_state=0,
                                   storage=storage).fit(X)
            row[storage] = score(K, est.labels_, "kmeans")
        rows.append(row)
    print(json.dumps(rows))


def worker_screen(args):
    import warnings

    from sklearn import datasets

    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.engine import exact_restarts

    if args.data == "moons":
        X, _ = datasets.make_moons(30_000, noise=0.06, random_state=3)
        k, gamma = 2, 20.0
    else:
        from bench_scale import blobs

        X, _ = blobs(30_000, 10, 10, seed=1)
        k, gamma = 10, "median"
    if args.method == "full":
        exact_restarts.applies = lambda *a, **kw: False
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = KernelKMeans(k, kernel="rbf", gamma=gamma, random_state=0, storage="blocked").fit(X)
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "objective": est.inertia_,
                      "gamma": est.gamma_,
                      "objective_check": blocked_objective(X, est.labels_, est.gamma_)}))


def worker_predict(args):
    from bench_scale import blobs

    from kkmeans_cli import KernelKMeans

    X, _ = blobs(10_000, 10, 10, seed=0)
    new, _ = blobs(args.n, 10, 10, seed=1)
    est = KernelKMeans(10, kernel="rbf", n_init=1, random_state=0).fit(X)
    est.predict(new[:20_000])                # warm-up
    t0 = time.perf_counter()
    est.predict(new)
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def worker_limit(args):
    """The limit of predict: 10^10 exponentials at NumPy's one-core rate / 2 cores, plus the
    distance product of 10^6 × 10 by 10 × 10^4 by BLAS (2 threads), both measured here."""
    from threadpoolctl import threadpool_limits

    from bench_scale import exp_seconds_per_value

    rng = np.random.default_rng(0)
    n_new, n_fit, d = args.n, 10_000, 10
    exp_seconds = exp_seconds_per_value(rng) * n_new * n_fit / 2
    A = rng.normal(size=(4096, d))
    B = rng.normal(size=(n_fit, d))
    G = np.empty((4096, n_fit))
    with threadpool_limits(2):
        np.matmul(A, B.T, out=G)
        t0 = time.perf_counter()
        for _ in range(10):
            np.matmul(A, B.T, out=G)
        gemm_seconds = (time.perf_counter() - t0) / (10 * 4096) * n_new
    print(json.dumps({"exp_seconds": exp_seconds, "gemm_seconds": gemm_seconds,
                      "limit": exp_seconds + gemm_seconds}))


WORKERS = {"fit": worker_fit, "peer": worker_peer, "optima": worker_optima,
           "screen": worker_screen, "predict": worker_predict, "limit": worker_limit}


def child(worker, env=None, timeout=3600, **params):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", worker]
    for key, value in params.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _times(runs, digits):
    return ", ".join(f"{r['seconds']:.{digits}f}" for r in runs)


# -- parts --------------------------------------------------------------------------------------
def part_fit(args):
    print("\n### kkmeans fit with the defaults (command line)\n")
    print("| data | k | wall s | CPU s (both threads) | peak RSS | route | ARI | objective | "
          "generating labels' objective |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, k in ((100_000, 10), (50_000, 5)):
        r = child("fit", n=n, d=10, k=k)
        if "error" in r:
            print(f"| {n:,} × 10 | {k} | failed: {r['error']} |")
            continue
        print(f"| {n:,} × 10 blobs | {k} | {r['seconds']:.1f} | {r['cpu']:.1f} | "
              f"{r['rss'] / 1e9:.2f} GB | "
              f"{r['storage']}: {r['storage_reason']} | {r['ari']:.4f} | "
              f"{r['objective']:.6g} | {r['truth_objective']:.6g} |", flush=True)
    print(f"\nload average after: {load_text()}")


def part_peer(args):
    env = {"PYTHONPATH": os.pathsep.join(p for p in (args.peer_path, ROOT,
                                                      os.environ.get("PYTHONPATH")) if p)}
    ours, theirs = [], []
    for _ in range(args.rounds):
        ours.append(child("peer", env=env, method="kkmeans"))
        theirs.append(child("peer", env=env, method="KKMeans"))
    print("\n### 10,000 × 10 overlapping blobs, k = 8, one restart (second fit timed)\n")
    for name, runs in (("kkmeans", ours), ("PyPI kkmeans (KKMeans, lloyd)", theirs)):
        if any("error" in r for r in runs):
            print(f"- {name}: failed {runs}")
            return
        print(f"- {name}: median {statistics.median(r['seconds'] for r in runs):.3f} s "
              f"(runs {_times(runs, 3)}), objective "
              f"{runs[0]['objective']:.6f}"
              + (f", storage {runs[0]['storage']}" if runs[0]["storage"] else ""))
    ratios = [t["seconds"] / o["seconds"] for o, t in zip(ours, theirs)]
    print(f"- speed-up per round: {', '.join(f'{r:.1f}x' for r in ratios)}; ratio of medians "
          f"{statistics.median(t['seconds'] for t in theirs) / statistics.median(o['seconds'] for o in ours):.1f}x")
    print(f"\nload average after: {load_text()}")


def part_optima(args):
    rows = child("optima")
    print("\n### optimum benchmarks: kernel matrix against blocked kernel (defaults)\n")
    print("| data | objective, matrix | objective, blocked | same |")
    print("|---|---|---|---|")
    for row in rows if isinstance(rows, list) else []:
        same = abs(row["matrix"] - row["blocked"]) <= 1e-9 * abs(row["matrix"])
        print(f"| {row['data']} | {row['matrix']:.10g} | {row['blocked']:.10g} | "
              f"{'yes' if same else 'NO'} |")
    if not isinstance(rows, list):
        print(rows)
    print("\n### 30,000 points, blocked: screened restarts (default) against 20 full runs\n")
    print("| data | screened: objective, s | full restarts: objective, s |")
    print("|---|---|---|")
    for data in ("moons", "blobs"):
        s = child("screen", data=data, method="screened")
        f = child("screen", data=data, method="full")
        if "error" in s or "error" in f:
            print(f"| {data} | {s} | {f} |")
            continue
        print(f"| {data} 30,000 | {s['objective']:.10g}, {s['seconds']:.1f} | "
              f"{f['objective']:.10g}, {f['seconds']:.1f} |", flush=True)
    print(f"\nload average after: {load_text()}")


def part_predict(args):
    preds, limits = [], []
    for _ in range(args.rounds):
        limits.append(child("limit", n=args.predict_n))
        preds.append(child("predict", n=args.predict_n))
    if any("error" in r for r in preds + limits):
        print(preds, limits)
        return
    p = statistics.median(r["seconds"] for r in preds)
    lim = statistics.median(r["limit"] for r in limits)
    print(f"\n### predict {args.predict_n:,} points, 10,000-point model\n")
    print(f"- predict: median {p:.2f} s (runs {_times(preds, 2)})")
    print(f"- limit: median {lim:.2f} s = exponentials "
          f"{statistics.median(r['exp_seconds'] for r in limits):.2f} s + distance product "
          f"{statistics.median(r['gemm_seconds'] for r in limits):.2f} s")
    print(f"- predict / limit: {p / lim:.2f}")
    print(f"\nload average after: {load_text()}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="fit,peer,optima,predict")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--predict-n", type=int, default=1_000_000)
    parser.add_argument("--peer-path", default=os.environ.get("KKMEANS_PEER_PATH"),
                        help="a directory holding PyPI kkmeans (pip install --target DIR "
                             "kkmeans) when it is not installed")
    parser.add_argument("--worker")
    parser.add_argument("--n", type=int)
    parser.add_argument("--d", type=int)
    parser.add_argument("--k", type=int)
    parser.add_argument("--method")
    parser.add_argument("--data")
    args = parser.parse_args(argv)
    if args.worker:
        WORKERS[args.worker](args)
        return
    print(f"load average before: {load_text()}")
    for part in args.parts.split(","):
        globals()[f"part_{part}"](args)


if __name__ == "__main__":
    main()
