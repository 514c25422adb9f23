#!/usr/bin/env python
"""Sweep benchmark (target 3 of docs/performance.md): ``kkmeans sweep`` against fitting the
fastest peer once per k.

    python benchmarks/bench_sweep.py                    # n=10,000, d=10, 6 blobs, k=2..10
    python benchmarks/bench_sweep.py --data normal
    python benchmarks/bench_sweep.py --peers KKMeans,KKMeans-elkan,python-kkmeans,tslearn

kkmeans runs :func:`kkmeans_cli.model.sweep.sweep` (the engine of ``kkmeans sweep``): one kernel
matrix, every k fitted with one restart, every measure computed per k (exact silhouette,
simplified silhouette, Calinski-Harabasz, Davies-Bouldin), k chosen by the silhouette. The
whole call is timed, in a fresh process, ``--repeats`` times (median reported).

Each peer fits every k once (one restart, the same rbf gamma), each fit in its own process
(``bench_fit.run_method_once``, which times the ``fit`` call only); its time is the sum over k.
The peers compute no silhouette, so they are timed for less work than kkmeans does. Target
(docs/performance.md): the sweep takes ≤ 1/10 of the fastest peer's total.

The default peers are PyPI ``kkmeans`` (lloyd and elkan), the fastest by far
(``bench_fit.py``: 3.6 s per fit against 69 s for ``python-kkmeans`` and 84 s for
``tslearn`` at n = 10,000); the others can be added with ``--peers``.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

import bench_fit  # noqa: E402  (the peers' workers and the data)

DEFAULT_PEERS = ["KKMeans", "KKMeans-elkan"]


def sweep_worker(args):
    """Time one sweep and write its rows to ``args.out`` (JSON)."""
    from kkmeans_cli.model.sweep import sweep

    X = bench_fit.make_data(args.data, args.n, args.d, args.centres, args.seed)
    ks = list(range(args.k_min, args.k_max + 1))
    t0 = time.perf_counter()
    res = sweep(X, ks, metric="silhouette", kernel="rbf", gamma=args.gamma, n_init=1,
                random_state=args.seed, n_threads=args.threads)
    seconds = time.perf_counter() - t0
    with open(args.out, "w") as f:
        json.dump({"seconds": seconds, "kernel_seconds": res.kernel_seconds,
                   "fit_seconds": res.fit_seconds, "best_k": res.best_k,
                   "rows": res.rows}, f)


def run_sweep(args, tmpdir):
    out = os.path.join(tmpdir, "sweep.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--out", out,
           "--n", str(args.n), "--d", str(args.d), "--centres", str(args.centres),
           "--k-min", str(args.k_min), "--k-max", str(args.k_max), "--seed", str(args.seed),
           "--data", args.data, "--gamma", repr(args.gamma)]
    if args.threads is not None:
        cmd += ["--threads", str(args.threads)]
    runs = []
    for _ in range(max(1, args.repeats)):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode != 0:
            raise SystemExit(f"kkmeans sweep failed: {proc.stderr.strip()[-2000:]}")
        with open(out) as f:
            runs.append(json.load(f))
    runs.sort(key=lambda r: r["seconds"])
    median = runs[len(runs) // 2]
    median["all_seconds"] = [r["seconds"] for r in runs]
    return median


def run_peer(name, args, tmpdir):
    """Fit ``name`` once per k (each in its own process); per-k seconds and objective."""
    per_k = {}
    for k in range(args.k_min, args.k_max + 1):
        fit_args = argparse.Namespace(**vars(args))
        fit_args.k = k
        res = bench_fit.run_method_once(name, fit_args, args.n, tmpdir)
        if "error" in res:
            return {"name": name, "error": f"k = {k}: {res['error']}"}
        per_k[k] = res["seconds"]
    return {"name": name, "per_k": per_k, "total": sum(per_k.values())}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--centres", type=int, default=6, help="blobs in the data (default 6)")
    p.add_argument("--k-min", type=int, default=2)
    p.add_argument("--k-max", type=int, default=10)
    p.add_argument("--data", choices=("blobs", "normal"), default="blobs")
    p.add_argument("--gamma", type=float, default=None,
                   help="rbf gamma for all methods (default: kkmeans' median heuristic)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--peers", default=",".join(DEFAULT_PEERS),
                   help=f"comma-separated subset of {','.join(bench_fit.PEERS)}")
    p.add_argument("--skip-peers", action="store_true")
    p.add_argument("--repeats", type=int, default=3, help="sweeps (fresh processes); median")
    p.add_argument("--timeout", type=float, default=900.0, help="cap per process, seconds")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        sweep_worker(args)
        return

    X = bench_fit.make_data(args.data, args.n, args.d, args.centres, args.seed)
    if args.gamma is None:
        args.gamma = bench_fit.median_gamma(X, args.seed)
    ks = f"{args.k_min}..{args.k_max}"
    print("# kkmeans sweep benchmark\n")
    print(f"- data: {args.data} (seed {args.seed}), n={args.n}, d={args.d}"
          + (f", {args.centres} centres" if args.data == "blobs" else "")
          + f"; rbf, gamma={args.gamma:.6g}; k = {ks}, one restart per k")
    print(f"- machine: {os.cpu_count()} cores; Python {sys.version.split()[0]}, "
          f"NumPy {np.__version__}\n")
    with tempfile.TemporaryDirectory() as tmp:
        sw = run_sweep(args, tmp)
        peers = [] if args.skip_peers else [run_peer(m.strip(), args, tmp)
                                           for m in args.peers.split(",") if m.strip()]

    print(f"## kkmeans sweep (every measure, exact silhouette), median of "
          f"{len(sw['all_seconds'])}: {sw['seconds']:.2f} s "
          f"(runs: {', '.join(f'{s:.2f}' for s in sw['all_seconds'])}); kernel matrix "
          f"{sw['kernel_seconds']:.2f} s; best k by silhouette: {sw['best_k']}\n")
    print("| k | inertia | silhouette | n_iter | fit s | fit + measures s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for row, fit_s in zip(sw["rows"], sw["fit_seconds"]):
        print(f"| {row['k']} | {row['inertia']:.3f} | {row['silhouette']:.4f} | "
              f"{row['n_iter']} | {fit_s:.3f} | {row['seconds']:.3f} |")
    print()
    if not peers:
        return
    print("## Peers fitted once per k (fit call only, one process per fit)\n")
    kcols = list(range(args.k_min, args.k_max + 1))
    print("| method | total s | sweep / total | " + " | ".join(f"k={k}" for k in kcols) + " |")
    print("|---|---:|---:|" + "---:|" * len(kcols))
    for r in peers:
        label = bench_fit.METHODS.get(r["name"], r["name"])
        if "error" in r:
            print(f"| {label} | — | — | {r['error']} |")
            continue
        print(f"| {label} | {r['total']:.2f} | {sw['seconds'] / r['total']:.3f} | "
              + " | ".join(f"{r['per_k'][k]:.2f}" for k in kcols) + " |")
    print()
    done = [r for r in peers if "error" not in r]
    if done:
        fastest = min(done, key=lambda r: r["total"])
        ratio = sw["seconds"] / fastest["total"]
        print(f"Target (sweep ≤ 1/10 of the fastest peer fitted once per k): "
              f"{sw['seconds']:.2f} s / {fastest['total']:.2f} s "
              f"({bench_fit.METHODS.get(fastest['name'], fastest['name'])}) = 1/{1 / ratio:.1f} "
              f"→ {'met' if ratio <= 0.1 else 'NOT met'}.")


if __name__ == "__main__":
    main()
