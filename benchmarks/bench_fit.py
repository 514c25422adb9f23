#!/usr/bin/env python
"""Fit benchmark (targets 1-2 of docs/performance.md): kkmeans against its PyPI peers, plus
the Lloyd full pass against a plain read of K.

    python benchmarks/bench_fit.py                      # n=10,000, d=10, k=8, all peers
    python benchmarks/bench_fit.py --skip-peers         # kkmeans and the full-pass target only
    python benchmarks/bench_fit.py --n 3000 --peer-n 2000

Every method fits the same data (seeded Gaussian blobs by default, ``--data normal`` for
structureless standard-normal data) with the rbf kernel, ONE fixed gamma (kkmeans' median
heuristic on that data, unless ``--gamma``), k clusters and one restart. Each fit runs in its own
Python subprocess (a clean heap, a wall-clock cap of ``--timeout`` seconds, and a peer that
allocates tens of GB cannot take the parent down); only the ``fit`` call is timed, with
``time.perf_counter``. Each method is fitted ``--fit-repeats`` times (3), each in a fresh
process, and the median is reported: a fresh process pays the first touch of the memory it
allocates, which on this kind of machine varies by seconds per GB from run to run.

The objective of every method is recomputed here from its labels by ONE function,
:func:`kernel_kmeans_objective`, on the same float64 kernel matrix (scikit-learn's
``rbf_kernel`` with the common gamma, independent of every method under test):

    Σ_i K_ii − Σ_c (Σ_{i,j∈c} K_ij) / |c|

so "objective no worse" compares like with like (the peers report differently defined or no
inertia; their own figure is shown in the ``reported`` column for reference).

The output is Markdown, ready to paste into a note.
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
if ROOT not in sys.path:  # run from a source checkout without installing
    sys.path.insert(0, ROOT)

# name -> (label, what it runs)
METHODS = {
    "kkmeans": "kkmeans (this package), float64 K",
    "kkmeans-f32": "kkmeans (this package), float32 K",
    "KKMeans": "PyPI `kkmeans` 0.1.0 (bauxn; Theis 2023), lloyd",
    "KKMeans-elkan": "PyPI `kkmeans` 0.1.0 (bauxn; Theis 2023), elkan",
    "python-kkmeans": "PyPI `python-kkmeans` 0.1.0",
    "tslearn": "`tslearn` KernelKMeans",
}
PEERS = ["KKMeans", "KKMeans-elkan", "python-kkmeans", "tslearn"]
# A fit that takes longer than this (seconds) is not repeated (--fit-repeats).
REPEAT_UNDER = 30.0


# -- data and gamma -------------------------------------------------------------------------
def make_data(kind, n, d, k, seed):
    """Seeded data: ``blobs`` = k isotropic Gaussian blobs (scikit-learn ``make_blobs``,
    centres uniform in [-10, 10]^d, std 2.0, shuffled); ``normal`` = i.i.d. N(0, 1)."""
    if kind == "normal":
        return np.random.default_rng(seed).standard_normal((n, d))
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=2.0,
                      random_state=seed)
    return X


def median_gamma(X, seed):
    """kkmeans' own median heuristic (``gamma='median'``) with the generator that
    ``KernelKMeans(random_state=seed)`` uses for it."""
    from kkmeans_cli.kernels.functions import resolve_gamma

    gamma_seq, _ = np.random.SeedSequence(seed).spawn(2)
    return resolve_gamma("rbf", "median", X, np.random.default_rng(gamma_seq))


def reference_kernel(X, gamma):
    """The float64 rbf kernel matrix every objective is measured on (scikit-learn)."""
    from sklearn.metrics.pairwise import rbf_kernel

    K = rbf_kernel(X, gamma=gamma)
    np.fill_diagonal(K, 1.0)
    return K


def kernel_kmeans_objective(K, labels):
    """Σ_i K_ii − Σ_c (Σ_{i,j∈c} K_ij)/|c| for any labelling (unit weights, empty clusters
    ignored). One BLAS product F = K·Z with the one-hot matrix Z, all in float64."""
    labels = np.asarray(labels).ravel()
    _, lab = np.unique(labels, return_inverse=True)
    Z = np.zeros((K.shape[0], lab.max() + 1))
    Z[np.arange(K.shape[0]), lab] = 1.0
    F = K @ Z                                   # F[i, c] = Σ_{j∈c} K_ij
    inner = np.einsum("ic,ic->c", Z, F)         # Σ_{i,j∈c} K_ij
    sizes = Z.sum(axis=0)
    return float(np.trace(K) - np.sum(inner / sizes)), int(lab.max() + 1)


# -- one fit per subprocess -----------------------------------------------------------------
def worker(args):
    """Fit one method and write labels + timings to ``args.out`` (npz)."""
    X = make_data(args.data, args.n, args.d, args.centres or args.k, args.seed)
    gamma, k, seed = args.gamma, args.k, args.seed
    extra = {}
    name = args.worker
    if name.startswith("kkmeans"):
        from kkmeans_cli import KernelKMeans

        dtype = np.float32 if name == "kkmeans-f32" else np.float64
        est = KernelKMeans(k, kernel="rbf", gamma=gamma, n_init=1, random_state=seed,
                           dtype=dtype, n_threads=args.threads)
        t0 = time.perf_counter()
        est.fit(X)
        seconds = time.perf_counter() - t0
        labels, reported = est.labels_, est.inertia_
        extra = {"kernel_seconds": est.fit_stats_["kernel_seconds"],
                 "iteration_seconds": est.fit_stats_["iteration_seconds"],
                 "n_iter": int(est.n_iter_), "n_threads": est.fit_stats_["n_threads"],
                 "storage": est.fit_stats_["storage"]}
    elif name.startswith("KKMeans"):
        np.NINF = -np.inf  # removed in NumPy 2, still used by KKMeans 0.1.0 (lloyd)
        from KKMeans import KKMeans

        algorithm = "elkan" if name == "KKMeans-elkan" else "lloyd"
        est = KKMeans(n_clusters=k, init="kmeans++", n_init=1, kernel="rbf", gamma=gamma,
                      rng=seed, algorithm=algorithm)
        with contextlib.redirect_stdout(sys.stderr):  # it prints "Best inertia: ..."
            t0 = time.perf_counter()
            est.fit(X)
            seconds = time.perf_counter() - t0
        labels, reported = est.labels_, est.quality_
    elif name == "python-kkmeans":
        import kkmeans as pk  # the module of python-kkmeans (not PyPI `kkmeans`)

        sigma = (2.0 * gamma) ** -0.5  # its rbf is exp(-|x-y|² / 2σ²)
        np.random.seed(seed)           # its initialisations draw from the global generator
        t0 = time.perf_counter()
        labels = pk.kkmeans(X, k, kernel_function=lambda A: pk.rbf_kernel(A, sigma=sigma),
                            initial_cluster_assignments=pk.kmeans_plusplus)
        seconds = time.perf_counter() - t0
        reported = float("nan")        # it returns labels only
    elif name == "tslearn":
        import warnings

        from tslearn.clustering import KernelKMeans as TsKernelKMeans

        est = TsKernelKMeans(n_clusters=k, kernel="rbf", kernel_params={"gamma": gamma},
                             n_init=1, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "2-Dimensional data passed ..."
            t0 = time.perf_counter()
            est.fit(X)
            seconds = time.perf_counter() - t0
        labels, reported = est.labels_, est.inertia_
        extra = {"n_iter": int(est.n_iter_)}
    else:
        raise SystemExit(f"unknown method {name}")
    np.savez(args.out, labels=np.asarray(labels, dtype=np.int64), seconds=seconds,
             reported=float(reported) if reported is not None else float("nan"),
             extra=json.dumps(extra))


def run_method(name, args, n, tmpdir):
    """Run one method ``--fit-repeats`` times (once if a run takes more than
    ``REPEAT_UNDER`` seconds), each in a fresh subprocess; the median time is reported.
    Returns a result dict (``error`` set on failure)."""
    runs = []
    for _ in range(max(1, args.fit_repeats)):
        res = run_method_once(name, args, n, tmpdir)
        if "error" in res:
            return res
        runs.append(res)
        if res["seconds"] > REPEAT_UNDER:
            break
    times = [r["seconds"] for r in runs]
    res = sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]  # the median run
    res["seconds"] = statistics.median(times)
    res["runs"] = len(times)
    res["spread"] = (min(times), max(times))
    return res


def run_method_once(name, args, n, tmpdir):
    """Run one method in a subprocess; returns a result dict (``error`` set on failure)."""
    out = os.path.join(tmpdir, f"{name}-{n}.npz")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--out", out,
           "--n", str(n), "--d", str(args.d), "--k", str(args.k), "--seed", str(args.seed),
           "--centres", str(args.centres or args.k),
           "--data", args.data, "--gamma", repr(args.gamma)]
    if args.threads is not None:
        cmd += ["--threads", str(args.threads)]
    res = {"name": name, "n": n}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        res["error"] = f"no result within the {args.timeout:.0f} s cap"
        return res
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        res["error"] = f"exit {proc.returncode}: {last}"
        return res
    with np.load(out) as z:
        res.update(labels=z["labels"], seconds=float(z["seconds"]),
                   reported=float(z["reported"]), extra=json.loads(str(z["extra"])))
    res["wall"] = time.perf_counter() - t0
    return res


# -- full pass against a plain read ---------------------------------------------------------
def median_time(fn, repeats):
    fn()  # warm-up: page faults, caches, thread pool start
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def full_pass_table(X, gamma, k, labels, threads, repeats):
    from kkmeans_cli.engine import _lloyd
    from kkmeans_cli.engine.threads import effective_n_threads
    from kkmeans_cli.kernels.functions import Kernel

    n_threads = effective_n_threads(threads)
    labels = np.ascontiguousarray(labels, dtype=np.int32)
    weights = np.ones(X.shape[0])
    F = np.empty((k, X.shape[0]))
    rows = []
    for dtype in (np.float64, np.float32):
        K = Kernel("rbf", gamma).matrix(X, dtype=dtype, n_threads=n_threads)
        read = median_time(lambda: K.sum(), repeats)
        full = {t: median_time(lambda: _lloyd.outer_sums_rows(K, 0, labels, weights, F, t),
                               repeats)
                for t in sorted({1, n_threads})}
        rows.append((np.dtype(dtype).name, K.nbytes / 2**20, read, full))
        del K
    return n_threads, rows


# -- report ---------------------------------------------------------------------------------
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10_000, help="points (default 10,000)")
    p.add_argument("--d", type=int, default=10, help="features (default 10)")
    p.add_argument("--k", type=int, default=8, help="clusters (default 8)")
    p.add_argument("--centres", type=int, default=None,
                   help="blobs in the data (default: k)")
    p.add_argument("--threads", type=int, default=None,
                   help="kkmeans' n_threads (default: every core)")
    p.add_argument("--skip-peers", action="store_true", help="kkmeans and the full pass only")
    p.add_argument("--peers", default=",".join(PEERS),
                   help=f"comma-separated subset of {','.join(PEERS)}")
    p.add_argument("--peer-n", type=int, default=None,
                   help="also run every method at this smaller n (for peers too slow or too "
                        "memory-hungry at --n); reported in a second table")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="wall-clock cap per fit subprocess, seconds (default 900)")
    p.add_argument("--data", choices=("blobs", "normal"), default="blobs")
    p.add_argument("--gamma", type=float, default=None,
                   help="rbf gamma for all methods (default: kkmeans' median heuristic)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="repeats of the full-pass timing")
    p.add_argument("--fit-repeats", type=int, default=3,
                   help="fits per method, each in a fresh process; the median is reported "
                        f"(a method whose fit takes over {REPEAT_UNDER:.0f} s runs once)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        worker(args)
        return

    X = make_data(args.data, args.n, args.d, args.centres or args.k, args.seed)
    if args.gamma is None:
        args.gamma = median_gamma(X, args.seed)
    methods = ["kkmeans", "kkmeans-f32"]
    if not args.skip_peers:
        methods += [m.strip() for m in args.peers.split(",") if m.strip()]

    print(f"# kkmeans fit benchmark\n")
    print(f"- data: {args.data} (seed {args.seed}), n={args.n}, d={args.d}, k={args.k}; "
          f"rbf, gamma={args.gamma:.6g} (kkmeans median heuristic) for every method; "
          f"one restart each")
    print(f"- machine: {os.cpu_count()} cores; Python {sys.version.split()[0]}, "
          f"NumPy {np.__version__}; kkmeans n_threads={args.threads or 'all cores'}")
    print(f"- objective: Σ K_ii − Σ_c Σ_(i,j∈c) K_ij/|c| recomputed from each method's labels "
          f"on one float64 K (lower is better)\n")

    sizes = [args.n] + ([args.peer_n] if args.peer_n and args.peer_n != args.n else [])
    kk_labels = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            results = [run_method(m, args, n, tmp) for m in methods]
            if n == args.n and "labels" in results[0]:
                kk_labels = results[0]["labels"]
            Xn = X if n == args.n else make_data(args.data, n, args.d, args.centres or args.k, args.seed)
            K = reference_kernel(Xn, args.gamma)
            for r in results:
                if "labels" in r:
                    r["objective"], r["clusters"] = kernel_kmeans_objective(K, r["labels"])
            del K
            print_fit_table(results, n, args)

    print("## Full Lloyd pass against one plain read of K\n")
    if kk_labels is None:
        kk_labels = np.random.default_rng(args.seed).integers(0, args.k, args.n)
    n_threads, rows = full_pass_table(X, args.gamma, args.k, kk_labels, args.threads,
                                      args.repeats)
    print(f"Median of {args.repeats} repeats after one warm-up; full pass = "
          f"`_lloyd.outer_sums_rows(K, 0, labels, weights, F, t)` over all of K (the fitted "
          f"labels); plain read = `K.sum()` (NumPy, single-threaded). Target: full pass ≤ 2× the "
          f"plain read.\n")
    head = "| K dtype | K size | `K.sum()` s |"
    sep = "|---|---:|---:|"
    ts = sorted(rows[0][3])
    for t in ts:
        head += f" full pass, {t} thr s | ratio ({t} thr) |"
        sep += "---:|---:|"
    print(head + " target met |")
    print(sep + "---|")
    for dt, mb, read, full in rows:
        line = f"| {dt} | {mb:.0f} MB | {read:.4f} |"
        for t in ts:
            line += f" {full[t]:.4f} | {full[t] / read:.2f} |"
        ok = full[n_threads] <= 2 * read
        print(line + f" {'yes' if ok else 'no'} ({n_threads} thr) |")
    print()


def print_fit_table(results, n, args):
    base = next((r for r in results if r["name"] == "kkmeans" and "seconds" in r), None)
    print(f"## Fit, n={n}, d={args.d}, k={args.k}\n")
    print("| method | seconds | × kkmeans time | objective | Δ objective vs kkmeans | "
          "reported inertia | clusters | notes |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        label = METHODS.get(r["name"], r["name"])
        if "error" in r:
            print(f"| {label} | — | — | — | — | — | — | {r['error']} |")
            continue
        ratio = r["seconds"] / base["seconds"] if base else float("nan")
        dobj = (r["objective"] - base["objective"]) / base["objective"] if base else float("nan")
        ex = r.get("extra", {})
        notes = []
        if "kernel_seconds" in ex:
            notes.append(f"kernel {ex['kernel_seconds']:.2f} s + iterations "
                         f"{ex['iteration_seconds']:.2f} s, n_iter {ex['n_iter']}, "
                         f"{ex['n_threads']} thr")
        elif "n_iter" in ex:
            notes.append(f"n_iter {ex['n_iter']}")
        if "storage" in ex:
            notes.append(f"storage {ex['storage']}")
        if r.get("runs", 1) > 1:
            notes.append(f"median of {r['runs']} runs ({r['spread'][0]:.2f}–{r['spread'][1]:.2f} s)")
        rep = "—" if np.isnan(r["reported"]) else f"{r['reported']:.4f}"
        print(f"| {label} | {r['seconds']:.2f} | {ratio:.1f} | {r['objective']:.4f} | "
              f"{dobj:+.2%} | {rep} | {r['clusters']} | {'; '.join(notes)} |")
    print()
    if base:
        peer = next((r for r in results if r["name"] == "KKMeans" and "seconds" in r), None)
        if peer:
            speed = peer["seconds"] / base["seconds"]
            no_worse = base["objective"] <= peer["objective"] * (1 + 1e-9)
            print(f"Target (≥ 10× faster than PyPI `kkmeans`, objective no worse): "
                  f"{speed:.1f}× faster, objective {'no worse' if no_worse else 'WORSE'} → "
                  f"{'met' if speed >= 10 and no_worse else 'NOT met'}.\n")


if __name__ == "__main__":
    main()
