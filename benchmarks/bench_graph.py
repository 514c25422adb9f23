"""Graph kernels (the normalized cut of a k-nearest-neighbour graph, docs/engine.md) with only
their defaults, against scikit-learn's SpectralClustering and kkmeans' rbf kernel.

    python benchmarks/bench_graph.py gallery [--seeds 0 1 2 3 4 5]  # D1 ARI, cluster gallery
    python benchmarks/bench_graph.py real [--seeds 0 1 2]          # D2 ARI, iris … digits
    python benchmarks/bench_graph.py files [--seeds 0 1]           # D3 .npz = .mtx; ncut vs SC
    python benchmarks/bench_graph.py big [--n 1000000]             # D4 10⁶ moons: time, RSS
    python benchmarks/bench_graph.py predict [--n 100000]          # D5 predict new points
    python benchmarks/bench_graph.py starts [--seeds 0 1]          # default vs earlier starts
    python benchmarks/bench_graph.py knn [--n 20000 --d 64]        # exact blocked vs pynndescent
    python benchmarks/bench_graph.py ann [--n 20000 50000 100000]  # graph fits: exact vs approximate
    python benchmarks/bench_graph.py ann-states [--n 20000 50000]  # the fit's spread on each graph
    python benchmarks/bench_graph.py whiten [--seeds 0 … 11]       # whiten False / True / 'auto'
    python benchmarks/bench_graph.py scale [--repeats 3]           # the default vs one fit at scale
    python benchmarks/bench_graph.py bars [--seeds 0 … 131]        # the blob bar vs the references
    python benchmarks/bench_graph.py refit-sample [--n 250000]     # the refit decided on a sample
    python benchmarks/bench_graph.py harder [--seeds 0 … 11]       # shapes past the targets
    python benchmarks/bench_graph.py bayes [--seeds 0 … 131]       # against the Bayes classifier
    python benchmarks/bench_graph.py limits [--settings 5:0 10:0.01] # the mixture's cut limit
    python benchmarks/bench_graph.py neighbors [--values 20 24]    # the default neighbour count
    python benchmarks/bench_graph.py audit [--seeds 0 … 35]        # objective or starts, by graph
    python benchmarks/bench_graph.py large-k [--seeds 0 1]         # k = 20–100: the starts' pieces
    python benchmarks/bench_graph.py em [--seeds 0 1]              # the mixtures' EM: C vs NumPy

gallery: the data sets of scikit-learn's ``plot_cluster_comparison`` (n = 1500,
StandardScaler): circles (factor .5) and moons at noise .03, .05, .08, .1, three concentric
rings (radii 1, ⅔, ⅓) at .03 and .05, varied (cluster_std 1, 2.5, .5), anisotropic and plain
blobs — the gallery's own (random states 170 and 8) and with random centres per seed. real:
iris, wine, breast cancer, digits, raw and standardized, k = the classes. big: each method in
its own process (peak RSS its own, VmHWM), SpectralClustering capped by ``--timeout``.
Timings on a shared machine are indicative: the load average is printed with them.
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


RING_RADII = (1.0, 2 / 3, 1 / 3)
#: the gallery's blob families: varied's spreads, and the random states of the gallery's own
VARIED_STD = (1.0, 2.5, 0.5)
GALLERY_STATES = {"varied": 170, "aniso": 170, "blobs": 8}


def rings(n, noise, seed, radii=RING_RADII):
    """Three concentric rings (radii 1, ⅔, ⅓; n/3 points each, uniform angle, Gaussian noise
    of standard deviation ``noise``), like ``make_circles`` with a third ring."""
    rng = np.random.RandomState(seed)
    sizes = [n // 3 + (1 if i < n % 3 else 0) for i in range(3)]
    X, y = [], []
    for c, (radius, size) in enumerate(zip(radii, sizes)):
        t = rng.uniform(0, 2 * np.pi, size)
        X.append(np.c_[radius * np.cos(t), radius * np.sin(t)]
                 + rng.normal(scale=noise, size=(size, 2)))
        y.append(np.full(size, c))
    return np.vstack(X), np.concatenate(y)


ANISO = np.array([[0.6, -0.6], [-0.4, 0.8]])
NOISES = (0.03, 0.05, 0.08, 0.1)
RING_NOISES = (0.03, 0.05)


def gallery_data(name, seed, noise=0.05, n=1500):
    """One data set of scikit-learn's ``plot_cluster_comparison`` (n = 1500) or the three
    rings, standardized. ``seed`` None: the gallery's own random states (blobs 8, varied and
    aniso 170); circles and moons take ``noise``, rings their noise, the blob families none."""
    from sklearn import datasets
    from sklearn.preprocessing import StandardScaler

    if name == "circles":
        X, y = datasets.make_circles(n, factor=0.5, noise=noise, random_state=seed)
    elif name == "moons":
        X, y = datasets.make_moons(n, noise=noise, random_state=seed)
    elif name == "varied":
        X, y = datasets.make_blobs(n, cluster_std=list(VARIED_STD),
                                   random_state=GALLERY_STATES[name] if seed is None else seed)
    elif name == "aniso":
        X, y = datasets.make_blobs(n, random_state=GALLERY_STATES[name] if seed is None
                                   else seed)
        X = X @ ANISO
    elif name == "blobs":
        X, y = datasets.make_blobs(n, random_state=GALLERY_STATES[name] if seed is None
                                   else seed)
    else:
        X, y = rings(n, noise, seed)
    return StandardScaler().fit_transform(X), y


def gallery_cells():
    """(name, noise) of every cell of the defaults benchmark."""
    return ([(name, noise) for name in ("circles", "moons") for noise in NOISES]
            + [("rings", noise) for noise in RING_NOISES]
            + [(name, None) for name in ("varied", "aniso", "blobs")])


def method_labels(method, X, k, seed):
    from sklearn.cluster import SpectralClustering

    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.kernels.graph_fit import fit_graph

    if method == "graph":
        return fit_graph(X, k, random_state=seed, n_threads=1).labels
    if method == "spectral":
        return SpectralClustering(k, affinity="nearest_neighbors",
                                  random_state=seed).fit(X).labels_
    return KernelKMeans(k, kernel="rbf", random_state=seed).fit(X).labels_


METHODS = ("graph", "spectral", "rbf")
TARGETS = {"circles": 0.95, "moons": 0.95, "rings": 0.95, "varied": 0.90, "aniso": 0.90,
           "blobs": 0.98}


def scores_of(X, y, k, seed):
    import warnings

    from sklearn.metrics import adjusted_rand_score

    out = {}
    for m in METHODS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            labels = method_labels(m, X, k, seed)
        out[m] = (adjusted_rand_score(y, labels), time.perf_counter() - t0)
    return out


def gallery(args):
    """D1: only defaults, ARI on the gallery: mean (min) over seeds; ✓ when every seed meets
    the target (varied/aniso/blobs with random centres: at least the better of
    SpectralClustering and rbf − 0.02)."""
    print(f"load average {os.getloadavg()[0]:.2f}; n = 1500, seeds {args.seeds}; "
          f"mean ARI (min), seconds per fit in the last column")
    print("| data | noise | graph | SpectralClustering(nn) | rbf | target | graph s |")
    print("|---|---|---|---|---|---|---|")
    for name in ("varied", "aniso", "blobs") if args.only is None else ():   # the gallery's
        X, y = gallery_data(name, None)
        r = scores_of(X, y, K_OF[name], 0)
        ok = "✓" if r["graph"][0] >= TARGETS[name] else "✗"
        print(f"| {name} (gallery's own) | – | {r['graph'][0]:.3f} | {r['spectral'][0]:.3f} | "
              f"{r['rbf'][0]:.3f} | ≥ {TARGETS[name]} {ok} | {r['graph'][1]:.2f} |", flush=True)
    for name, noise in gallery_cells():
        if args.only is not None and name not in args.only:
            continue
        runs = []
        for seed in args.seeds:
            X, y = gallery_data(name, seed, noise)
            runs.append(scores_of(X, y, K_OF[name], seed))
        ari = {m: np.array([r[m][0] for r in runs]) for m in METHODS}
        if noise is None:
            need = np.maximum(ari["spectral"], ari["rbf"]) - 0.02
            target = "max(SC, rbf) − .02"
        else:
            need, target = TARGETS[name], f"≥ {TARGETS[name]}"
        below = [s for s, a, b in zip(args.seeds, ari["graph"], np.broadcast_to(need, (
            len(args.seeds),))) if a < b]
        verdict = "✓" if not below else f"✗ (seeds {', '.join(map(str, below))})"
        cells = " | ".join(f"{ari[m].mean():.3f} ({ari[m].min():.3f})" for m in METHODS)
        seconds = np.mean([r["graph"][1] for r in runs])
        print(f"| {name} | {'' if noise is None else noise} | {cells} | {target} {verdict} | "
              f"{seconds:.2f} |", flush=True)


def real_data():
    """(name, X, y, k) of iris, wine, breast cancer and digits, raw and standardized."""
    from sklearn import datasets
    from sklearn.preprocessing import StandardScaler

    for name in ("iris", "wine", "breast_cancer", "digits"):
        bunch = getattr(datasets, f"load_{name}")()
        X, y = bunch.data.astype(np.float64), bunch.target
        k = len(np.unique(y))
        yield f"{name} raw", X, y, k
        yield f"{name} std", StandardScaler().fit_transform(X), y, k


def real(args):
    """D2: only defaults on the real sets: mean ARI over seeds, and the mean of the 8."""
    print(f"load average {os.getloadavg()[0]:.2f}; seeds {args.seeds}; mean ARI")
    print("| data | graph | SpectralClustering(nn) | rbf |")
    print("|---|---|---|---|")
    means = {m: [] for m in METHODS}
    for name, X, y, k in real_data():
        runs = [scores_of(X, y, k, seed) for seed in args.seeds]
        row = []
        for m in METHODS:
            means[m].append(np.mean([r[m][0] for r in runs]))
            row.append(f"{means[m][-1]:.3f}")
        print(f"| {name} | {' | '.join(row)} |", flush=True)
    print(f"| **mean of 8** | {' | '.join(f'{np.mean(means[m]):.3f}' for m in METHODS)} |")


def big_child(method, n, threads, noise=0.05):
    from sklearn.datasets import make_moons
    from sklearn.metrics import adjusted_rand_score

    X, y = make_moons(n, noise=noise, random_state=0)
    t0 = time.perf_counter()
    if method == "graph":
        from kkmeans_cli.kernels.graph_fit import fit_graph

        res = fit_graph(X, 2, random_state=0, n_threads=threads)
        labels, extra = res.labels, {"ncut": res.ncut, "start": res.start,
                                     "levels": res.levels,
                                     "components": res.graph.info.n_components}
    else:
        from sklearn.cluster import SpectralClustering

        labels = SpectralClustering(2, affinity="nearest_neighbors", n_jobs=threads,
                                    random_state=0).fit(X).labels_
        extra = {}
    seconds = time.perf_counter() - t0
    return dict(seconds=seconds, rss=peak_rss_bytes(), ari=adjusted_rand_score(y, labels),
                load=os.getloadavg()[0], **extra)


def big(args):
    print(f"{args.n} moons (noise {args.noise}), {args.threads} threads; load average before "
          f"{os.getloadavg()[0]:.2f}")
    print("| method | seconds | peak RSS | ARI | load after |")
    print("|---|---|---|---|---|")
    for method in args.methods:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", method, str(args.n),
               str(args.threads), str(args.noise)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"| {method} | stopped at the {args.timeout:.0f} s timeout | – | – | "
                  f"{os.getloadavg()[0]:.2f} |", flush=True)
            continue
        if proc.returncode:
            print(f"| {method} | failed: {proc.stderr.strip().splitlines()[-1:]} |")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        how = (f" ({r['start']}, ncut {r['ncut']:.5f}, {r['components']} components, "
               f"{r['levels']} levels)" if "start" in r else "")
        print(f"| {method}{how} | {r['seconds']:.1f} | {r['rss'] / 1e9:.2f} GB | "
              f"{r['ari']:.4f} | {r['load']:.2f} |", flush=True)


def files(args):
    """D3: one graph written as .npz (scipy.sparse.save_npz) and .mtx (scipy.io.mmwrite),
    read back by io/graphs.py and fitted: the same labels; and the ncut the fit reaches
    against SpectralClustering(affinity='precomputed') on the same graph."""
    import tempfile
    import warnings

    import scipy.io
    from scipy import sparse
    from sklearn.cluster import SpectralClustering
    from sklearn.datasets import load_digits

    from kkmeans_cli.engine.graph import normalized_cut
    from kkmeans_cli.io.graphs import read_graph
    from kkmeans_cli.kernels.graph import knn_graph
    from kkmeans_cli.kernels.graph_fit import fit_graph

    digits = load_digits()
    cases = [(f"moons {noise} seed {s}", gallery_data("moons", s, noise)[0], 2)
             for noise in (0.05, 0.1) for s in args.seeds]
    cases.append(("digits raw", digits.data.astype(np.float64), 10))
    print(f"load average {os.getloadavg()[0]:.2f}; the graph: the default neighbour graph")
    print("| graph | k | nnz | .npz = .mtx labels | fit ncut | start | "
          "SpectralClustering(precomputed) ncut |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, X, k in cases:
            A = knn_graph(X, None, n_clusters=k, n_threads=2).affinity
            npz, mtx = os.path.join(tmp, "g.npz"), os.path.join(tmp, "g.mtx")
            sparse.save_npz(npz, A)
            scipy.io.mmwrite(mtx, A, symmetry="symmetric", precision=17)
            a = fit_graph(affinity=read_graph(npz), n_clusters=k, random_state=0)
            b = fit_graph(affinity=read_graph(mtx), n_clusters=k, random_state=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sc = SpectralClustering(k, affinity="precomputed", random_state=0).fit(A)
            print(f"| {name} | {k} | {A.nnz} | {np.array_equal(a.labels, b.labels)} | "
                  f"{a.ncut:.5f} | {a.start} | {normalized_cut(A, sc.labels_):.5f} |",
                  flush=True)


def predict(args):
    """D5: a model fitted by fit_graph's defaults on moons predicts new moons points."""
    from sklearn.datasets import make_moons
    from sklearn.metrics import adjusted_rand_score

    from kkmeans_cli.kernels.graph_fit import fit_graph, predict_graph

    X, y = make_moons(args.n_fit, noise=0.05, random_state=0)
    res = fit_graph(X, 2, random_state=0, n_threads=args.threads)
    Xn, yn = make_moons(args.n, noise=0.05, random_state=1)
    t0 = time.perf_counter()
    labels = predict_graph(res.model(), Xn, n_threads=args.threads)
    seconds = time.perf_counter() - t0
    print(f"load average {os.getloadavg()[0]:.2f}; fitted on {args.n_fit} moons (ARI "
          f"{adjusted_rand_score(y, res.labels):.4f}, start {res.start}); predict of "
          f"{args.n} new points: {seconds:.2f} s, ARI {adjusted_rand_score(yn, labels):.4f}")


def old_auto(X, k, seed):
    """The start mix 'auto' had before the measured defaults, on the same graph: three
    multilevel starts and one spectral start, the lowest objective kept."""
    from kkmeans_cli.kernels.graph_fit import fit_graph

    runs = [fit_graph(X, k, start="multilevel", n_init=3, random_state=seed, n_threads=1),
            fit_graph(X, k, start="spectral", n_init=1, random_state=seed, n_threads=1)]
    return min(runs, key=lambda r: r.objective)


def starts(args):
    """The default starts (components | NJW + four over-segment-and-merge) against the
    earlier mix (three multilevel + one spectral), on the default graph: ncut, ARI, seconds."""
    from sklearn.metrics import adjusted_rand_score

    from kkmeans_cli.kernels.graph_fit import fit_graph

    cases = [(f"{name} {noise or ''} seed {s}", *gallery_data(name, s, noise), K_OF[name])
             for name, noise in gallery_cells() for s in args.seeds]
    cases += [(name, X, y, k) for name, X, y, k in real_data()]
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| data | default ncut | ARI | s | earlier mix ncut | ARI | s |")
    print("|---|---|---|---|---|---|---|")
    wins = [0, 0, 0]
    for name, X, y, k in cases:
        t0 = time.perf_counter()
        new = fit_graph(X, k, random_state=0, n_threads=1)
        t1 = time.perf_counter()
        old = old_auto(X, k, 0)
        t2 = time.perf_counter()
        wins[0 if new.ncut < old.ncut - 1e-12 else 2 if old.ncut < new.ncut - 1e-12 else 1] += 1
        print(f"| {name} | {new.ncut:.5f} | {adjusted_rand_score(y, new.labels):.3f} | "
              f"{t1 - t0:.2f} | {old.ncut:.5f} | {adjusted_rand_score(y, old.labels):.3f} | "
              f"{t2 - t1:.2f} |", flush=True)
    print(f"lower ncut: default {wins[0]}, equal {wins[1]}, earlier mix {wins[2]}")


AUDIT_CELLS = (("circles", 0.1, 500), ("circles", 0.1, 1000), ("circles", 0.1, 1500),
               ("circles", 0.08, 1500), ("moons", 0.1, 1500), ("rings", 0.05, 1000),
               ("rings", 0.05, 1500))


def audit_graph(X, variant):
    """(affinity, node_of) of a graph variant of X: 'knn M' the default builder's connectivity
    graph of M other neighbours (nodes in its own order: node_of maps points to nodes);
    'mutual M' the mutual M-neighbour graph (i ~ j when each is among the other's M nearest;
    Maier, Hein & von Luxburg, "Optimal construction of k-nearest-neighbor graphs for
    identifying noisy clusters", 2009) united with the symmetrized 5-neighbour graph, so that
    no point is left alone (nodes = points)."""
    from scipy import sparse
    from sklearn.neighbors import NearestNeighbors

    from kkmeans_cli.kernels.graph import knn_graph

    kind, m = variant.split()
    m = int(m)
    if kind == "knn":
        g = knn_graph(X, m + 1)
        assert g.info.n_nodes == X.shape[0], "copies merged: the audit needs distinct points"
        return g.affinity, g.node_of
    n = X.shape[0]

    def lists(count):
        _, idx = NearestNeighbors(n_neighbors=count + 1).fit(X).kneighbors(X)
        return sparse.csr_matrix((np.ones(idx.size), idx.ravel(),
                                  np.arange(0, idx.size + 1, count + 1)), shape=(n, n))

    B, C = lists(m), lists(5)
    A = sparse.csr_matrix(B.minimum(B.T).maximum(C.maximum(C.T)))
    A.sort_indices()
    return A, np.arange(n)


def lowest_start(kernel, k, rng):
    """(ncut, node labels) of the default starts (``engine.graph_starts.default_starts``)
    each refined, the lowest cut kept; and [(ncut, labels)] of every one."""
    from kkmeans_cli.engine.graph import refine
    from kkmeans_cli.engine.graph_starts import default_starts

    runs = [refine(kernel, labels, k) for _, labels in default_starts(kernel, k, rng)]
    every = [(run.sums.ncut(), run.labels) for run in runs]
    return min(every, key=lambda pair: pair[0]), every


def audit(args):
    """Whether the objective or the starts fail, graph by graph: on each shape set the true
    labels refined (Lloyd and Hartigan) on the graph, against the default starts refined
    over ``--draws`` random states. 'objective wrong': the lowest cut found, the truth's
    included, is at ARI < 0.9; 'draw 0 < .95': the lowest cut of the first draw's starts (one
    graph fit, before the default's later steps) is at ARI < 0.95; 'mutual → knn 20': the
    lowest cut of the mutual graph's starts (first draw), refined on the 20-neighbour graph."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    from kkmeans_cli.engine.graph import GraphKernel, refine

    print(f"load average {os.getloadavg()[0]:.2f}; seeds {args.seeds[0]}–{args.seeds[-1]}, "
          f"{args.draws} draws of the starts, one thread")
    print("| set | graph | objective wrong | draw 0 < .95 | mean ARI, draw 0 |")
    print("|---|---|---|---|---|")
    for name, noise, n in AUDIT_CELLS:
        k = K_OF[name]
        tally = {v: [[], [], []] for v in args.graphs + ["mutual 30 → knn 20"]}
        for seed in args.seeds:
            X, y = gallery_data(name, seed, noise, n)
            kept = {}
            for variant in args.graphs:
                A, node_of = audit_graph(X, variant)
                kernel = GraphKernel(A)
                truth = np.empty(n, dtype=np.int32)
                truth[node_of] = y
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t = refine(kernel, truth, k)
                    draws = [lowest_start(kernel, k, np.random.default_rng(r))
                             for r in range(args.draws)]
                every = [(t.sums.ncut(), t.labels)] + [p for _, e in draws for p in e]
                wrong, first = tally[variant], draws[0][0][1]
                if ari(truth, min(every, key=lambda pair: pair[0])[1]) < 0.9:
                    wrong[0].append(seed)
                wrong[2].append(ari(truth, first))
                if wrong[2][-1] < 0.95:
                    wrong[1].append(seed)
                kept[variant] = (kernel, node_of, first)
            if "knn 20" in kept and "mutual 30" in kept:
                kernel, node_of, _ = kept["knn 20"]
                chosen = kept["mutual 30"][2]       # nodes = points
                start = np.empty(n, dtype=np.int32)
                start[node_of] = chosen
                polished = refine(kernel, start, k).labels[node_of]
                score = ari(y, polished)
                row = tally["mutual 30 → knn 20"]
                row[2].append(score)
                if score < 0.95:
                    row[1].append(seed)
        for variant, (wrong, low, scores) in tally.items():
            if not scores:
                continue
            cell = "–" if "→" in variant else f"{len(wrong)} {wrong[:6]}"
            print(f"| {name} {noise} n={n} | {variant} | {cell} | {len(low)} {low[:6]} | "
                  f"{np.mean(scores):.3f} |", flush=True)
    if args.blob_seeds:
        audit_blobs(args.blob_seeds)


def audit_blobs(seeds):
    """The blob families with random centres: one graph fit's first draw (the lowest cut of
    the default starts) on the 20-neighbour graph, against the mutual 30-neighbour graph's
    refined on it (``audit``), before the default's later steps."""
    from sklearn.metrics import adjusted_rand_score as ari

    from kkmeans_cli.engine.graph import GraphKernel, refine

    print("| blobs | sets | knn 20 mean ARI | mutual 30 → knn 20 | ±0.02: up, down |")
    print("|---|---|---|---|---|")
    rows = {}
    for name, seed, X, y, k in blob_sets(seeds):
        n = X.shape[0]
        A, node_of = audit_graph(X, "knn 20")
        kernel = GraphKernel(A)
        (_, first), _ = lowest_start(kernel, k, np.random.default_rng(0))
        M, _ = audit_graph(X, "mutual 30")
        (_, chosen), _ = lowest_start(GraphKernel(M), k, np.random.default_rng(0))
        start = np.empty(n, dtype=np.int32)
        start[node_of] = chosen
        polished = refine(kernel, start, k).labels
        rows.setdefault(name, []).append((ari(y, first[node_of]), ari(y, polished[node_of]),
                                          seed))
    for name, got in rows.items():
        a, b, _ = np.array(got).T
        up = [int(s) for x, z, s in got if z > x + 0.02]
        down = [int(s) for x, z, s in got if z < x - 0.02]
        print(f"| {name} | {len(got)} | {a.mean():.3f} | {b.mean():.3f} | {len(up)} {up[:8]}, "
              f"{len(down)} {down[:8]} |", flush=True)


def knn(args):
    """The exact search (scikit-learn's chunked search above 1,024 queries), the blocked one
    it replaced there, and pynndescent's approximate one (if installed): the default graph's
    21 neighbours of each point (itself included) on clustered data, best of ``--repeats``
    (scikit-learn imported before); numba's compilation is timed apart, on a small set
    first."""
    import sklearn.neighbors  # noqa: F401  (imported before the timings)

    from kkmeans_cli.kernels.graph import exact_nearest

    k = 21
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=4.0, size=(20, args.d))
    X = centres[rng.integers(0, 20, args.n)] + rng.normal(size=(args.n, args.d))
    print(f"n={args.n} d={args.d} k={k}, {args.threads} threads, load average "
          f"{os.getloadavg()[0]:.2f}")
    found = {}
    for name, search in (("exact (scikit-learn's chunks)", exact_nearest),
                         ("exact blocked", blocked_nearest)):
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            _, found[name] = search(X, X, k, args.threads, self_first=True)
            times.append(time.perf_counter() - t0)
        print(f"{name}: {min(times):.2f} s (of {', '.join(f'{t:.2f}' for t in times)})",
              flush=True)
    exact = found["exact (scikit-learn's chunks)"]
    same = np.mean(exact == found["exact blocked"])
    print(f"the same neighbour in the same place: {same:.6f}; peak RSS "
          f"{peak_rss_bytes() / 1e9:.2f} GB")
    try:
        from pynndescent import NNDescent
    except ImportError:
        print("pynndescent not installed")
        return
    t0 = time.perf_counter()
    NNDescent(X[:2000], n_neighbors=k, random_state=0, n_jobs=args.threads).neighbor_graph
    print(f"pynndescent compilation (2,000 points): {time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    idx, _ = NNDescent(X, n_neighbors=k, random_state=0, n_jobs=args.threads).neighbor_graph
    seconds = time.perf_counter() - t0
    recall = np.mean([len(set(a) & set(b)) / k for a, b in zip(idx, exact)])
    print(f"pynndescent: {seconds:.2f} s, recall {recall:.4f}, peak RSS "
          f"{peak_rss_bytes() / 1e9:.2f} GB")


def blocked_nearest(points, queries, k, n_threads=1, self_first=False):
    """kkmeans' exact search as it was before scikit-learn's chunked search
    (``kernels.graph.exact_nearest``): ‖x‖² + ‖y‖² − 2x·y by one BLAS product a block of
    ``SEARCH_BLOCK_BYTES``, the k smallest of each row by a partition. ``knn`` compares the
    two; ``high_dim_data`` makes its upsampled digits by it (its choice among equally
    distant digits made those data)."""
    from kkmeans_cli.engine.threads import blas_threads
    from kkmeans_cli.kernels.graph import SEARCH_BLOCK_BYTES, _order, shifted

    m, q = points.shape[0], queries.shape[0]
    P, Q = shifted(points, queries)
    pn = np.einsum("ij,ij->i", P, P)
    rows = max(1, SEARCH_BLOCK_BYTES // (8 * max(m, 1)))
    dist = np.empty((q, k))
    idx = np.empty((q, k), dtype=np.int64)
    with blas_threads(n_threads):
        for r0 in range(0, q, rows):
            r1 = min(q, r0 + rows)
            block = queries[r0:r1]
            D2 = pn[None, :] - 2.0 * (Q[r0:r1] @ P.T)
            D2 += np.einsum("ij,ij->i", Q[r0:r1], Q[r0:r1])[:, None]
            if self_first:
                D2[np.arange(r1 - r0), np.arange(r0, r1)] = -np.inf
            part = np.argpartition(D2, k - 1, axis=1)[:, :k] if k < m else \
                np.broadcast_to(np.arange(m), (r1 - r0, m)).copy()
            exact = np.sqrt(((block[:, None, :] - points[part]) ** 2).sum(-1))
            order = _order(exact, part)
            dist[r0:r1] = np.take_along_axis(exact, order, 1)
            idx[r0:r1] = np.take_along_axis(part, order, 1)
    return dist, idx


def high_dim_data(name, n, seed=0):
    """(X, y, k) of the high-dimensional fits: 'digits', scikit-learn's 1,797 handwritten
    digits (8×8 = 64 pixels, 0–16) upsampled to n rows: row i is digit a = i mod 1797 moved
    towards one of its 10 nearest other digits b (any class) by t ~ U(0, ½), plus a normal
    jitter of standard deviation ½, labelled as a (k = 10); 'blobs', 20 normal clusters (unit
    variance) around centres drawn with standard deviation 4, in 64 dimensions (k = 20).
    (Copies jittered by a normal alone make every point's neighbours its own digit's copies:
    at 20,000 rows 11 copies a digit nearly fill the 20 neighbours, and the graph falls apart
    into a component per digit.)"""
    rng = np.random.default_rng(seed)
    if name == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        D = digits.data.astype(np.float64)
        # the blocked search, whose choice among equally distant digits made these data
        _, near = blocked_nearest(D, D, 11, 1, self_first=True)
        a = np.arange(n) % D.shape[0]
        b = near[a, rng.integers(1, 11, n)]
        t = rng.uniform(0.0, 0.5, (n, 1))
        X = D[a] + t * (D[b] - D[a]) + rng.normal(scale=0.5, size=(n, 64))
        return X, digits.target[a], 10
    centres = rng.normal(scale=4.0, size=(20, 64))
    y = rng.integers(0, 20, n)
    return centres[y] + rng.normal(size=(n, 64)), y, 20


def ann_child(name, n, route, threads, out):
    """One graph fit (the default graph, ``fit_graph`` with only k) through ``route`` in this
    process: seconds of the graph and of the whole fit, numba's compilation on 2,000 points
    first (approximate only), ARI against the labels, ncut; the neighbour lists saved to
    ``out`` (.npy) for the recall."""
    from sklearn.metrics import adjusted_rand_score

    from kkmeans_cli.kernels import graph as kgraph
    from kkmeans_cli.kernels.graph_fit import fit_graph

    X, y, k = high_dim_data(name, n)
    compile_s = 0.0
    if route == "approximate":
        t0 = time.perf_counter()
        kgraph.approximate_nearest(X[:2000], 21, threads, 0)
        compile_s = time.perf_counter() - t0
    lists = {}
    search = kgraph.self_neighbours

    def kept(points, kk, n_threads=1, route=None, random_state=0):
        t = time.perf_counter()
        order, dist, idx = search(points, kk, n_threads, route, random_state)
        lists["seconds"] = time.perf_counter() - t
        lists["idx"] = idx
        return order, dist, idx

    kgraph.self_neighbours = kept
    t0 = time.perf_counter()
    res = fit_graph(X, k, random_state=0, n_threads=threads, neighbor_search=route)
    seconds = time.perf_counter() - t0
    np.save(out, lists["idx"])
    return dict(seconds=seconds, search_seconds=lists["seconds"], compile=compile_s,
                ari=adjusted_rand_score(y, res.labels), ncut=res.ncut, start=res.start,
                search=res.graph.info.search, rss=peak_rss_bytes(),
                load=os.getloadavg()[0])


def ann(args):
    """Graph fits of high-dimensional data with clusters, exact against approximate
    neighbour search, each fit in its own process (``--repeats``, median; the recall of the
    approximate lists against the exact ones of the same run); then numba's compilation of
    pynndescent in a fresh process with an empty ``NUMBA_CACHE_DIR`` and again with that
    cache filled."""
    import tempfile

    def child(name, n, route, env=None):
        out = os.path.join(tmp, f"{name}-{n}-{route}.npy")
        cmd = [sys.executable, os.path.abspath(__file__), "--ann-child", name, str(n), route,
               str(args.threads), out]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode:
            raise RuntimeError(proc.stderr)
        return json.loads(proc.stdout.strip().splitlines()[-1]), out

    print(f"{args.threads} threads, load average {os.getloadavg()[0]:.2f}; the default graph "
          f"(21 neighbours counting the point itself), fit_graph with only k; median of "
          f"{args.repeats} processes")
    print("| data | n | search | graph s | fit s (all) | compile s | ARI | ncut | recall | "
          "peak RSS | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.data if not args.compile_only else ():
            for n in args.n:
                runs, recall = {}, []
                for _ in range(args.repeats):
                    for route in ("exact", "approximate"):
                        r, out = child(name, n, route)
                        runs.setdefault(route, []).append(r)
                    a, b = (np.load(os.path.join(tmp, f"{name}-{n}-{route}.npy"))
                            for route in ("exact", "approximate"))
                    recall.append(np.mean([len(set(u) & set(v)) / a.shape[1]
                                           for u, v in zip(a, b)]))
                for route, rs in runs.items():
                    med = {key: float(np.median([r[key] for r in rs])) for key in
                           ("search_seconds", "seconds", "compile", "ari", "ncut", "rss",
                            "load")}
                    rec = f"{np.median(recall):.4f}" if route == "approximate" else "1"
                    print(f"| {name} | {n:,} | {route} | {med['search_seconds']:.2f} | "
                          f"{med['seconds']:.2f} | {med['compile']:.1f} | "
                          f"{med['ari']:.4f} (min {min(r['ari'] for r in rs):.4f}) | "
                          f"{med['ncut']:.5f} | {rec} | {med['rss'] / 1e9:.2f} GB | "
                          f"{med['load']:.2f} |", flush=True)
        cache = os.path.join(tmp, "numba-cache")
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for when in ("cold (empty cache)", "warm (cache filled)", "warm again"):
            r, _ = child("blobs", 20_000, "approximate", env)
            print(f"numba {when}: compilation on 2,000 points {r['compile']:.1f} s, graph "
                  f"of 20,000 × 64 {r['search_seconds']:.2f} s", flush=True)


def ann_states(args):
    """How much of a difference between the two searches is the fit's own spread: one graph
    per search (built once, its seconds shown), then the fit on it from ``--states`` random
    states (``fit_on_graph``, no new search): ARI and ncut, mean (min–max). In one process:
    the approximate search's compilation is left out of its seconds."""
    from sklearn.metrics import adjusted_rand_score

    from kkmeans_cli.kernels.graph_fit import build_graph, fit_on_graph

    print(f"{args.threads} threads, load average {os.getloadavg()[0]:.2f}; random states "
          f"{args.states}")
    print("| data | n | search | graph s | ARI mean (min–max) | ncut mean (min–max) |")
    print("|---|---|---|---|---|---|")
    for name in args.data:
        for n in args.n:
            X, y, k = high_dim_data(name, n)
            for route in ("exact", "approximate"):
                if route == "approximate":
                    build_graph(X[:2000], k, None, None, "connectivity", args.threads,
                                route, 0)                 # numba's compilation
                t0 = time.perf_counter()
                graph = build_graph(X, k, None, None, "connectivity", args.threads, route, 0)
                seconds = time.perf_counter() - t0
                aris, ncuts = [], []
                for state in args.states:
                    res = fit_on_graph(graph, k, rng=np.random.default_rng(state),
                                       n_threads=args.threads)
                    aris.append(adjusted_rand_score(y, res.labels))
                    ncuts.append(res.ncut)
                print(f"| {name} | {n:,} | {graph.info.search} | {seconds:.2f} | "
                      f"{np.mean(aris):.4f} ({min(aris):.4f}–{max(aris):.4f}) | "
                      f"{np.mean(ncuts):.5f} ({min(ncuts):.5f}–{max(ncuts):.5f}) |",
                      flush=True)


def blob_sets(seeds):
    """(name, seed, X, y, k) of the blob families with random centres, seed by seed."""
    for name in ("varied", "aniso", "blobs"):
        for seed in seeds:
            X, y = gallery_data(name, seed)
            yield name, seed, X, y, K_OF[name]


def blob_bar(X, y, k, seed):
    """A blob set's bar: the better ARI of SpectralClustering and rbf (``random_state`` =
    ``seed``), less 0.02."""
    from sklearn.metrics import adjusted_rand_score as ari

    return max(ari(y, method_labels("spectral", X, k, seed)),
               ari(y, method_labels("rbf", X, k, seed))) - 0.02


WHITEN_MODES = {"graph": False, "whitened": True, "auto": "auto"}


def whitened_labels(X, k, seed, mode="whitened"):
    """The graph fit with ``whiten`` False ('graph'), True ('whitened': the first fit, then
    the fit again on X whitened by the pooled within-cluster covariance of its clusters,
    ``kernels.graph_fit.within_whitening``) or 'auto' (that refit kept only where it lowers
    ``kernels.graph_fit.classification_criterion``)."""
    from kkmeans_cli.kernels.graph_fit import fit_graph

    return fit_graph(X, k, random_state=seed, n_threads=1, whiten=WHITEN_MODES[mode]).labels


def whiten(args):
    """The graph fit with whiten False, True and 'auto', seed by seed: the blob families'
    misses of max(SpectralClustering, rbf) − 0.02, the shapes' worst ARI, the gallery's own
    three and the real sets' mean."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    print(f"load average {os.getloadavg()[0]:.2f}; blob seeds {args.seeds}, shape seeds "
          f"{args.shape_seeds}, real seeds {args.real_seeds}; n = 1500, one thread")
    modes = list(WHITEN_MODES)
    misses = {m: [] for m in modes}
    for name, seed, X, y, k in blob_sets(args.seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = {m: ari(y, whitened_labels(X, k, seed, m)) for m in modes}
            need = blob_bar(X, y, k, seed)
        for m in modes:
            if a[m] < need:
                misses[m].append(f"{name} {seed}")
        print(f"{name} {seed}: " + " ".join(f"{m} {a[m]:.3f}" for m in modes)
              + f" need {need:.3f}", flush=True)
    for m, missed in misses.items():
        print(f"{m}: {len(missed)} misses ({', '.join(missed) or 'none'})")
    for name, noise in gallery_cells():
        if noise is None:
            X, y = gallery_data(name, None)
            print(f"{name} (gallery's own): " + " ".join(
                f"{m} {ari(y, whitened_labels(X, K_OF[name], 0, m)):.3f}" for m in modes[1:]),
                flush=True)
            continue
        sets = [gallery_data(name, seed, noise) for seed in args.shape_seeds]
        print(f"{name} {noise}: worst " + " ".join(
            f"{m} {min(ari(y, whitened_labels(X, K_OF[name], seed, m)) for seed, (X, y) in zip(args.shape_seeds, sets)):.3f}"
            for m in modes[1:]), flush=True)
    means = {m: [] for m in modes}
    for name, X, y, k in real_data():
        for m in modes:
            means[m].append(np.mean([ari(y, whitened_labels(X, k, s, m))
                                     for s in args.real_seeds]))
        print(f"{name}: " + " ".join(f"{m} {means[m][-1]:.3f}" for m in modes), flush=True)
    print("real mean of 8: " + " ".join(f"{m} {np.mean(means[m]):.3f}" for m in modes))


#: (name, noise, n) of ``harder``: shapes past the gallery's targets (noisier, or fewer points)
HARDER_CELLS = (("moons", 0.12, 1500), ("moons", 0.15, 1500), ("moons", 0.2, 1500),
                ("moons", 0.1, 300), ("moons", 0.15, 300), ("circles", 0.1, 500),
                ("circles", 0.12, 1500), ("rings", 0.07, 1500))


def harder(args):
    """Shapes past the gallery's targets, seed by seed: the default against one fit of the
    points as given (``whiten=False``: no refit, Gaussian step, mixture or split test),
    SpectralClustering and rbf; mean ARI (min), and how often the split test undid the
    steps after the first fit."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    from kkmeans_cli.kernels.graph_fit import fit_graph

    print(f"load average {os.getloadavg()[0]:.2f}; seeds {args.seeds}, one thread; "
          f"mean ARI (min)")
    print("| data | noise | n | default | one fit | SpectralClustering(nn) | rbf | "
          "steps undone |")
    print("|---|---|---|---|---|---|---|---|")
    for name, noise, n in HARDER_CELLS:
        got = {m: [] for m in ("default", "one fit", "spectral", "rbf")}
        undone = 0
        for seed in args.seeds:
            X, y = gallery_data(name, seed, noise, n=n)
            k = K_OF[name]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = fit_graph(X, k, random_state=seed, n_threads=1)
                got["default"].append(ari(y, fit.labels))
                got["one fit"].append(ari(y, fit_graph(X, k, random_state=seed, n_threads=1,
                                                      whiten=False).labels))
                for m in ("spectral", "rbf"):
                    got[m].append(ari(y, method_labels(m, X, k, seed)))
            undone += (fit.split_test or {}).get("kept") is False
        cells = " | ".join(f"{np.mean(v):.3f} ({np.min(v):.3f})" for v in got.values())
        print(f"| {name} | {noise} | {n} | {cells} | {undone} of {len(args.seeds)} |",
              flush=True)


def blob_grid(k, per, std, seed):
    """k round blobs of ``per`` points (s.d. ``std``) centred on a √k × √k grid of unit step."""
    side = int(round(np.sqrt(k)))
    centres = np.array([(i, j) for i in range(side) for j in range(side)], dtype=float)
    y = np.repeat(np.arange(k), per)
    return centres[y] + std * np.random.default_rng(seed).standard_normal((k * per, 2)), y


def moon_pairs(pairs, per, noise, seed, columns=4):
    """``pairs`` pairs of moons (``per`` points each moon) side by side, 2·pairs clusters."""
    from sklearn.datasets import make_moons

    Xs, ys = [], []
    for p in range(pairs):
        X, y = make_moons(2 * per, noise=noise, random_state=seed + p)
        Xs.append(X + [3.5 * (p % columns), 2.5 * (p // columns)])
        ys.append(y + 2 * p)
    return np.vstack(Xs), np.concatenate(ys)


def large_k_sets(seeds):
    """(name, X, y, k) of the large-k benchmark: grids of touching blobs (k = 25–100),
    stacked moons (k = 20, 40), blobs in 2, 5 and 10 dimensions (k = 20–50), digits cut into
    more clusters than its classes (k = 20–40), and 20,000 blobs of k = 50."""
    from sklearn.datasets import load_digits, make_blobs
    from sklearn.preprocessing import StandardScaler

    digits = load_digits()
    sets = [("digits, k = 20", digits.data, digits.target, 20),
            ("digits standardized, k = 30", StandardScaler().fit_transform(digits.data),
             digits.target, 30),
            ("digits, k = 40", digits.data, digits.target, 40)]
    for seed in seeds:
        sets += [(f"grid of 25 (.2) s{seed}", *blob_grid(25, 60, 0.2, seed), 25),
                 (f"grid of 36 (.25) s{seed}", *blob_grid(36, 50, 0.25, seed), 36),
                 (f"grid of 49 (.2) s{seed}", *blob_grid(49, 50, 0.2, seed), 49),
                 (f"grid of 64 (.15) s{seed}", *blob_grid(64, 40, 0.15, seed), 64),
                 (f"grid of 100 (.2) s{seed}", *blob_grid(100, 40, 0.2, seed), 100),
                 (f"moons, k = 20 s{seed}", *moon_pairs(10, 150, 0.1, seed), 20),
                 (f"moons, k = 40 s{seed}", *moon_pairs(20, 100, 0.1, seed, columns=5), 40),
                 (f"2-D blobs, k = 30 s{seed}", *make_blobs(3000, centers=30,
                                                           center_box=(-30, 30),
                                                           random_state=seed), 30),
                 (f"2-D blobs, k = 50 s{seed}", *make_blobs(3000, centers=50,
                                                           center_box=(-40, 40),
                                                           random_state=seed), 50),
                 (f"5-D blobs, k = 20 s{seed}", *make_blobs(3000, n_features=5, centers=20,
                                                           center_box=(-6, 6),
                                                           random_state=seed), 20),
                 (f"10-D blobs, k = 50 s{seed}", *make_blobs(4000, n_features=10, centers=50,
                                                            random_state=seed), 50)]
    return sets + [("20,000 2-D blobs, k = 50", *make_blobs(20000, centers=50,
                                                            center_box=(-40, 40),
                                                            random_state=0), 50)]


def timed_spectral(X, k):
    """(seconds, labels) of SpectralClustering(nearest_neighbors) with ``method_labels``'
    settings and random_state 0, its warnings silenced."""
    import warnings

    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        labels = method_labels("spectral", X, k, 0)
    return time.perf_counter() - t, labels


def large_k(args):
    """The default starts at large k: split into 2k pieces and the other multiples only up to
    ``PIECES_MAX`` pieces (now) against the rule before (2k, 3k, 4k and 6k at every k, 10k up
    to 100 pieces), both in this process, one thread, and SpectralClustering(nearest_neighbors)
    beside them: seconds, ARI and the normalized cut of the graph each fit returns (the
    whitened one where a rule keeps the refit: compare cuts only where both kept the same
    steps), set by set."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    from kkmeans_cli.engine import graph_starts
    from kkmeans_cli.kernels.graph_fit import fit_graph

    now = graph_starts.oversegment_multiples

    def before(k):
        return (2, 3, 4, 6) + ((10,) if 10 * k <= 100 else ())

    print(f"load average {os.getloadavg()[0]:.2f}; one thread")
    print("| data | n | k | seconds: now / before / SC | ARI: now / before / SC | ncut: now / "
          "before |")
    print("|---|---|---|---|---|---|")
    total = np.zeros(3)
    for name, X, y, k in large_k_sets(args.seeds):
        row = []
        for rule in (now, before):
            graph_starts.oversegment_multiples = rule
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t = time.perf_counter()
                    fit = fit_graph(X, k, random_state=0, n_threads=1)
                    row.append((time.perf_counter() - t, ari(y, fit.labels), fit.ncut))
            finally:
                graph_starts.oversegment_multiples = now
        seconds, sc = timed_spectral(X, k)
        row.append((seconds, ari(y, sc), np.nan))
        total += [r[0] for r in row]
        print(f"| {name} | {len(X)} | {k} | {' / '.join(f'{r[0]:.1f}' for r in row)} | "
              f"{' / '.join(f'{r[1]:.4f}' for r in row)} | {row[0][2]:.4f} / {row[1][2]:.4f} "
              f"|", flush=True)
    print(f"| all | | | {' / '.join(f'{t:.0f}' for t in total)} | | |")


def em(args):
    """The EM passes of the Gaussian mixtures summed in C (``engine._mixture``, the default
    in up to ``MIXTURE_COMPILED_MAX_DIM`` coordinates) against NumPy's products (the route
    above it, forced everywhere), both in this process, one thread, the fastest of
    ``--repeats``: the whole default fit's seconds on the sets of ``large-k`` and the real
    sets (whose 4–64 columns take either route), whether the labels are the same, and
    SpectralClustering(nearest_neighbors) beside them."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    from kkmeans_cli.kernels import graph_fit

    compiled = graph_fit.MIXTURE_COMPILED_MAX_DIM
    print(f"load average {os.getloadavg()[0]:.2f}; one thread, the fastest of {args.repeats}")
    print("| data | n | k | seconds: C / NumPy / SC | labels | ARI: default / SC |")
    print("|---|---|---|---|---|---|")
    total = np.zeros(3)
    sets = large_k_sets(args.seeds) + [(name, X, y, k) for name, X, y, k in real_data()]
    for name, X, y, k in sets:
        times, labels = [], []
        for most in (compiled, 0):
            graph_fit.MIXTURE_COMPILED_MAX_DIM = most
            try:
                best = np.inf
                for _ in range(args.repeats):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        t = time.perf_counter()
                        fit = graph_fit.fit_graph(X, k, random_state=0, n_threads=1)
                        best = min(best, time.perf_counter() - t)
                times.append(best)
                labels.append(fit.labels)
            finally:
                graph_fit.MIXTURE_COMPILED_MAX_DIM = compiled
        seconds, sc = timed_spectral(X, k)
        times.append(seconds)
        total += times
        same = "same" if np.array_equal(*labels) else "DIFFER"
        print(f"| {name} | {len(X)} | {k} | {' / '.join(f'{t:.2f}' for t in times)} | {same} "
              f"| {ari(y, labels[0]):.4f} / {ari(y, sc):.4f} |", flush=True)
    print(f"| all | | | {' / '.join(f'{t:.1f}' for t in total)} | | |")


def noisy_blobs(n, k, d, kind, sep, aniso, unequal, seed):
    """k blobs of n points in d columns with noise of unit variance of ``kind`` ('gauss',
    't5', 't10' (Student's t), 'laplace', 'lognorm' (centred, standardized), 'unif',
    'outl' (2 % uniform outliers on [−8, 8])), centres uniform on ±sep·k^(1/d) (d < 3) or
    normal of scale sep/√2, optionally stretched (``aniso``) and of Dirichlet(2) sizes
    (``unequal``; at least 5 points each)."""
    rng = np.random.default_rng(seed)
    if d < 3:
        C = rng.uniform(-sep * k ** (1 / d), sep * k ** (1 / d), (k, d))
    else:
        C = rng.standard_normal((k, d)) * sep / np.sqrt(2)
    sizes = np.maximum(rng.multinomial(n, rng.dirichlet(np.ones(k) * 2) if unequal
                                       else np.ones(k) / k), 5)
    Xs, ys = [], []
    for c in range(k):
        m = sizes[c]
        if kind == "gauss":
            Z = rng.standard_normal((m, d))
        elif kind.startswith("t"):
            dof = float(kind[1:])
            Z = (rng.standard_normal((m, d)) / np.sqrt(rng.chisquare(dof, (m, 1)) / dof)
                 * np.sqrt((dof - 2) / dof))
        elif kind == "unif":
            Z = rng.uniform(-np.sqrt(3), np.sqrt(3), (m, d))
        elif kind == "lognorm":
            Z = np.exp(0.5 * rng.standard_normal((m, d)))
            Z = (Z - Z.mean(0)) / Z.std(0)
        elif kind == "outl":
            Z = rng.standard_normal((m, d))
            out = rng.random(m) < 0.02
            Z[out] = rng.uniform(-8, 8, (out.sum(), d))
        else:                                                   # laplace
            Z = rng.laplace(size=(m, d)) / np.sqrt(2)
        if aniso:
            Z = Z @ (rng.standard_normal((d, d)) / np.sqrt(d) + 0.3 * np.eye(d))
        Xs.append(Z + C[c])
        ys.append(np.full(m, c))
    X, y = np.vstack(Xs), np.concatenate(ys)
    order = rng.permutation(y.size)
    return X[order], y[order]


def limit_groups():
    """{group: [(name, X, y, k, random_state)]} of ``limits``: the 396 blob sets, the
    gallery's shapes (36 seeds), the harder shapes (12), the real sets (6 seeds each),
    grids of heavy-tailed and of Gaussian blobs and small shapes, and ``past_gallery``."""
    from sklearn.datasets import make_circles, make_moons
    from sklearn.preprocessing import StandardScaler

    groups = {"blob sets": [(f"{name} {seed}", X, y, k, seed)
                            for name, seed, X, y, k in blob_sets(range(132))]}
    groups["shapes (36 seeds)"] = [
        (f"{name} {noise} {seed}", *gallery_data(name, seed, noise), K_OF[name], seed)
        for name, noises in (("circles", NOISES), ("moons", NOISES), ("rings", RING_NOISES))
        for noise in noises for seed in range(36)]
    groups["harder (12 seeds)"] = [
        (f"{name} {noise} {n} {seed}", *gallery_data(name, seed, noise, n=n), K_OF[name],
         seed) for name, noise, n in HARDER_CELLS for seed in range(12)]
    groups["real (6 seeds)"] = [(f"{name} {seed}", X, y, k, seed)
                                for name, X, y, k in real_data() for seed in range(6)]
    for group, kinds, seed0 in (("heavy tails, 5,000 points", ("t10", "laplace", "t5",
                                                                "lognorm", "unif", "outl"), 7),
                                ("Gaussian blobs", ("gauss",), 8)):
        rng, cases = np.random.default_rng(seed0), []
        for i in range(24):
            k, d = int(rng.integers(3, 9)), int(rng.integers(2, 6 if seed0 == 7 else 8))
            n = 5000 if seed0 == 7 else int(rng.choice([300, 1500, 5000]))
            kind = kinds[i % len(kinds)]
            X, y = noisy_blobs(n, k, d, kind, float(rng.uniform(1.5, 4)), bool(i % 2),
                               bool(i % 3 == 0), int(rng.integers(1e6)))
            cases.append((f"{kind} k{k} d{d} n{n} {i}", X, y, k, 0))
        groups[group] = cases
    small = []
    for seed in range(6):
        X, y = rings(400, 0.05, seed)
        small.append((f"rings 400 .05 {seed}", StandardScaler().fit_transform(X), y, 3, 0))
        small.append((f"circles 500 .08 {seed}",
                      *make_circles(500, factor=0.5, noise=0.08, random_state=seed), 2, 0))
        small.append((f"moons 300 .1 {seed}", *make_moons(300, noise=0.1, random_state=seed),
                      2, 0))
        X, y = make_moons(1500, noise=0.1, random_state=seed)
        X = np.c_[X, 0.3 * np.random.default_rng(seed).standard_normal((1500, 8))]
        small.append((f"moons + 8 noise columns {seed}", X, y, 2, 0))
    groups["small shapes"] = small
    groups["past the gallery (216)"] = past_gallery()
    return groups


def past_gallery():
    """[(name, X, y, k, random_state)] of ``limit_groups``' sets past the gallery, as hostile
    testers drew them: three rings of 400–900 points (.03, .05; 12 seeds), moons of 300–5,000
    points (.15–.25; 6 seeds), and 12 seeds each of five anisotropic blobs, four blobs among 7 %
    uniform outliers (their own class), blobs of 100, 400 and 1,000 points and 15 blobs."""
    from sklearn import datasets

    cases = []
    for n in (400, 500, 600, 900):
        for noise in (0.03, 0.05):
            cases += [(f"rings {n} {noise} {seed}", *rings(n, noise, seed), 3, seed)
                      for seed in range(12)]
    for n in (300, 400, 1500, 5000):
        for noise in (0.15, 0.2, 0.25):
            cases += [(f"moons {n} {noise} {seed}",
                       *datasets.make_moons(n, noise=noise, random_state=seed), 2, seed)
                      for seed in range(6)]
    for seed in range(12):
        rng = np.random.default_rng(seed)
        X, y = datasets.make_blobs(1500, centers=5, random_state=seed)
        cases.append((f"aniso k5 {seed}", X @ rng.normal(size=(2, 2)), y, 5, seed))
        cases.append((f"blobs + outliers {seed}", *blobs_among_outliers(seed, 0.07, rng), 4,
                      seed))
        cases.append((f"unequal {seed}", *datasets.make_blobs([100, 400, 1000],
                                                              random_state=seed), 3, seed))
        cases.append((f"15 blobs {seed}", *datasets.make_blobs(3000, centers=15,
                                                               random_state=seed), 15, seed))
    return cases


def limits(args):
    """The default with each of ``--settings`` of the mixture step,
    LIMIT:NOISE[:CAP[:COVARIANCE]]: its cut limit (``MIXTURE_NCUT_RATIO``), its uniform
    component's starting weight (``MIXTURE_NOISE``; 0: none), the largest weight that
    component may reach (``MIXTURE_NOISE_MAX``; the library's when left out or empty) and
    its covariance (``bic``, the library's: a covariance per component or one shared,
    whichever ``covariance_choice`` takes; ``full``: a covariance per component only, the
    split test as the library has it), set by set (``compare_settings``)
    on ``limit_groups`` and, with ``--more``, ``more_groups``; ``--groups``: only the groups
    whose names start with one of these."""
    from kkmeans_cli.kernels import graph_fit

    cap, choice = graph_fit.MIXTURE_NOISE_MAX, graph_fit.covariance_choice
    choices = {"bic": choice,
               "full": lambda full, tied, n, k: (full is None, float("nan"))}

    def parsed(setting):
        fields = setting.split(":")
        covariance = fields.pop() if len(fields) == 4 else "bic"
        try:
            parts = [float(part) if part else cap for part in fields]
        except ValueError:
            parts = []
        if not 1 <= len(parts) <= 3 or (len(parts) > 1 and not 0.0 <= parts[1] < 1.0) or \
                covariance not in choices:
            raise SystemExit(f"--settings: {setting!r} is not LIMIT:NOISE[:CAP[:COVARIANCE]] "
                             f"with NOISE in [0, 1) and COVARIANCE bic or full")
        return (parts[0], parts[1] if len(parts) > 1 else 0.0,
                parts[2] if len(parts) > 2 else cap, choices[covariance])

    settings = {setting: parsed(setting) for setting in args.settings}

    def apply(setting):
        (graph_fit.MIXTURE_NCUT_RATIO, graph_fit.MIXTURE_NOISE,
         graph_fit.MIXTURE_NOISE_MAX, graph_fit.covariance_choice) = settings[setting]

    groups = limit_groups() | (more_groups() if args.more else {})
    if args.groups:
        groups = {name: cases for name, cases in groups.items()
                  if name.startswith(tuple(args.groups))}
        if not groups:
            raise SystemExit(f"--groups: no group's name starts with {args.groups} (the "
                             f"groups past the gallery's need --more)")
    print(f"load average {os.getloadavg()[0]:.2f}; settings {args.settings}, one thread")
    compare_settings(groups, args.settings, apply)


def more_groups():
    """{group: [(name, X, y, k, random_state)]}: the blob sets of seeds 132–179 (never used to
    choose a setting), four blobs among 3, 7 and 12 % points drawn uniformly over their box
    (their own class; 48 seeds each), and ``shape_sizes``."""
    groups = {"blob sets, seeds 132–179": [(f"{name} {seed}", X, y, k, seed)
                                           for name, seed, X, y, k in blob_sets(range(132, 180))]}
    for share in (0.03, 0.07, 0.12):
        groups[f"blobs among {share:.0%} uniform outliers (48 seeds)"] = [
            (f"outliers {share} {seed}",
             *blobs_among_outliers(seed, share, np.random.default_rng(seed)), 4, seed)
            for seed in range(48)]
    return groups | shape_sizes()


def blobs_among_outliers(seed, share, rng):
    """(X, y): four make_blobs clusters of 1,500 points (``random_state`` seed) and
    ``share`` × 1,500 points drawn by ``rng`` uniformly over their box, labelled 4."""
    from sklearn import datasets

    X, y = datasets.make_blobs(1500, centers=4, random_state=seed)
    m = int(share * 1500)
    X = np.vstack([X, rng.uniform(X.min(axis=0), X.max(axis=0), (m, 2))])
    return X, np.r_[y, np.full(m, 4)]


def shape_sizes():
    """{group: [(name, X, y, k, random_state)]}: noisy circles (.1) and three rings (.05) of
    500, 1000 and 2000 points, 36 random states each."""
    groups = {}
    for name, noise, k in (("circles", 0.1, 2), ("rings", 0.05, 3)):
        for n in (500, 1000, 2000):
            groups[f"{name} ({noise}), {n} points (36 seeds)"] = [
                (f"{name} {noise} {n} {seed}", *gallery_data(name, seed, noise, n=n), k, seed)
                for seed in range(36)]
    return groups


def neighbors(args):
    """The default with ``DEFAULT_NEIGHBORS`` (other points in a neighbourhood) at each of
    ``--values``, set by set (``compare_settings``) on ``limit_groups`` and on noisy circles
    (.1) and three rings (.05) of 500, 1000 and 2000 points, 36 random states each."""
    from kkmeans_cli.kernels import graph as kgraph

    def apply(value):
        kgraph.DEFAULT_NEIGHBORS = int(value)

    groups = limit_groups() | shape_sizes()
    print(f"load average {os.getloadavg()[0]:.2f}; other neighbours {args.values}, one thread")
    compare_settings(groups, args.values, apply)


def compare_settings(groups, values, apply):
    """The default (one thread, ``random_state`` the set's) after ``apply(value)`` for each
    of ``values``, set by set: per group the mean ARI, the sets that change against the first
    value (up, down, by how much in all), the shapes below ARI 0.95, and on the blob sets
    those below their bar, max(SpectralClustering, rbf) − .02."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    for group, cases in groups.items():
        got = {value: [] for value in values}
        missed = {value: [] for value in values}
        shapes = group.startswith(("shapes", "circles", "rings"))
        need_shown = group.startswith("blob sets")
        for name, X, y, k, seed in cases:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                need = blob_bar(X, y, k, seed) if group.startswith("blob sets") else \
                    0.95 if shapes else None
                for value in values:
                    apply(value)
                    got[value].append(ari(y, fit_graph_labels(X, k, seed)))
                    if need is not None and got[value][-1] < need:
                        missed[value].append(f"{name} {got[value][-1]:.3f}")
        base = np.array(got[values[0]])
        cells = []
        for value in values:
            a = np.array(got[value])
            d = a - base
            below = "below the bar" if group.startswith("blob sets") else "below 0.95"
            cells.append(f"{value}: mean {a.mean():.3f}, {np.sum(d > 1e-12)} up "
                         f"({d[d > 0].sum():.3f}), {np.sum(d < -1e-12)} down "
                         f"({d[d < 0].sum():.3f})"
                         + (f", {below} {len(missed[value])} "
                            f"({', '.join(missed[value])})" if need_shown or shapes
                            else ""))
        print(f"{group} ({len(cases)} sets): " + "; ".join(cells), flush=True)


def fit_graph_labels(X, k, seed):
    from kkmeans_cli.kernels.graph_fit import fit_graph

    return fit_graph(X, k, random_state=seed, n_threads=1).labels


RESEED = 1000      # bars: the references run again with random_state seed + RESEED


def bars(args):
    """The blob families' bar, max(SpectralClustering, rbf) − 0.02 set by set (both with
    random_state = the data's seed), met by the default and by the references themselves run
    again with random_state = seed + ``RESEED``: how often a method misses a bar set by the
    better of two methods on one draw of their starts."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    print(f"load average {os.getloadavg()[0]:.2f}; blob seeds {args.seeds[0]}–"
          f"{args.seeds[-1]}, n = 1500, one thread; the references again with random_state "
          f"seed + {RESEED}")
    who = ("default", "spectral again", "rbf again")
    misses = {w: [] for w in who}
    sets = 0
    for name, seed, X, y, k in blob_sets(args.seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            need = blob_bar(X, y, k, seed)
            got = {"default": ari(y, method_labels("graph", X, k, seed)),
                   "spectral again": ari(y, method_labels("spectral", X, k,
                                                          seed + RESEED)),
                   "rbf again": ari(y, method_labels("rbf", X, k, seed + RESEED))}
        sets += 1
        for w in who:
            if got[w] < need:
                misses[w].append(f"{name} {seed}")
        print(f"{name} {seed}: need {need:.3f} " + " ".join(
            f"{w} {got[w]:.3f}" for w in who), flush=True)
    for w in who:
        print(f"{w}: below the bar on {len(misses[w])} of {sets} sets "
              f"({', '.join(misses[w]) or 'none'})")


def log_mean_density(X, points, sd):
    """ln of the mean over ``points`` of the density of N(point, sd²·I) at each row of X (up
    to a constant shared by every call with the same sd)."""
    from scipy.special import logsumexp

    d2 = ((X[:, None, :] - points[None, :, :]) ** 2).sum(axis=2)
    return logsumexp(-d2 / (2.0 * sd * sd), axis=1) - np.log(len(points))


def ring_log_density(X, radius, sd):
    """ln of the density at each row of X of a point at a uniform angle on a circle of
    ``radius`` plus N(0, sd²·I) noise: exp(−(r² + R²)/2sd²) I₀(rR/sd²)/(2π sd²), up to the
    constant −ln(2π sd²)."""
    from scipy.special import ive

    r = np.hypot(X[:, 0], X[:, 1])
    z = r * radius / sd ** 2
    return -(r - radius) ** 2 / (2.0 * sd ** 2) + np.log(ive(0, z))


def bayes_labels(name, seed, noise=0.05, n=1500):
    """(labels, y): each point of ``gallery_data(name, seed, noise, n)`` given to the
    component of highest density under the model that generated it, its parameters known
    (the Bayes classifier: no method that sees the points alone does better on average). The
    shares are equal (every generator splits n evenly, to a point); make_circles and make_moons
    place their points at evenly spaced angles, so each class is the mean of the noise's
    Gaussians at those places; the three rings draw uniform angles; make_blobs' centres come
    from the same draw (``return_centers``), the anisotropic map and the scaling are affine
    and change no class's order, so the blobs are classified before them."""
    from sklearn import datasets

    if name in ("varied", "aniso", "blobs"):
        sd = np.array(VARIED_STD) if name == "varied" else np.ones(3)
        state = GALLERY_STATES[name] if seed is None else seed
        X0, y, centres = datasets.make_blobs(
            n, cluster_std=list(sd) if name == "varied" else 1.0, random_state=state,
            return_centers=True)
        d2 = ((X0[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        return np.argmin(d2 / sd ** 2 + 2.0 * X0.shape[1] * np.log(sd), axis=1), y
    if name == "rings":
        X, y = rings(n, noise, seed)
        logp = np.column_stack([ring_log_density(X, r, noise) for r in RING_RADII])
        return np.argmax(logp, axis=1), y
    maker = datasets.make_circles if name == "circles" else datasets.make_moons
    X, y = maker(n, noise=noise, random_state=seed, **({"factor": 0.5}
                                                     if name == "circles" else {}))
    out, inn = n // 2, n - n // 2
    if name == "circles":
        a, b = (np.linspace(0, 2 * np.pi, m, endpoint=False) for m in (out, inn))
        places = (np.c_[np.cos(a), np.sin(a)], 0.5 * np.c_[np.cos(b), np.sin(b)])
    else:
        a, b = np.linspace(0, np.pi, out), np.linspace(0, np.pi, inn)
        places = (np.c_[np.cos(a), np.sin(a)], np.c_[1 - np.cos(b), 1 - np.sin(b) - 0.5])
    logp = np.column_stack([log_mean_density(X, p, noise) for p in places])
    return np.argmax(logp, axis=1), y


def bayes(args):
    """The default against the Bayes classifier (``bayes_labels``) set by set: the shapes at
    the gallery's noisier levels (seeds ``--shape-seeds``) and the blob families (``--seeds``),
    with the blob families' bar, max(SpectralClustering, rbf) − 0.02 (``--seeds`` with no
    seed: the shapes alone). ``--draws`` N: then the Bayes classifier alone on the shapes'
    draws 0 … N − 1 (no fit: seconds per thousand), how often even it falls below the target."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    print(f"load average {os.getloadavg()[0]:.2f}; n = 1500, one thread")
    shapes = [("circles", 0.1), ("circles", 0.08), ("moons", 0.1), ("rings", 0.05)]
    cells = [(name, noise, args.shape_seeds) for name, noise in shapes] + \
        [(name, None, args.seeds) for name in ("varied", "aniso", "blobs") if args.seeds]
    print("| set | sets | Bayes: mean ARI (min) | default: mean ARI (min) | default more than "
          "0.02 below Bayes | below the target or bar (default, Bayes) |")
    print("|---|---|---|---|---|---|")
    for name, noise, seeds in cells:
        rows, below = [], []
        for seed in seeds:
            X, y = gallery_data(name, seed, noise or 0.05)
            labels, truth = bayes_labels(name, seed, noise or 0.05)
            assert np.array_equal(truth, y)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = ari(y, fit_graph_labels(X, K_OF[name], seed))
                need = 0.95 if noise else blob_bar(X, y, K_OF[name], seed)
            rows.append((ari(y, labels), got))
            if got < need:
                below.append(f"{seed}: {got:.3f}, {rows[-1][0]:.3f} (bar {need:.3f})")
        a = np.array(rows)
        print(f"| {name}{f' ({noise})' if noise else ''} | {len(a)} | {a[:, 0].mean():.4f} "
              f"({a[:, 0].min():.3f}) | {a[:, 1].mean():.4f} ({a[:, 1].min():.3f}) | "
              f"{int(np.sum(a[:, 0] - a[:, 1] > 0.02))} | {'; '.join(below) or 'none'} |",
              flush=True)
    if not args.draws:
        return
    print(f"\nThe Bayes classifier alone, draws 0–{args.draws - 1} of each shape:")
    print("| set | draws | mean ARI | 5th percentile | least | below the target |")
    print("|---|---|---|---|---|---|")
    for name, noise in shapes:
        a = np.array([ari(*bayes_labels(name, seed, noise)) for seed in range(args.draws)])
        low = a < TARGETS[name]
        print(f"| {name} ({noise}) | {a.size} | {a.mean():.4f} | {np.percentile(a, 5):.3f} | "
              f"{a.min():.3f} | {int(low.sum())} ({low.mean():.2%}) |", flush=True)


def neighbour_vote(X, labels, k, m, scale, mode):
    """Each point given the label that its m nearest points (itself among them, or not: mode
    'loo') weigh most, with Gaussian weights exp(−d²/h²), h = ``scale`` × the median
    distance to the 7th neighbour (a density classifier trained on ``labels``); once, or
    until no label changes (mode 'fixed'). A point keeps its label on ties."""
    from sklearn.neighbors import NearestNeighbors

    dist, idx = NearestNeighbors(n_neighbors=m + 1).fit(X).kneighbors(X)
    h = scale * np.median(dist[:, 7])
    dist, idx = (dist[:, 1:], idx[:, 1:]) if mode == "loo" else (dist[:, :m], idx[:, :m])
    weights, rows = np.exp(-(dist / h) ** 2), np.arange(X.shape[0])
    for _ in range(50 if mode == "fixed" else 1):
        sums = np.column_stack([np.sum(weights * (labels[idx] == c), axis=1)
                                for c in range(k)])
        new = np.argmax(sums, axis=1)
        new = np.where(sums[rows, labels] >= sums[rows, new], labels, new)
        if np.array_equal(new, labels):
            break
        labels = new
    return labels


def vote(args):
    """The default's labels post-processed by ``neighbour_vote`` with each of ``--variants``
    M:SCALE[:loo|:fixed], set by set on ``limit_groups`` and fresh noisy circles (.1)
    (``--shape-seeds``; one default fit per set, the vote not applied where the Gaussian
    mixture labels the points; ``--groups``: only the groups whose names start with one of
    these): per group the mean ARI, the sets up and down against the
    default, and those below 0.95 (shapes) or their bar (blob sets)."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    from kkmeans_cli.kernels.graph_fit import fit_graph, whiten_points

    groups = limit_groups()
    groups[f"circles (.1), seeds {args.shape_seeds[0]}–{args.shape_seeds[-1]}"] = [
        (f"circles .1 {seed}", *gallery_data("circles", seed, 0.1), 2, seed)
        for seed in args.shape_seeds]
    if args.groups:
        groups = {name: cases for name, cases in groups.items()
                  if name.startswith(tuple(args.groups))}
    variants = [(v, *(v.split(":") + ["once"])[:3]) for v in args.variants]
    print(f"load average {os.getloadavg()[0]:.2f}; variants {args.variants}, one thread")
    for group, cases in groups.items():
        base, got, below = [], {v[0]: [] for v in variants}, {v[0]: 0 for v in variants}
        below_base = 0
        for name, X, y, k, seed in cases:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = fit_graph(X, k, random_state=seed, n_threads=1)
                need = blob_bar(X, y, k, seed) if group.startswith("blob sets") else \
                    0.95 if group.startswith(("shapes", "circles", "harder", "small")) \
                    else -np.inf
            base.append(ari(y, fit.labels))
            below_base += base[-1] < need
            points = X if fit.transform is None else whiten_points(X, fit.transform)
            for v, m, scale, mode in variants:
                labels = fit.labels if fit.mixture_model is not None else neighbour_vote(
                    np.asarray(points, dtype=float), fit.labels, k, int(m), float(scale),
                    mode)
                got[v].append(ari(y, labels))
                below[v] += got[v][-1] < need
        base = np.array(base)
        cells = [f"default: mean {base.mean():.4f}, below {below_base}"]
        for v, a in got.items():
            d = np.array(a) - base
            cells.append(f"{v}: mean {np.mean(a):.4f}, {np.sum(d > 1e-12)} up, "
                         f"{np.sum(d < -1e-12)} down, below {below[v]}")
        print(f"{group} ({len(cases)} sets): " + "; ".join(cells), flush=True)


def floor(args):
    """How often a classifier *told the true labels* of every other point falls below the
    target, beside the default and the Bayes classifier, on fresh draws of a shape
    (``--shape`` NAME:NOISE, seeds ``--shape-seeds``): each point given the label that the
    ``m`` nearest other points weigh most (``neighbour_vote`` of the true labels, leaving the
    point out), with equal weights (the m-nearest-neighbour rule, m odd) or Gaussian ones of
    width ``scale`` × the median distance to the 7th neighbour. No method that sees only the
    points has those labels; what such a rule misses is what a boundary learnt from the points
    around it misses at that smoothing."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    name, noise = args.shape.split(":")
    noise, seeds = float(noise), args.shape_seeds
    rules = [("default", None), ("Bayes classifier", None)] + \
        [(f"{m} nearest, equal weights", (m, 1e9)) for m in (15, 31, 51)] + \
        [(f"100 nearest, Gaussian h = {h} × the 7th's distance", (100, h)) for h in (1, 2, 3)]
    scores = {rule: [] for rule, _ in rules}
    wrong = {rule: [] for rule, _ in rules}     # points on the wrong side (2 clusters)
    print(f"load average {os.getloadavg()[0]:.2f}; {name} ({noise}), seeds "
          f"{seeds[0]}–{seeds[-1]}, n = 1500, one thread")
    for seed in seeds:
        X, y = gallery_data(name, seed, noise)
        for rule, setting in rules:
            if rule == "default":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    labels = fit_graph_labels(X, K_OF[name], seed)
            elif setting is None:
                labels = bayes_labels(name, seed, noise)[0]
            else:
                labels = neighbour_vote(X, y, K_OF[name], setting[0], setting[1], "loo")
            scores[rule].append(ari(y, labels))
            if K_OF[name] == 2:
                wrong[rule].append(min(np.sum(labels != y), np.sum(labels == y)))
    print(f"| rule | mean ARI | least | below {TARGETS[name]} | points on the wrong side, "
          f"mean |")
    print("|---|---|---|---|---|")
    for rule, a in scores.items():
        a = np.array(a)
        side = f"{np.mean(wrong[rule]):.1f}" if wrong[rule] else "–"
        print(f"| {rule} | {a.mean():.4f} | {a.min():.3f} | {int(np.sum(a < TARGETS[name]))} of "
              f"{a.size} | {side} |", flush=True)


SAMPLE_FAMILIES = ("moons", "circles", "varied", "aniso", "blobs")


def sample_family(name, n, seed):
    """(X, y, k) of ``refit_sample``: moons (noise .1), circles (noise .08, factor .5), or
    varied, anisotropic and plain blobs as in the gallery, standardized."""
    from sklearn.datasets import make_blobs, make_circles, make_moons
    from sklearn.preprocessing import StandardScaler

    if name == "moons":
        X, y = make_moons(n, noise=0.1, random_state=seed)
        return X, y, 2
    if name == "circles":
        X, y = make_circles(n, noise=0.08, factor=0.5, random_state=seed)
        return X, y, 2
    if name == "varied":
        X, y = make_blobs(n, cluster_std=list(VARIED_STD), random_state=seed)
    else:
        X, y = make_blobs(n, random_state=seed)
        X = X @ ANISO if name == "aniso" else X
    return StandardScaler().fit_transform(X), y, 3


def refit_sample(args):
    """The default with the refit's sample rule applied at ``--n`` points (below its own
    threshold: ``REFIT_SAMPLE_ABOVE`` set under n) against the default without it, set by
    set, in this process (times indicative): where the sample skipped the refit, whether the
    refit of all the points had been kept, and the ARI and time of both."""
    import warnings

    from sklearn.metrics import adjusted_rand_score as ari

    from kkmeans_cli.kernels import graph_fit

    print(f"load average {os.getloadavg()[0]:.2f}; n = {args.n:,}, seeds {args.seeds}, "
          f"{args.threads} threads")
    rows, above = [], graph_fit.REFIT_SAMPLE_ABOVE
    for name in SAMPLE_FAMILIES:
        for seed in args.seeds:
            X, y, k = sample_family(name, args.n, seed)
            got = {}
            for rule, limit in (("with", args.n - 1), ("without", np.inf)):
                graph_fit.REFIT_SAMPLE_ABOVE = limit
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    fit = graph_fit.fit_graph(X, k, random_state=0, n_threads=args.threads)
                got[rule] = (fit, time.perf_counter() - t0, ari(y, fit.labels))
            graph_fit.REFIT_SAMPLE_ABOVE = above
            skipped = "sample" in (got["with"][0].whitening or {})
            kept = bool((got["without"][0].whitening or {}).get("kept"))
            rows.append((skipped, kept, got["with"][2] - got["without"][2], got["with"][1],
                         got["without"][1]))
            print(f"{name} {seed}: sample skipped the refit {skipped}, refit kept without the "
                  f"rule {kept}; ARI {got['with'][2]:.4f} / {got['without'][2]:.4f}; "
                  f"{got['with'][1]:.1f} / {got['without'][1]:.1f} s", flush=True)
    skips = [r for r in rows if r[0]]
    print(f"skipped on {len(skips)} of {len(rows)} sets, of which the refit had been kept on "
          f"{sum(r[1] for r in skips)}; ARI changed on "
          f"{sum(abs(r[2]) > 1e-12 for r in rows)} (largest {max(abs(r[2]) for r in rows):.4f}); "
          f"mean time {np.mean([r[3] for r in rows]):.2f} s with the rule, "
          f"{np.mean([r[4] for r in rows]):.2f} s without")


SCALE_CASES = ("moons", "digits-std", "digits-raw", "aniso-0", "aniso-1", "aniso-2")


def scale_child(case, mode, threads):
    """One fit of a ``scale`` case in this process: 10⁶ moons (noise .1), 20,000 upsampled
    digits (``high_dim_data``, standardized or raw) or 20,000 anisotropic blobs of seed 0–2
    (standardized), with the default (``whiten='auto'``), the default without the refit's
    sample rule (``no-sample``), the default with it but without the Gaussian step's
    (``no-step-sample``: the step made whatever the sample's step cut) or one fit
    (``whiten=False``)."""
    from sklearn.metrics import adjusted_rand_score
    from sklearn.preprocessing import StandardScaler

    from kkmeans_cli.kernels.graph_fit import fit_graph

    if case == "moons":
        from sklearn.datasets import make_moons

        X, y = make_moons(1_000_000, noise=0.1, random_state=0)
        k = 2
    elif case.startswith("digits"):
        X, y, k = high_dim_data("digits", 20_000)
        if case.endswith("std"):
            X = StandardScaler().fit_transform(X)
    else:
        from sklearn.datasets import make_blobs

        X, y = make_blobs(20_000, random_state=int(case[-1]))
        X, k = StandardScaler().fit_transform(X @ ANISO), 3
    t0 = time.perf_counter()
    from kkmeans_cli.kernels import graph_fit

    if mode == "no-sample":         # the default as it was before the refit's sample rule
        graph_fit.REFIT_SAMPLE_ABOVE = np.inf
    if mode == "no-step-sample":    # ... before the step's
        graph_fit.SAMPLE_STEP_RATIO = np.inf
    fit = fit_graph(X, k, random_state=0, n_threads=threads,
                    whiten=False if mode == "one" else "auto")
    seconds = time.perf_counter() - t0
    return dict(case=case, mode=mode, seconds=seconds, rss=peak_rss_bytes(),
                ari=adjusted_rand_score(y, fit.labels),
                refit=(fit.whitening or {}).get("kept"), step=(fit.gaussian or {}).get("kept"),
                ratio=(fit.gaussian or {}).get("ncut_ratio"),
                sample_ratio=(fit.gaussian or {}).get("sample_ncut_ratio"),
                load=os.getloadavg()[0])


def scale(args):
    """The default against one fit at scale, each fit in its own process, ``--repeats``
    times (the median's spread shown)."""
    print(f"{args.threads} threads; load average before {os.getloadavg()[0]:.2f}")
    print("| case | mode | seconds (median; all) | peak RSS | ARI | refit kept | step kept "
          "(cut ratio) |")
    print("|---|---|---|---|---|---|---|")
    for case in args.cases:
        for mode in args.modes:
            runs = []
            for _ in range(args.repeats):
                cmd = [sys.executable, os.path.abspath(__file__), "--scale-child", case, mode,
                       str(args.threads)]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode:
                    print(f"| {case} | {mode} | failed: {proc.stderr.strip().splitlines()[-1:]}"
                          f" |")
                    break
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            if not runs:
                continue
            r = runs[0]
            times = sorted(x["seconds"] for x in runs)
            ratio = "" if r["ratio"] is None else f" ({r['ratio']:.2f})"
            if r.get("sample_ratio") is not None:
                ratio = f", not made (the sample's {r['sample_ratio']:.2f})"
            print(f"| {case} | {mode} | {np.median(times):.1f} ("
                  f"{', '.join(f'{t:.1f}' for t in times)}) | "
                  f"{max(x['rss'] for x in runs) / 1e9:.2f} GB | {r['ari']:.4f} | {r['refit']} | "
                  f"{r['step']}{ratio} |", flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        print(json.dumps(big_child(argv[1], int(argv[2]), int(argv[3]), float(argv[4]))))
        return
    if argv and argv[0] == "--scale-child":
        print(json.dumps(scale_child(argv[1], argv[2], int(argv[3]))))
        return
    if argv and argv[0] == "--ann-child":
        print(json.dumps(ann_child(argv[1], int(argv[2]), argv[3], int(argv[4]), argv[5])))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gallery")
    g.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    g.add_argument("--only", nargs="+", help="these data sets only (with random centres)")
    r = sub.add_parser("real")
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    b = sub.add_parser("big")
    b.add_argument("--n", type=int, default=1_000_000)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--noise", type=float, default=0.05)
    b.add_argument("--methods", nargs="+", default=["graph", "spectral"])
    b.add_argument("--timeout", type=float, default=1800)
    for name in ("files", "starts"):
        s = sub.add_parser(name)
        s.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    pr = sub.add_parser("predict")
    pr.add_argument("--n", type=int, default=100_000)
    pr.add_argument("--n-fit", type=int, default=10_000)
    pr.add_argument("--threads", type=int, default=2)
    kn = sub.add_parser("knn")
    kn.add_argument("--n", type=int, default=20_000)
    kn.add_argument("--d", type=int, default=64)
    kn.add_argument("--threads", type=int, default=2)
    kn.add_argument("--repeats", type=int, default=3)
    an = sub.add_parser("ann")
    an.add_argument("--data", nargs="+", default=["digits", "blobs"])
    an.add_argument("--n", type=int, nargs="+", default=[20_000, 50_000, 100_000])
    an.add_argument("--repeats", type=int, default=2)
    an.add_argument("--threads", type=int, default=2)
    an.add_argument("--compile-only", action="store_true",
                    help="only numba's compilation with an empty and a filled cache")
    st = sub.add_parser("ann-states")
    st.add_argument("--data", nargs="+", default=["digits", "blobs"])
    st.add_argument("--n", type=int, nargs="+", default=[20_000, 50_000])
    st.add_argument("--states", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    st.add_argument("--threads", type=int, default=2)
    wh = sub.add_parser("whiten")
    wh.add_argument("--seeds", type=int, nargs="+", default=list(range(12)))
    wh.add_argument("--shape-seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    wh.add_argument("--real-seeds", type=int, nargs="+", default=[0, 1, 2])
    ba = sub.add_parser("bars")
    ba.add_argument("--seeds", type=int, nargs="+", default=list(range(132)))
    hd = sub.add_parser("harder")
    hd.add_argument("--seeds", type=int, nargs="+", default=list(range(12)))
    by = sub.add_parser("bayes")
    by.add_argument("--seeds", type=int, nargs="*", default=list(range(132)))
    by.add_argument("--shape-seeds", type=int, nargs="+", default=list(range(36)))
    by.add_argument("--draws", type=int, default=0)
    lm = sub.add_parser("limits")
    lm.add_argument("--settings", nargs="+", default=["10:0.01::full", "10:0.01"])
    lm.add_argument("--groups", nargs="+", default=None)
    lm.add_argument("--more", action="store_true")
    nb = sub.add_parser("neighbors")
    nb.add_argument("--values", type=int, nargs="+", default=[20, 24])
    au = sub.add_parser("audit")
    au.add_argument("--seeds", type=int, nargs="+", default=list(range(36)))
    au.add_argument("--draws", type=int, default=6)
    au.add_argument("--graphs", nargs="+", default=["knn 20", "knn 24", "mutual 30"])
    au.add_argument("--blob-seeds", type=int, nargs="*", default=list(range(48)))
    rs = sub.add_parser("refit-sample")
    rs.add_argument("--n", type=int, default=250_000)
    rs.add_argument("--seeds", type=int, nargs="+", default=list(range(7)))
    rs.add_argument("--threads", type=int, default=2)
    vo = sub.add_parser("vote")
    vo.add_argument("--variants", nargs="+", default=["50:1", "50:2", "50:2:loo",
                                                        "50:2:fixed", "50:3", "30:2", "100:2"])
    vo.add_argument("--shape-seeds", type=int, nargs="+", default=list(range(100, 300)))
    vo.add_argument("--groups", nargs="+", default=None)
    fl = sub.add_parser("floor")
    fl.add_argument("--shape", default="circles:0.1")
    fl.add_argument("--shape-seeds", type=int, nargs="+", default=list(range(100, 300)))
    lk = sub.add_parser("large-k")
    lk.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    e = sub.add_parser("em")
    e.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    e.add_argument("--repeats", type=int, default=3)
    sc = sub.add_parser("scale")
    sc.add_argument("--cases", nargs="+", default=list(SCALE_CASES), choices=SCALE_CASES)
    sc.add_argument("--modes", nargs="+", default=["default", "one"],
                    choices=["default", "no-sample", "no-step-sample", "one"])
    sc.add_argument("--repeats", type=int, default=3)
    sc.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    {"audit": audit, "bayes": bayes, "limits": limits, "neighbors": neighbors, "harder": harder, "refit-sample": refit_sample, "bars": bars, "scale": scale, "whiten": whiten, "ann-states": ann_states, "gallery": gallery, "real": real, "big": big, "files": files, "predict": predict,
     "starts": starts, "knn": knn, "ann": ann, "large-k": large_k, "vote": vote, "floor": floor, "em": em}[args.cmd](args)


if __name__ == "__main__":
    main()
