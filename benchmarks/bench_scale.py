#!/usr/bin/env python
"""Scale benchmark (targets 4-6 of docs/performance.md): exact float32 fit at n=40,000,
Nyström fit of a million points, Nyström against exact quality.

    python benchmarks/bench_scale.py                          # all three (~10 min on 2 cores)
    python benchmarks/bench_scale.py --cases nystroem --nys-n 200000
    python benchmarks/bench_scale.py --exact-n 20000 --nys-n 100000 --quality-n 5000

Cases (each in its own Python subprocess, so its peak RSS is its own; peak RSS is ``VmHWM`` of
/proc/self/status at the end of the child, which includes the data):

- ``exact``: ``KernelKMeans(k, dtype=float32)`` on seeded blobs, n = ``--exact-n`` (40,000:
  a 6.4 GB kernel matrix), d = ``--d``, k = ``--k``, rbf with the median gamma;
- ``nystroem``: ``KernelKMeans(k, approx='nystroem')`` (default landmarks) on seeded blobs,
  n = ``--nys-n`` (1,000,000), d = 20, k = 20;
- ``quality``: exact (float64) and Nyström fits of the same data at n = ``--quality-n``
  (20,000) — blobs (d = 20, k = 20) and circles (k = 2, gamma 5) — with their ARI, the
  Nyström objective, and the *exact* objective of both labelings (Σ K_ii − Σ_c g_c/W_c on the
  exact kernel), so the approximation's cost is measured on one scale.

Only ``fit`` is timed (``time.perf_counter``). ``--n-init`` applies to every fit (default
the package default, 20). Prints Markdown. The machine may be shared: note its load.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def peak_rss_bytes():
    """VmHWM (peak resident set) of this process, from /proc/self/status; getrusage else."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def exp_seconds_per_value(rng):
    """Seconds per float64 exponential at NumPy's one-core rate (SIMD exp), measured now on
    10⁷ values in [−20, 0] (the range of rbf kernel exponents): five calls after a warm-up."""
    import numpy as np

    x = -rng.random(10**7) * 20
    y = np.empty_like(x)
    np.exp(x, out=y)
    t0 = time.perf_counter()
    for _ in range(5):
        np.exp(x, out=y)
    return (time.perf_counter() - t0) / 5e7


def blobs(n, d, k, seed=0):
    """Seeded Gaussian blobs (std 2, centres uniform in [-10, 10]^d), float64."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, size=(k, d))
    y = rng.integers(0, k, size=n)
    X = centres[y]
    X += rng.normal(scale=2.0, size=(n, d))
    return X, y


def exact_objective(X, labels, kernel):
    """Σ K_ii − Σ_c g_c/W_c of ``labels`` under the exact kernel (unit weights, one K)."""
    import numpy as np

    from kkmeans_cli.kernels.sources import InMemoryKernel
    from kkmeans_cli.engine.lloyd import inner_sums, objective

    K = kernel.matrix(X, n_threads=os.cpu_count())
    src = InMemoryKernel(K, n_threads=os.cpu_count(), diag=kernel.diag(X))
    k = int(labels.max()) + 1
    w = np.ones(X.shape[0])
    F = np.empty((k, X.shape[0]))
    labels = labels.astype(np.int32)
    src.full_outer_sums(labels, w, F)
    g, W = inner_sums(F, labels, w, k)
    return objective(src.diag, w, g, W)


# -- the cases (run in a child process) -------------------------------------------------------
def case_exact(args):
    import numpy as np

    from kkmeans_cli import KernelKMeans

    X, _ = blobs(args.exact_n, args.d, args.k)
    est = KernelKMeans(args.k, dtype=np.float32, n_init=args.n_init, random_state=0)
    t0 = time.perf_counter()
    est.fit(X)
    return {"seconds": time.perf_counter() - t0, "n": args.exact_n, "d": args.d, "k": args.k,
            "inertia": est.inertia_, "n_iter": est.n_iter_,
            "kernel_seconds": est.fit_stats_["kernel_seconds"],
            "iteration_seconds": est.fit_stats_["iteration_seconds"]}


def case_nystroem(args):
    from kkmeans_cli import KernelKMeans

    X, y = blobs(args.nys_n, 20, 20)
    est = KernelKMeans(20, approx="nystroem", n_init=args.n_init, random_state=0)
    t0 = time.perf_counter()
    est.fit(X)
    seconds = time.perf_counter() - t0
    from sklearn.metrics import adjusted_rand_score

    return {"seconds": seconds, "n": args.nys_n, "d": 20, "k": 20, "m": est.n_landmarks_,
            "inertia": est.inertia_, "n_iter": est.n_iter_,
            "kernel_seconds": est.fit_stats_["kernel_seconds"],
            "iteration_seconds": est.fit_stats_["iteration_seconds"],
            "ari_truth": adjusted_rand_score(y, est.labels_)}


def case_quality(args):
    from sklearn.datasets import make_circles
    from sklearn.metrics import adjusted_rand_score

    from kkmeans_cli import KernelKMeans

    n = args.quality_n
    sets = {"blobs d=20 k=20": (blobs(n, 20, 20)[0], 20, "median"),
            "circles k=2 γ=5": (make_circles(n, factor=0.3, noise=0.05, random_state=0)[0],
                                2, 5.0)}
    rows = []
    for name, (X, k, gamma) in sets.items():
        t0 = time.perf_counter()
        ex = KernelKMeans(k, gamma=gamma, n_init=args.n_init, random_state=0).fit(X)
        t1 = time.perf_counter()
        ny = KernelKMeans(k, gamma=gamma, n_init=args.n_init, random_state=0,
                          approx="nystroem").fit(X)
        t2 = time.perf_counter()
        rows.append({"data": name, "n": n, "m": ny.n_landmarks_,
                     "ari": adjusted_rand_score(ex.labels_, ny.labels_),
                     "exact_seconds": t1 - t0, "nystroem_seconds": t2 - t1,
                     "exact_inertia": ex.inertia_, "nystroem_inertia": ny.inertia_,
                     "exact_objective_of_nystroem": exact_objective(X, ny.labels_, ex.kernel_)})
    return {"rows": rows}


def patch_spectral():
    """Use the explicit-feature embedding for sources that have one (see --feature-spectral)."""
    from kkmeans_cli.engine import spectral

    original = spectral.spectral_embedding

    def spectral_embedding(source, weights, n_clusters, rng):
        if hasattr(source, "spectral_embedding"):
            return source.spectral_embedding(weights, n_clusters), "features"
        return original(source, weights, n_clusters, rng)

    spectral.spectral_embedding = spectral_embedding


CASES = {"exact": case_exact, "nystroem": case_nystroem, "quality": case_quality}


def run_child(case, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case] + args.passthrough
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def gb(b):
    return f"{b / 1e9:.2f} GB"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="exact,nystroem,quality")
    p.add_argument("--exact-n", type=int, default=40_000)
    p.add_argument("--nys-n", type=int, default=1_000_000)
    p.add_argument("--quality-n", type=int, default=20_000)
    p.add_argument("--d", type=int, default=10, help="features of the exact case")
    p.add_argument("--k", type=int, default=8, help="clusters of the exact case")
    p.add_argument("--n-init", type=int, default=20)
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--feature-spectral", action="store_true",
                   help="route the spectral start of Nyström fits through "
                        "FeatureSpaceSource.spectral_embedding (an m×m eigenproblem) instead "
                        "of optima's 1,000 landmark rows of K (patched in the child only)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    args = p.parse_args(argv)
    if args.child:
        if args.feature_spectral:
            patch_spectral()
        out = CASES[args.child](args)
        out["peak_rss"] = peak_rss_bytes()
        print(json.dumps(out))
        return
    args.passthrough = [a for a in argv]
    cases = args.cases.split(",")
    print(f"machine: {os.cpu_count()} cores, load average "
          f"{' '.join(f'{v:.1f}' for v in os.getloadavg())} at start "
          f"(shared with other developers); n_init = {args.n_init}"
          f"{'; spectral start via features' if args.feature_spectral else ''}\n")
    results = {c: run_child(c, args) for c in cases}
    fits = [c for c in ("exact", "nystroem") if c in results]
    if fits:
        print("| fit | n | d | k | m | seconds (kernel/features + iterations) | peak RSS | "
              "inertia |")
        print("|---|---|---|---|---|---|---|---|")
        for c in fits:
            r = results[c]
            if "error" in r:
                print(f"| {c} | failed: {r['error']} |||||||")
                continue
            what = "exact float32" if c == "exact" else "Nyström"
            print(f"| {what} | {r['n']:,} | {r['d']} | {r['k']} | {r.get('m', '—')} | "
                  f"{r['seconds']:.1f} ({r['kernel_seconds']:.1f} + "
                  f"{r['iteration_seconds']:.1f}) | {gb(r['peak_rss'])} | "
                  f"{r['inertia']:.6g} |")
        if "nystroem" in results and "ari_truth" in results["nystroem"]:
            print(f"\nNyström ARI against the generating blobs: "
                  f"{results['nystroem']['ari_truth']:.4f}")
    if "quality" in results:
        r = results["quality"]
        print()
        if "error" in r:
            print(f"quality failed: {r['error']}")
            return
        print("| data | n | m | ARI(Nyström, exact) | exact s | Nyström s | exact objective: "
              "exact labels | exact objective: Nyström labels | Nyström objective |")
        print("|---|---|---|---|---|---|---|---|---|")
        for row in r["rows"]:
            print(f"| {row['data']} | {row['n']:,} | {row['m']} | {row['ari']:.4f} | "
                  f"{row['exact_seconds']:.1f} | {row['nystroem_seconds']:.1f} | "
                  f"{row['exact_inertia']:.6g} | {row['exact_objective_of_nystroem']:.6g} | "
                  f"{row['nystroem_inertia']:.6g} |")
        print(f"\n(quality child peak RSS {gb(r['peak_rss'])})")


if __name__ == "__main__":
    main()
