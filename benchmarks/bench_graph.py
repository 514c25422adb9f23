"""Graph kernels (the normalized cut of a k-nearest-neighbour graph, docs/engine.md) against
scikit-learn's SpectralClustering, KMeans and kkmeans' default rbf kernel.

    python benchmarks/bench_graph.py gallery [--seeds 0 1 2]   # (a) ARI on the cluster gallery
    python benchmarks/bench_graph.py big [--n 1000000]         # (b) 10⁶ moons: time, RSS, ARI
    python benchmarks/bench_graph.py ncut                      # (c) ncut reached on one graph
    python benchmarks/bench_graph.py starts                    # multilevel vs spectral starts
    python benchmarks/bench_graph.py knn [--n 20000 --d 64]    # exact blocked vs pynndescent

(a) The data sets of scikit-learn's ``plot_cluster_comparison`` (n = 1500, StandardScaler):
noisy circles (factor .5), moons, varied blobs (cluster_std [1.0, 2.5, 0.5]), anisotropic blobs
(their linear map), blobs, plus three concentric rings; each at the gallery's noise and at
higher noise, for several seeds (the gallery's 170 and others). (b) Each method runs in its own
process (peak RSS its own, VmHWM). Timings on a shared machine are indicative: the load
average is printed with them.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_scale import peak_rss_bytes  # noqa: E402

K_OF = {"circles": 2, "moons": 2, "varied": 3, "aniso": 3, "blobs": 3, "rings": 3}


def rings(n, noise, seed):
    """Three concentric rings of radii 1, 2, 3 (n/3 points each) with Gaussian noise."""
    rng = np.random.default_rng(seed)
    m = n // 3
    t = rng.uniform(0, 2 * np.pi, 3 * m)
    r = np.repeat([1.0, 2.0, 3.0], m)
    X = np.c_[r * np.cos(t), r * np.sin(t)] + rng.normal(scale=noise, size=(3 * m, 2))
    return X, np.repeat([0, 1, 2], m)


def gallery_data(name, seed, noise_scale=1.0, n=1500):
    """One data set of the gallery (its noise × noise_scale), standardized."""
    from sklearn import datasets
    from sklearn.preprocessing import StandardScaler

    if name == "circles":
        X, y = datasets.make_circles(n, factor=0.5, noise=0.05 * noise_scale, random_state=seed)
    elif name == "moons":
        X, y = datasets.make_moons(n, noise=0.05 * noise_scale, random_state=seed)
    elif name == "varied":
        X, y = datasets.make_blobs(n, cluster_std=[s * noise_scale for s in (1.0, 2.5, 0.5)],
                                   random_state=seed)
    elif name == "aniso":
        X, y = datasets.make_blobs(n, cluster_std=noise_scale, random_state=seed)
        X = X @ np.array([[0.6, -0.6], [-0.4, 0.8]])
    elif name == "blobs":
        X, y = datasets.make_blobs(n, cluster_std=noise_scale, random_state=seed)
    else:
        X, y = rings(n, 0.1 * noise_scale, seed)
    return StandardScaler().fit_transform(X), y


def method_labels(method, X, k, seed):
    from sklearn.cluster import KMeans, SpectralClustering

    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.kernels.graph_fit import fit_graph

    if method == "graph":
        return fit_graph(X, k, random_state=seed).labels
    if method == "graph-self-tuning":
        return fit_graph(X, k, weighting="self-tuning", random_state=seed).labels
    if method == "spectral":
        return SpectralClustering(k, affinity="nearest_neighbors", random_state=seed).fit(X).labels_
    if method == "kmeans":
        return KMeans(k, random_state=seed, n_init=10).fit(X).labels_
    return KernelKMeans(k, random_state=seed).fit(X).labels_


def gallery(args):
    import warnings

    from sklearn.metrics import adjusted_rand_score

    methods = ["graph", "graph-self-tuning", "spectral", "kmeans", "rbf"]
    print(f"load average {os.getloadavg()[0]:.2f}; mean ARI over seeds {args.seeds}")
    print(f"| data | noise | {' | '.join(methods)} |")
    print("|---|---|" + "---|" * len(methods))
    for name in K_OF:
        for scale in args.noise:
            scores = {m: [] for m in methods}
            for seed in args.seeds:
                X, y = gallery_data(name, seed, scale)
                for m in methods:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        labels = method_labels(m, X, K_OF[name], seed)
                    scores[m].append(adjusted_rand_score(y, labels))
            row = " | ".join(f"{np.mean(scores[m]):.3f}" for m in methods)
            print(f"| {name} | ×{scale:g} | {row} |", flush=True)


def big_child(method, n, threads):
    from sklearn.datasets import make_moons
    from sklearn.metrics import adjusted_rand_score

    X, y = make_moons(n, noise=0.05, random_state=0)
    t0 = time.perf_counter()
    if method == "graph":
        from kkmeans_cli.kernels.graph_fit import fit_graph

        res = fit_graph(X, 2, random_state=0, n_threads=threads)
        labels, extra = res.labels, {"ncut": res.ncut, "start": res.start}
    else:
        from sklearn.cluster import SpectralClustering

        labels = SpectralClustering(2, affinity="nearest_neighbors", n_jobs=threads,
                                    random_state=0).fit(X).labels_
        extra = {}
    seconds = time.perf_counter() - t0
    return dict(seconds=seconds, rss=peak_rss_bytes(), ari=adjusted_rand_score(y, labels),
                load=os.getloadavg()[0], **extra)


def big(args):
    print(f"{args.n} moons (noise 0.05), {args.threads} threads; load average before "
          f"{os.getloadavg()[0]:.2f}")
    print("| method | seconds | peak RSS | ARI | load after |")
    print("|---|---|---|---|---|")
    for method in args.methods:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", method, str(args.n),
               str(args.threads)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode:
            print(f"| {method} | failed: {proc.stderr.strip().splitlines()[-1:]} |")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"| {method} | {r['seconds']:.1f} | {r['rss'] / 1e9:.2f} GB | {r['ari']:.4f} | "
              f"{r['load']:.2f} |", flush=True)


def ncut(args):
    """The ncut reached on one graph: the fit's against SpectralClustering(precomputed)."""
    import warnings

    from sklearn.cluster import SpectralClustering
    from sklearn.datasets import load_digits

    from kkmeans_cli.engine.graph import normalized_cut
    from kkmeans_cli.kernels.graph_fit import fit_graph

    cases = [(f"moons seed {s}", *gallery_data("moons", s, 2.0), 2) for s in args.seeds]
    cases += [(f"varied seed {s}", *gallery_data("varied", s), 3) for s in args.seeds]
    digits = load_digits()
    cases.append(("digits", digits.data, digits.target, 10))
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| data | k | fit ncut | start | SpectralClustering ncut |")
    print("|---|---|---|---|---|")
    for name, X, _, k in cases:
        res = fit_graph(X, k, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sc = SpectralClustering(k, affinity="precomputed", random_state=0).fit(
                res.graph.affinity)
        print(f"| {name} | {k} | {res.ncut:.5f} | {res.start} | "
              f"{normalized_cut(res.graph.affinity, sc.labels_):.5f} |", flush=True)


def starts(args):
    """Multilevel against spectral starts: ncut, ARI and seconds on one-component cases."""
    from sklearn.datasets import load_digits
    from sklearn.metrics import adjusted_rand_score

    from kkmeans_cli.kernels.graph_fit import fit_graph

    digits = load_digits()
    cases = [(f"{d} seed {s}", *gallery_data(d, s, 1.5), K_OF[d])
             for d in ("varied", "aniso", "blobs", "rings") for s in args.seeds]
    cases.append(("digits", digits.data, digits.target, 10))
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| data | multilevel ncut | ARI | s | spectral ncut | ARI | s |")
    print("|---|---|---|---|---|---|---|")
    for name, X, y, k in cases:
        row = []
        for start in ("multilevel", "spectral"):
            t0 = time.perf_counter()
            res = fit_graph(X, k, start=start, random_state=0)
            row += [f"{res.ncut:.5f}", f"{adjusted_rand_score(y, res.labels):.3f}",
                    f"{time.perf_counter() - t0:.2f}"]
        print(f"| {name} | {' | '.join(row)} |", flush=True)


def knn(args):
    """Exact blocked search against pynndescent's approximate one (if installed)."""
    from kkmeans_cli.kernels.graph import exact_nearest

    rng = np.random.default_rng(0)
    centres = rng.normal(scale=4.0, size=(20, args.d))
    X = centres[rng.integers(0, 20, args.n)] + rng.normal(size=(args.n, args.d))
    print(f"n={args.n} d={args.d} k=10, {args.threads} threads, load average "
          f"{os.getloadavg()[0]:.2f}")
    t0 = time.perf_counter()
    _, exact = exact_nearest(X, X, 10, args.threads, self_first=True)
    print(f"exact blocked: {time.perf_counter() - t0:.2f} s")
    try:
        from pynndescent import NNDescent
    except ImportError:
        print("pynndescent not installed")
        return
    t0 = time.perf_counter()
    idx, _ = NNDescent(X, n_neighbors=10, random_state=0, n_jobs=args.threads).neighbor_graph
    seconds = time.perf_counter() - t0
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(idx, exact)])
    print(f"pynndescent: {seconds:.2f} s (first call includes numba compilation), "
          f"recall {recall:.4f}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        print(json.dumps(big_child(argv[1], int(argv[2]), int(argv[3]))))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gallery")
    g.add_argument("--seeds", type=int, nargs="+", default=[170, 0, 1])
    g.add_argument("--noise", type=float, nargs="+", default=[1.0, 2.0])
    b = sub.add_parser("big")
    b.add_argument("--n", type=int, default=1_000_000)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--methods", nargs="+", default=["graph", "spectral"])
    b.add_argument("--timeout", type=float, default=1800)
    for name in ("ncut", "starts"):
        s = sub.add_parser(name)
        s.add_argument("--seeds", type=int, nargs="+", default=[170, 0])
    kn = sub.add_parser("knn")
    kn.add_argument("--n", type=int, default=20_000)
    kn.add_argument("--d", type=int, default=64)
    kn.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    {"gallery": gallery, "big": big, "ncut": ncut, "starts": starts, "knn": knn}[args.cmd](args)


if __name__ == "__main__":
    main()
