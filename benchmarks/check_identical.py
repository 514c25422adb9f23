#!/usr/bin/env python
"""Fingerprints of every fit route, to show that a refactoring changes no result.

    python benchmarks/check_identical.py OUT.json            # write the fingerprints
    python benchmarks/check_identical.py OUT.json --compare BEFORE.json

Fits every route of ``KernelKMeans`` (kernel matrix, blocked, lazy, screened blocked
restarts, Nyström on the explicit-feature engine and on its feature source, the normalized
cut, Hartigan's refinement, the embedding solver, precomputed kernels and distances, the PSD
repairs, given labels, float32 storage, the Dask route) and the sweep over k, on the example
files and on seeded generated data, and writes for each: the labels, ``inertia_``, ``n_iter_``,
a digest of every fitted attribute (``*_``), ``fit_stats_`` without its timings, the
predictions and distances of new points, the measures, and the model file's arrays and meta.
Nothing is timed; two runs of the same code give the same file, so ``--compare`` lists every
entry that changed (exit 1) or says that all are identical (exit 0).
"""
import argparse
import hashlib
import io
import json
import os
import sys
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run from a source checkout without installing
    sys.path.insert(0, ROOT)

from kkmeans_cli import KernelKMeans  # noqa: E402

EXAMPLES = os.path.join(ROOT, "examples")
#: fit_stats_ entries that are times (they differ between runs of the same code)
TIMED = ("seconds", "pass_seconds", "bytes_per_pass", "workers")
#: A fixed limit: the default (80% of the RAM available now) would change the storage reason.
MEMORY_LIMIT = "16G"


def _digest(value):
    """A short, exact fingerprint of an array (its dtype, shape and bytes)."""
    a = np.ascontiguousarray(value)
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
    return h.hexdigest()[:16]


def _plain(value):
    """JSON-able form of a fitted value, exact for floats (repr) and arrays (digest)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items())
                if not any(t in str(k) for t in TIMED)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return {"array": _digest(value)}
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "__dict__"):   # Kernel, PSDState, ...
        return {type(value).__name__: _plain({k: v for k, v in vars(value).items()
                                              if not k.startswith("_")})}
    return repr(value)


def fingerprint(est, X_new=None, scores=True):
    out = {"labels": [int(v) for v in est.labels_], "inertia": repr(float(est.inertia_)),
           "n_iter": int(est.n_iter_)}
    attrs = {}
    for name, value in sorted(vars(est).items()):
        if name.endswith("_") and not name.startswith("_") and name != "fit_stats_":
            attrs[name] = _plain(value)
    out["fitted"] = attrs
    out["fit_stats"] = _plain(est.fit_stats_)
    if X_new is not None:
        out["predict"] = _digest(est.predict(X_new))
        # (the precomputed case is the rbf kernel: K(x, x) = 1)
        diag = np.ones(X_new.shape[0]) if est.kernel == "precomputed" else None
        out["transform"] = _digest(est.transform(X_new, kernel_diag=diag))
    if scores and est.kernel not in ("precomputed", "precomputed-distance"):
        if est.approx == "nystroem":
            K = est.kernel_matrix(_fit_X[id(est)])
            out["scores"] = _plain(est.scores(kernel_matrix=K))
        else:
            out["scores"] = _plain(est.scores())
    out["model"] = _model(est)
    return out


_fit_X = {}


def _model(est):
    """Arrays and meta of the model file (without its creation time and timings)."""
    try:
        from kkmeans_cli.model.model_file import load_model, model_meta, save_model
        from kkmeans_cli.io.scaling import Scaler
    except ImportError:
        return None
    buf = io.BytesIO()
    meta = model_meta(est, Scaler("none"))
    save_model(buf, est, Scaler("none"), meta)
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as z:
        arrays = {k: _digest(z[k]) for k in sorted(z.files) if k != "meta"}
        meta = json.loads(str(z["meta"]))
    meta.pop("created", None)
    meta.pop("kkmeans_version", None)
    return {"arrays": arrays, "meta": _plain(meta)}


def fit(X, X_new=None, scores=True, sample_weight=None, **params):
    # The dense kernels' routes: rbf unless a case names another kernel (the estimator's
    # default became the graph kernel 'knn', whose fits tests/test_graph_api.py checks).
    params.setdefault("kernel", "rbf")
    params.setdefault("random_state", 0)
    params.setdefault("memory_limit", MEMORY_LIMIT)
    est = KernelKMeans(**params)
    _fit_X[id(est)] = X
    est.fit(X, sample_weight=sample_weight)
    return fingerprint(est, X_new, scores)


def read_csv(name):
    return np.loadtxt(os.path.join(EXAMPLES, name), delimiter=",", skiprows=1)


def blobs(n, d, k, seed, spread=1.0):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-8, 8, size=(k, d))
    return centres[rng.integers(0, k, size=n)] + rng.normal(scale=spread, size=(n, d))


#: The fits of every example file: name → KernelKMeans parameters.
SIGMOID = dict(n_clusters=3, kernel="sigmoid", gamma=0.5, coef0=-0.2)
PER_EXAMPLE = [
    ("blocked", dict(n_clusters=3, storage="blocked")),
    ("nystroem", dict(n_clusters=3, approx="nystroem")),
    ("nystroem-hartigan", dict(n_clusters=3, approx="nystroem", refine="hartigan",
                               n_landmarks=60)),
    ("ncut", dict(n_clusters=2, objective="ncut")),
    ("hartigan", dict(n_clusters=4, refine="hartigan", n_init=3)),
    ("no-refine", dict(n_clusters=4, refine="none", n_init=3)),
    ("embed", dict(n_clusters=3, solver="embed", n_init=4)),
    ("elkan", dict(n_clusters=4, algorithm="elkan")),
    ("spectral", dict(n_clusters=3, init="spectral", n_init=3)),
    ("random", dict(n_clusters=3, init="random", n_init=3)),
    ("float32", dict(n_clusters=3, dtype="float32")),
    ("sigmoid-lingoes", dict(SIGMOID, psd_repair="lingoes")),
    ("sigmoid-clip", dict(SIGMOID, psd_repair="clip")),
    ("sigmoid-none", dict(SIGMOID)),
]


def cases(quick=False):
    """(name, thunk) of every fit to fingerprint."""
    moons, circles, blob3 = read_csv("moons.csv"), read_csv("circles.csv"), read_csv("blobs.csv")
    six = np.loadtxt(os.path.join(EXAMPLES, "six-points.csv"), delimiter=",")
    g1 = blobs(1500, 5, 6, 1)
    g2 = blobs(5000, 3, 5, 2, spread=1.5)          # lazy route (one start, n ≥ 4096)
    g3 = blobs(10_600, 2, 4, 3, spread=1.2)        # screened blocked restarts
    new = blobs(200, 2, 3, 9)
    new5 = blobs(200, 5, 3, 9)
    rng = np.random.default_rng(5)
    w = rng.uniform(0.5, 2.0, size=moons.shape[0])
    out = []
    for name, X in (("moons", moons), ("circles", circles), ("blobs", blob3)):
        Xn = new if X.shape[1] == 2 else blobs(50, X.shape[1], 3, 9)
        for k in (2, 3, 5):
            out.append((f"{name}/matrix/k{k}", lambda X=X, k=k, Xn=Xn: fit(X, Xn, n_clusters=k)))
        for case, params in PER_EXAMPLE:
            out.append((f"{name}/{case}", lambda X=X, Xn=Xn, params=params: fit(X, Xn, **params)))
    for kernel in ("linear", "poly", "laplacian", "cosine"):
        out.append((f"moons/{kernel}", lambda kernel=kernel: fit(moons, new, n_clusters=3,
                                                                 kernel=kernel)))
    out.append(("blobs/chi2", lambda: fit(np.abs(blob3), None, n_clusters=3, kernel="chi2")))
    out.append(("moons/weights", lambda: fit(moons, new, sample_weight=w, n_clusters=3)))
    out.append(("moons/weights-ncut", lambda: fit(moons, new, sample_weight=w, n_clusters=2,
                                                  objective="ncut")))
    out.append(("moons/init-labels", lambda: fit(moons, new, n_clusters=2,
                                                 init=(moons[:, 0] > 0.5).astype(int))))
    out.append(("moons/nystroem-init-labels",
                lambda: fit(moons, new, n_clusters=2, approx="nystroem",
                            init=(moons[:, 0] > 0.5).astype(int))))

    def precomputed():
        from sklearn.metrics.pairwise import rbf_kernel

        K = rbf_kernel(moons, gamma=2.0)
        return fit(K, rbf_kernel(new, moons, gamma=2.0), scores=False, n_clusters=2,
                   kernel="precomputed")

    def precomputed_distance():
        return fit(six, None, scores=False, n_clusters=2, kernel="precomputed-distance",
                   psd_repair="lingoes")

    out.append(("moons/precomputed", precomputed))
    out.append(("six/precomputed-distance", precomputed_distance))
    out.append(("six/precomputed-distance-clip",
                lambda: fit(six, None, scores=False, n_clusters=2,
                            kernel="precomputed-distance", psd_repair="clip")))
    out.append(("six/precomputed-distance-ncut",
                lambda: fit(np.exp(-six / 24.0), None, scores=False, n_clusters=2,
                            kernel="precomputed", objective="ncut")))
    out.append(("gen1500/matrix", lambda: fit(g1, new5, n_clusters=6)))
    out.append(("gen1500/blocked", lambda: fit(g1, new5, n_clusters=6, storage="blocked",
                                               n_init=4)))
    out.append(("gen1500/nystroem", lambda: fit(g1, new5, n_clusters=6, approx="nystroem")))
    out.append(("gen1500/nystroem-ncut-fs",
                lambda: fit(g1, new5, n_clusters=6, approx="nystroem", refine="hartigan")))
    out.append(("gen1500/ncut", lambda: fit(g1, new5, n_clusters=6, objective="ncut",
                                            n_init=3)))
    out.append(("gen1500/embed", lambda: fit(g1, new5, n_clusters=6, solver="embed",
                                             n_init=3)))
    out.append(("gen5000/lazy", lambda: fit(g2, None, scores=False, n_clusters=5, n_init=1)))
    out.append(("gen5000/lazy-elkan", lambda: fit(g2, None, scores=False, n_clusters=5,
                                                  n_init=1, algorithm="elkan")))
    out.append(("gen5000/matrix-1", lambda: fit(g2, None, scores=False, n_clusters=5,
                                                n_init=1, storage="matrix")))
    out.append(("gen5000/nystroem", lambda: fit(g2, None, scores=False, n_clusters=5,
                                                approx="nystroem", n_init=5)))
    if not quick:
        out.append(("gen10600/screened", lambda: fit(g3, new, scores=False, n_clusters=4,
                                                     storage="blocked", n_init=3)))
    out.append(("sweep/moons", lambda: _sweep(moons, "2..6", "silhouette")))
    out.append(("sweep/blobs-inertia", lambda: _sweep(blob3, "2..5", "inertia")))
    out.append(("sweep/circles-nystroem", lambda: _sweep(circles, "2..4", "silhouette",
                                                         approx="nystroem")))
    out.append(("sweep/moons-ncut", lambda: _sweep(moons, [2, 3], "davies_bouldin",
                                                   objective="ncut")))
    out.append(("dask/nystroem", lambda: _dask(g2)))
    return out


def _sweep(X, ks, metric, **params):
    try:
        from kkmeans_cli.model.sweep import sweep
    except ImportError:
        from kkmeans_cli.measures.sweep import sweep
    res = sweep(X, ks, metric=metric, random_state=0, memory_limit=MEMORY_LIMIT, **params)
    rows = [{k: v for k, v in row.items() if k != "seconds"} for row in res.rows]
    return {"rows": _plain(rows), "best_k": res.best_k,
            "best": fingerprint(res.best_estimator, None, scores=False),
            "n_used": res.silhouette_n_used, "skipped": res.skipped_ks}


def _dask(X):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=50)
    client = Client(cluster, set_as_default=False)
    try:
        est = KernelKMeans(5, kernel="rbf", approx="nystroem", cluster=client, random_state=0,
                           n_threads=1, memory_limit=MEMORY_LIMIT)
        est.fit(X)
        fp = fingerprint(est, None, scores=False)
        fp["predict_cluster"] = _digest(est.predict(X[:500]))
        return fp
    finally:
        client.close()
        cluster.close()


def compare(now, before):
    changed = []
    for key in sorted(set(now) | set(before)):
        if now.get(key) != before.get(key):
            changed.append(key)
            a, b = before.get(key), now.get(key)
            if isinstance(a, dict) and isinstance(b, dict):
                for sub in sorted(set(a) | set(b)):
                    if a.get(sub) != b.get(sub):
                        print(f"  {key}: {sub} differs: {str(a.get(sub))[:300]} → "
                              f"{str(b.get(sub))[:300]}")
    return changed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--compare", metavar="BEFORE")
    ap.add_argument("--quick", action="store_true", help="leave out the 10,600-point fit")
    ap.add_argument("-k", dest="only", help="only cases whose name contains this")
    args = ap.parse_args()
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, thunk in cases(args.quick):
            if args.only and args.only not in name:
                continue
            try:
                results[name] = thunk()
            except Exception as exc:   # a refusal is a result too
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(name, "error" if "error" in results[name] else "ok", file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
        if args.only or args.quick:
            before = {k: v for k, v in before.items() if k in results}
        changed = compare(results, before)
        if changed:
            print(f"{len(changed)} of {len(results)} cases differ: {', '.join(changed)}")
            return 1
        print(f"all {len(results)} cases identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
