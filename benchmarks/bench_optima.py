"""Which optimum does each kernel k-means reach? kkmeans (defaults) against its peers.

For each data set (moons, circles, blobs, iris, wine, digits; features standardised, true
classes known) every method clusters with the same rbf kernel and gamma, and ONE function
scores every labelling on the same float64 kernel matrix K:

- objective 'kmeans': Σ_i K_ii − Σ_c (Σ_{i,j∈c} K_ij)/|c| (lower is better);
- objective 'ncut':   Σ_c cut(c, V∖c)/vol(c) with vol(c) = Σ_{i∈c} Σ_j K_ij (lower is better);

plus the adjusted Rand index (ARI) against the known classes, and the score of the true classes
themselves (where it is above the lowest, the classes are not the objective's optimum at that
kernel: e.g. rings under 'kmeans', the density bias the normalized cut removes).

kkmeans runs with its defaults (20 restarts: one spectral, one normalized spectral, the rest
k-means++; Hartigan refinement). The peers get 10 restarts each (more than their own defaults),
best kept by the common objective:

- PyPI ``KKMeans`` (the implementation of Theis 2023; needs ``numpy.NINF`` on NumPy 2),
- PyPI ``python-kkmeans`` (import name ``kkmeans``; one start per call, labels only),
- ``tslearn.clustering.KernelKMeans``,
- for 'ncut': scikit-learn ``SpectralClustering(affinity='precomputed')`` on the same K.

A peer that is missing or fails is reported as such (each is guarded). Objectives do not depend
on the machine; the seconds do (2 busy cores).

Usage: python benchmarks/bench_optima.py [--peer-restarts 10] [--only moons,circles]
"""
import argparse
import contextlib
import sys
import time
import warnings

import numpy as np
from sklearn import datasets
from sklearn.metrics import adjusted_rand_score
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import StandardScaler

from kkmeans_cli import KernelKMeans
from kkmeans_cli.kernels.functions import resolve_gamma


# -- data ------------------------------------------------------------------------------------
def load(name):
    """(X standardised, y, k, gamma for 'kmeans', gamma for 'ncut')."""
    if name == "moons":
        X, y = datasets.make_moons(600, noise=0.06, random_state=3)
        return X, y, 2, 20.0, 50.0
    if name == "circles":
        X, y = datasets.make_circles(600, noise=0.05, factor=0.5, random_state=0)
        return X, y, 2, 5.0, 50.0
    if name == "blobs":
        X, y = datasets.make_blobs(600, centers=4, n_features=5, random_state=1)
    else:
        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    gamma = resolve_gamma("rbf", "median", X, np.random.default_rng(0))
    return X, y, len(np.unique(y)), gamma, gamma


# -- the one scoring function ----------------------------------------------------------------
def one_hot(labels):
    _, lab = np.unique(np.asarray(labels).ravel(), return_inverse=True)
    Z = np.zeros((lab.size, lab.max() + 1))
    Z[np.arange(lab.size), lab] = 1.0
    return Z


def score(K, labels, objective):
    """The kernel k-means objective or the normalized cut of any labelling on K (float64)."""
    Z = one_hot(labels)
    links = np.einsum("ic,ic->c", Z, K @ Z)          # Σ_{i,j∈c} K_ij
    if objective == "kmeans":
        return float(np.trace(K) - np.sum(links / Z.sum(axis=0)))
    vol = Z.T @ K.sum(axis=1)                        # Σ_{i∈c} d_i
    return float(np.sum((vol - links) / vol))


# -- methods: each returns labels --------------------------------------------------------------
def run_kkmeans(X, k, gamma, objective, restarts):
    est = KernelKMeans(k, gamma=gamma, objective=objective, random_state=0).fit(X)
    return est.labels_, est.fit_stats_.get("best_start")


def best_of(K, objective, fits):
    """Lowest common objective among the labellings ``fits`` yields."""
    best = None
    for labels in fits:
        value = score(K, labels, objective)
        if best is None or value < best[0]:
            best = (value, labels)
    return best[1], None


def run_KKMeans(X, k, gamma, objective, restarts):
    np.NINF = -np.inf  # removed in NumPy 2, still used by KKMeans 0.1.0
    from KKMeans import KKMeans

    est = KKMeans(n_clusters=k, init="kmeans++", n_init=restarts, kernel="rbf", gamma=gamma,
                  rng=0)
    with contextlib.redirect_stdout(sys.stderr):   # it prints "Best inertia: ..."
        est.fit(X)
    return est.labels_, None


def run_python_kkmeans(X, k, gamma, objective, restarts):
    import kkmeans as pk  # the module of python-kkmeans

    sigma = (2.0 * gamma) ** -0.5  # its rbf is exp(−‖x−y‖²/2σ²)
    K = rbf_kernel(X, gamma=gamma)

    def fits():
        for seed in range(restarts):
            np.random.seed(seed)      # it draws from the global generator
            yield pk.kkmeans(X, k, kernel_function=lambda A: pk.rbf_kernel(A, sigma=sigma),
                             initial_cluster_assignments=pk.kmeans_plusplus)
    return best_of(K, "kmeans", fits())


def run_tslearn(X, k, gamma, objective, restarts):
    from tslearn.clustering import KernelKMeans as TsKernelKMeans

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = TsKernelKMeans(n_clusters=k, kernel="rbf", kernel_params={"gamma": gamma},
                             n_init=restarts, random_state=0).fit(X)
    return est.labels_, None


def run_spectral(X, k, gamma, objective, restarts):
    from sklearn.cluster import SpectralClustering

    K = rbf_kernel(X, gamma=gamma)
    est = SpectralClustering(k, affinity="precomputed", random_state=0,
                             n_init=restarts).fit(K)
    return est.labels_, None


METHODS = {
    "kmeans": [("kkmeans", run_kkmeans), ("KKMeans", run_KKMeans),
               ("python-kkmeans", run_python_kkmeans), ("tslearn", run_tslearn)],
    "ncut": [("kkmeans --objective ncut", run_kkmeans),
             ("sklearn SpectralClustering", run_spectral)],
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-restarts", type=int, default=10)
    parser.add_argument("--only", default="moons,circles,blobs,iris,wine,digits")
    args = parser.parse_args(argv)
    names = args.only.split(",")
    for objective in ("kmeans", "ncut"):
        print(f"\n### objective = {objective} "
              f"({'kernel k-means objective' if objective == 'kmeans' else 'normalized cut'}"
              f", lower is better; ARI against the true classes)\n")
        methods = METHODS[objective]
        print("| data (n, k, γ) | " + " | ".join(m for m, _ in methods)
              + " | lowest | true classes |")
        print("|---" * (len(methods) + 3) + "|")
        for name in names:
            X, y, k, g_kmeans, g_ncut = load(name)
            gamma = g_kmeans if objective == "kmeans" else g_ncut
            K = rbf_kernel(X, gamma=gamma)
            np.fill_diagonal(K, 1.0)
            cells, values = [], []
            for method, fn in methods:
                t0 = time.perf_counter()
                try:
                    labels, how = fn(X, k, gamma, objective, args.peer_restarts)
                except Exception as exc:  # noqa: BLE001 -- a peer may be missing or fail
                    cells.append(f"failed ({type(exc).__name__})")
                    values.append(np.inf)
                    continue
                seconds = time.perf_counter() - t0
                value = score(K, labels, objective)
                values.append(value)
                ari = adjusted_rand_score(y, labels)
                n_found = len(np.unique(labels))
                note = f", {n_found} clusters" if n_found < k else ""
                cells.append(f"{value:.6g} (ARI {ari:.2f}, {seconds:.1f} s{note})")
                print(f"  {name} {objective} {method}: {value:.10g} ARI {ari:.3f} "
                      f"{seconds:.1f}s{'' if how is None else ' best start ' + how}",
                      file=sys.stderr)
            lowest = int(np.argmin(values))
            tie = [m for (m, _), v in zip(methods, values)
                   if v <= values[lowest] + 1e-9 * abs(values[lowest]) + 1e-12]
            print(f"| {name} ({X.shape[0]}, {k}, {gamma:.4g}) | " + " | ".join(cells)
                  + f" | {', '.join(tie)} | {score(K, y, objective):.6g} |", flush=True)


if __name__ == "__main__":
    main()
