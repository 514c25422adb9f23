#!/usr/bin/env python
"""How often a graph sweep names the true k, by each of its measures: the cut ratio (the
default), the graph silhouette and the eigengap (docs/cli.md, ``kkmeans sweep`` on a graph).

    python benchmarks/bench_sweep_k.py                  # every family, seeds 0 1 2 (~10 min)
    python benchmarks/bench_sweep_k.py --families shapes --seeds 0
    python benchmarks/bench_sweep_k.py --ks 2..8 --jsonl sweeps.jsonl

Each data set is swept once with only its k range given (``model.sweep.graph_sweep``, the
engine of ``kkmeans sweep``: one graph with the default neighbours of the smallest k, every k
fitted on it, one thread, ``random_state`` 0); its rows hold all three measures, so the three
choices come from the same fits. The families:

- shapes: scikit-learn's gallery circles and moons (noise .03, .05, .08, .1) and three
  concentric rings (.03, .05), 300, 1500 and 3000 points, standardized, and the bundled
  ``examples/circles.csv`` and ``moons.csv``;
- separated blobs: 3–6 Gaussian blobs whose centres lie at least 6 standard deviations apart,
  2 and 8 dimensions, 300, 1500 and 3000 points;
- random blobs: the gallery's varied, aniso and blobs, and ``make_blobs`` with 3–6 random
  centres (300, 1500, 3000 points), and the bundled ``examples/blobs.csv``;
- real: iris, wine, breast cancer, digits, raw and standardized (ks 2..14 for digits).

A set counts as *separable* when the sweep's own fit at the true k has ARI ≥ 0.9 against the
truth (the bundled files, without labels, always): on the others no measure of the graph can
name a k that the graph's normalized cut does not hold apart. The table prints, per family,
how many separable sets each measure names right, then the non-separable ones.
"""
import argparse
import json
import os
import sys
import time
import warnings
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from bench_graph import gallery_data, real_data  # noqa: E402

MEASURES = ("cut_ratio", "silhouette", "eigengap")
SEPARABLE_ARI = 0.9


def data_sets(families, seeds):
    """(family, label, X, y or None, true k) of every set of ``families``."""
    from sklearn import datasets
    from sklearn.preprocessing import StandardScaler

    def bundled(name, k):
        X = np.loadtxt(os.path.join(ROOT, "examples", f"{name}.csv"), delimiter=",",
                       skiprows=1)
        return X, None, k

    if "shapes" in families:
        for n in (300, 1500, 3000):
            for name, noises in (("circles", (.03, .05, .08, .1)),
                                 ("moons", (.03, .05, .08, .1)), ("rings", (.03, .05))):
                for noise in noises:
                    for seed in seeds:
                        X, y = gallery_data(name, seed, noise, n=n)
                        k = 3 if name == "rings" else 2
                        yield "shapes", f"{name} n={n} noise={noise} seed={seed}", X, y, k
        for name in ("circles", "moons"):
            yield ("shapes", f"examples/{name}.csv", *bundled(name, 2))
    if "separated" in families:
        for d in (2, 8):
            for c in (3, 4, 5, 6):
                for n in (300, 1500, 3000):
                    for seed in seeds:
                        rng = np.random.RandomState(1000 + seed)
                        while True:
                            C = rng.uniform(-10, 10, size=(c, d))
                            D = np.sqrt(((C[:, None] - C[None]) ** 2).sum(-1)) + 1e9 * np.eye(c)
                            if D.min() >= 6:
                                break
                        X, y = datasets.make_blobs(n, centers=C, random_state=seed)
                        yield ("separated", f"{c} blobs d={d} n={n} seed={seed}",
                               StandardScaler().fit_transform(X), y, c)
    if "random" in families:
        for name in ("varied", "aniso", "blobs"):
            for seed in [None, *seeds]:
                X, y = gallery_data(name, seed, n=1500)
                yield "random", f"{name} seed={seed}", X, y, 3
        for c in (4, 5, 6):
            for n in (300, 1500, 3000):
                for seed in seeds:
                    X, y = datasets.make_blobs(n, centers=c, random_state=seed)
                    yield ("random", f"make_blobs c={c} n={n} seed={seed}",
                           StandardScaler().fit_transform(X), y, c)
        yield ("random", "examples/blobs.csv", *bundled("blobs", 4))
    if "real" in families:
        for name, X, y, k in real_data():
            yield "real", name, X, y, k


def sweep_one(X, ks):
    from kkmeans_cli.model.sweep import choose_k, graph_sweep

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = graph_sweep(X, ks, random_state=0, n_threads=1, eigengap=True,
                             refit_best=False)
    seconds = time.perf_counter() - t0
    chosen = {m: choose_k(result.rows, m) for m in MEASURES}
    return result, chosen, seconds


def main(argv=None):
    from sklearn.metrics import adjusted_rand_score

    from kkmeans_cli.model.sweep import parse_ks

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--families", nargs="+", default=["shapes", "separated", "random", "real"],
                   choices=["shapes", "separated", "random", "real"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--ks", default="2..8", help="the ks swept (digits: 2..14)")
    p.add_argument("--jsonl", default=None, help="also write every sweep's rows here")
    args = p.parse_args(argv)
    ks = parse_ks(args.ks)
    print(f"load average {os.getloadavg()[0]:.2f}; ks {args.ks}; seeds {args.seeds}",
          flush=True)
    right = defaultdict(lambda: defaultdict(int))
    count = defaultdict(int)
    out = open(args.jsonl, "w") if args.jsonl else None
    for family, label, X, y, k in data_sets(args.families, args.seeds):
        swept = list(range(2, 15)) if label.startswith("digits") else ks
        result, chosen, seconds = sweep_one(X, swept)
        at_k = result.labels[[r["k"] for r in result.rows].index(k)]
        ari = None if y is None else float(adjusted_rand_score(y, at_k))
        group = family if ari is None or ari >= SEPARABLE_ARI else f"{family} (not separable)"
        count[group] += 1
        for m in MEASURES:
            right[group][m] += chosen[m] == k
        print(f"{group:24s} {label:36s} k={k} ARI(k)={'-' if ari is None else f'{ari:.3f}'} "
              + " ".join(f"{m}={chosen[m]}" for m in MEASURES) + f"  {seconds:.1f} s",
              flush=True)
        if out is not None:
            out.write(json.dumps(dict(family=family, label=label, k=k, ari=ari, chosen=chosen,
                                      rows=result.rows, seconds=seconds)) + "\n")
    if out is not None:
        out.close()
    print("\n| family | sets | " + " | ".join(MEASURES) + " |")
    print("|---|---|" + "---|" * len(MEASURES))
    for group in sorted(count, key=lambda g: ("not" in g, g)):
        print(f"| {group} | {count[group]} | "
              + " | ".join(str(right[group][m]) for m in MEASURES) + " |")


if __name__ == "__main__":
    main()
