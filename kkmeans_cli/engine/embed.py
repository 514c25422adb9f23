"""The embedding solver (``solver='embed'``, seed 001's route).

K = V Λ Vᵀ; the rows of A = V₊ Λ₊^½ (positive eigenvalues) satisfy A Aᵀ = K when K is PSD, so
weighted k-means on A minimises the same objective as kernel k-means on K. For
n ≤ ``EXACT_MAX_N`` every eigenvector is used (exact); above, the leading ``r`` by Lanczos
(``eigsh``), a truncation. Each start is k-means++ on A, then Lloyd's iterations with explicit
centres. The result is scored on K itself — objective Σ_i w_i K_ii − Σ_c g_c / W_c with the
sums g_c, W_c of the labels — so it is comparable with the Lloyd solver's inertia, and
``predict`` uses those sums. Negative eigenvalues are dropped (on a non-PSD K the embedding is
that of the clipped kernel, while the objective is still reported on K).
"""
from dataclasses import dataclass

import numpy as np

from .threads import blas_threads
from .lloyd import inner_sums, objective

EXACT_MAX_N = 2000


@dataclass
class EmbedResult:
    """One start of the embedding solver, in the shape of ``lloyd.LloydResult``."""

    labels: np.ndarray
    inner_sums: np.ndarray
    cluster_weights: np.ndarray
    inertia: float
    n_iter: int
    converged: bool


def embedding(K, n_clusters, n_threads=1):
    """A = V₊ Λ₊^½ (n × r) with r = all positive eigenvalues (small n) or the leading
    max(4k, 32) (large n)."""
    n = K.shape[0]
    with blas_threads(n_threads):
        if n <= EXACT_MAX_N:
            w, V = np.linalg.eigh(np.asarray(K, dtype=np.float64))
        else:
            from scipy.sparse.linalg import ArpackNoConvergence, eigsh

            r = min(n - 1, max(4 * n_clusters, 32))
            v0 = np.random.default_rng(0).standard_normal(n)
            try:
                w, V = eigsh(np.asarray(K), k=r, which="LA", v0=v0)
            except ArpackNoConvergence as exc:
                raise ValueError(f"solver='embed': the leading {r} eigenvectors did not "
                                 f"converge ({exc}); use solver='lloyd'") from None
    keep = w > 1e-12 * max(float(np.max(np.abs(w))), np.finfo(float).tiny)
    return np.ascontiguousarray(V[:, keep] * np.sqrt(w[keep]))


def solve(source, weights, n_clusters, rng, n_init, max_iter, init_labels=None,
          n_threads=1):
    """Every start of the embedding solver; the lowest objective on K wins (first on ties).

    Returns
    -------
    best : EmbedResult
    objectives : list of float
    """
    A = embedding(source.K, n_clusters, n_threads)
    best, objectives = None, []
    starts = 1 if init_labels is not None else n_init
    for _ in range(starts):
        labels = (np.array(init_labels, dtype=np.int32) if init_labels is not None
                  else _plusplus_labels(A, weights, n_clusters, rng))
        labels, n_iter, converged = _lloyd_explicit(A, weights, labels, n_clusters, max_iter)
        F = np.empty((n_clusters, source.n))
        source.full_outer_sums(labels, weights, F)
        g, W = inner_sums(F, labels, weights, n_clusters)
        result = EmbedResult(labels=labels, inner_sums=g, cluster_weights=W,
                             inertia=objective(source.diag, weights, g, W), n_iter=n_iter,
                             converged=converged)
        objectives.append(result.inertia)
        if best is None or result.inertia < best.inertia:
            best = result
    return best, objectives


def _sq_dist(A, C):
    d = (A * A).sum(1)[:, None] - 2.0 * A @ C.T + (C * C).sum(1)[None, :]
    return np.maximum(d, 0.0)


def _plusplus_labels(A, weights, k, rng):
    """Weighted k-means++ centres in the embedding; labels of the nearest centre."""
    n = A.shape[0]
    p = weights / weights.sum()
    centres = [int(rng.choice(n, p=p))]
    d = _sq_dist(A, A[centres]).min(axis=1)
    for _ in range(1, k):
        mass = weights * d
        total = mass.sum()
        nxt = int(rng.choice(n, p=mass / total)) if total > 0 else int(rng.choice(n, p=p))
        centres.append(nxt)
        d = np.minimum(d, _sq_dist(A, A[[nxt]])[:, 0])
    return np.argmin(_sq_dist(A, A[centres]), axis=1).astype(np.int32)


def _lloyd_explicit(A, weights, labels, k, max_iter):
    """Weighted Lloyd with explicit centres until the labels are stable; an emptied cluster
    takes the point farthest from its centre."""
    labels = labels.astype(np.int32)
    for it in range(1, max_iter + 1):
        W = np.bincount(labels, weights=weights, minlength=k)
        C = np.zeros((k, A.shape[1]))
        np.add.at(C, labels, weights[:, None] * A)
        nz = W > 0
        C[nz] /= W[nz, None]
        D = _sq_dist(A, C)
        D[:, ~nz] = np.inf
        new = np.argmin(D, axis=1).astype(np.int32)
        own = D[np.arange(len(new)), new]
        for c in np.flatnonzero(~nz):
            far = int(np.argmax(np.where(weights > 0, own, -1.0)))
            new[far] = c
            own[far] = -1.0
        if np.array_equal(new, labels):
            return labels, it, True
        labels = new
    return labels, max_iter, False
