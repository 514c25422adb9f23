"""The embedding solver (``solver='embed'``).

K = V Λ Vᵀ; the rows of A = V₊ Λ₊^½ (positive eigenvalues) satisfy A Aᵀ = K when K is PSD, so
weighted k-means on A minimises the same objective as kernel k-means on K. For
n ≤ ``EXACT_MAX_N`` every eigenvector is used (exact); above, the leading ``r`` by Lanczos
(``eigsh``), a truncation. Restart 0 is a deterministic farthest-point start, the others
greedy k-means++ (Arthur & Vassilvitskii, "k-means++: the advantages of careful seeding"), each
followed by Lloyd's iterations with explicit centres. The result is scored on K itself —
objective Σ_i w_i K_ii − Σ_c g_c / W_c with the sums g_c, W_c of the labels — so it is
comparable with the Lloyd solver's inertia, and ``predict`` uses those sums. Negative
eigenvalues are dropped (on a non-PSD K the embedding is that of the clipped kernel, while the
objective is still reported on K).

Small problems are solved exactly: when the number of partitions of the n points into k
non-empty clusters (the Stirling number S(n, k)) is at most ``EXHAUSTIVE_MAX``, every partition
is scored on K and the best one is taken, so the optimum does not rest on random starts.

Ties. Distances in the embedding and objectives on K are rounded sums whose order depends on
the BLAS kernels (``OPENBLAS_CORETYPE``) and on the LAPACK eigenvectors of repeated
eigenvalues: two values that are equal in exact arithmetic come out equal, or apart in either
direction by a few units in the last place. On symmetric data (equal distances are the rule,
not the exception) that alone sent Lloyd's iterations and the choice between restarts to
different local optima on different machines. Every comparison here therefore counts values
within ``TIE_RTOL`` of the scale of the problem as equal and takes the lowest cluster index,
the lowest point index or the first restart among them.

On a positive semidefinite K the winner is finished with Lloyd's iterations on K itself
(``lloyd.lloyd``, never raising the objective there), so the labels are the argmin of their
own distances under the stored sums, with the tie rule ``predict`` uses:
``predict(X_fit) == labels_`` once converged.
"""
from dataclasses import dataclass
import math
import warnings

import numpy as np

from .threads import blas_threads
from .lloyd import inner_sums, lloyd, objective

EXACT_MAX_N = 2000
# Partitions scored exhaustively when S(n, k) is at most this (n = 14, k = 2: 8191;
# n = 10, k = 3: 9330; n = 9, k = 4: 7770).
EXHAUSTIVE_MAX = 20_000
# Values closer than this times the scale of the problem are ties (see the module docstring).
TIE_RTOL = 1e-9


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
    max(4k, 32) (large n), and whether K is positive semidefinite (up to rounding)."""
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
    top = max(float(np.max(np.abs(w))), np.finfo(float).tiny)
    keep = w > 1e-12 * top
    psd = n > EXACT_MAX_N or float(w.min()) >= -1e-9 * top
    return np.ascontiguousarray(V[:, keep] * np.sqrt(w[keep])), psd


def solve(source, weights, n_clusters, rng, n_init, max_iter, init_labels=None,
          n_threads=1):
    """Every start of the embedding solver; the lowest objective on K wins (the first one
    among ties, :data:`TIE_RTOL`).

    Returns
    -------
    best : EmbedResult
    objectives : list of float
        The objective of each start (the winner's after the finishing iterations on K; one
        entry when the partitions were scored exhaustively).
    """
    n = source.n
    if init_labels is None and stirling2(n, n_clusters) <= EXHAUSTIVE_MAX:
        labels = best_partition(np.asarray(source.K, dtype=np.float64), source.diag, weights,
                                n_clusters)
        best = _finish(source, weights, _scored(source, weights, labels, n_clusters, 0, True),
                       n_clusters, max_iter, n_threads)
        return best, [best.inertia]
    A, psd = embedding(source.K, n_clusters, n_threads)
    scale = float(np.max(np.einsum("ij,ij->i", A, A))) if A.size else 0.0
    tie = TIE_RTOL * max(scale, np.finfo(float).tiny)
    best, objectives, winner = None, [], 0
    starts = 1 if init_labels is not None else n_init
    for start in range(starts):
        if init_labels is not None:
            labels = np.array(init_labels, dtype=np.int32)
        elif start == 0:
            labels = _farthest_point_labels(A, weights, n_clusters, tie)
        else:
            labels = _plusplus_labels(A, weights, n_clusters, rng, tie)
        labels, n_iter, converged = _lloyd_explicit(A, weights, labels, n_clusters, max_iter,
                                                    tie)
        result = _scored(source, weights, labels, n_clusters, n_iter, converged)
        objectives.append(result.inertia)
        if best is None or result.inertia < best.inertia - _objective_tie(source, weights):
            best, winner = result, start
    if psd:
        best = _finish(source, weights, best, n_clusters, max_iter, n_threads)
        objectives[winner] = best.inertia
    return best, objectives


def _objective_tie(source, weights):
    return TIE_RTOL * max(float(np.abs(weights @ source.diag)), np.finfo(float).tiny)


def _scored(source, weights, labels, n_clusters, n_iter, converged):
    """The labels with their sums and objective on K."""
    F = np.empty((n_clusters, source.n))
    source.full_outer_sums(labels, weights, F)
    g, W = inner_sums(F, labels, weights, n_clusters)
    return EmbedResult(labels=labels, inner_sums=g, cluster_weights=W,
                       inertia=objective(source.diag, weights, g, W), n_iter=n_iter,
                       converged=converged)


def _finish(source, weights, best, n_clusters, max_iter, n_threads):
    """Lloyd's iterations on K from the winner (tol 0: until the labels are stable), kept
    unless they end higher (they cannot on a PSD kernel, up to rounding), do not converge or
    have to refill an empty cluster (then the winner is returned as it is)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = lloyd(source, weights, best.labels, n_clusters, max_iter=max_iter, tol=0.0,
                    n_threads=n_threads)
    if (caught or not run.converged
            or run.inertia > best.inertia + _objective_tie(source, weights)):
        return best
    return EmbedResult(labels=run.labels, inner_sums=run.inner_sums,
                       cluster_weights=run.cluster_weights, inertia=run.inertia,
                       n_iter=best.n_iter + run.n_iter, converged=run.converged)


# -- exhaustive search for tiny problems ------------------------------------------------------
def stirling2(n, k):
    """S(n, k), the number of partitions of n points into k non-empty clusters."""
    if k > n:
        return 0
    return sum((-1) ** j * math.comb(k, j) * (k - j) ** n for j in range(k + 1)) // math.factorial(k)


def partitions(n, k):
    """Every partition of range(n) into k non-empty clusters as a (S(n, k), n) int32 array of
    restricted growth strings (labels in order of first appearance), in lexicographic order."""
    out = []

    def grow(prefix, used):
        i = len(prefix)
        if i == n:
            if used == k:
                out.append(tuple(prefix))
            return
        if k - used > n - i:  # not enough points left to open the remaining clusters
            return
        for c in range(min(used + 1, k)):
            prefix.append(c)
            grow(prefix, max(used, c + 1))
            prefix.pop()

    grow([], 0)
    return np.array(out, dtype=np.int32).reshape(-1, n)


def best_partition(K, diag, weights, k, chunk=2048):
    """The partition with the lowest objective Σ_i w_i K_ii − Σ_c g_c / W_c on K (the first
    in lexicographic order among objectives within :data:`TIE_RTOL`)."""
    P = partitions(K.shape[0], k)
    values = np.empty(P.shape[0])
    eye = np.eye(k)
    for p0 in range(0, P.shape[0], chunk):
        M = eye[P[p0:p0 + chunk]] * weights[None, :, None]          # (p, n, k): w_i [l_i = c]
        W = M.sum(axis=1)
        g = np.einsum("pic,pic->pc", np.einsum("ij,pjc->pic", K, M), M)
        with np.errstate(divide="ignore", invalid="ignore"):
            values[p0:p0 + chunk] = np.where(W > 0, g / W, 0.0).sum(axis=1)
    obj = float(weights @ diag) - values
    low = obj.min()
    tie = TIE_RTOL * max(abs(float(weights @ diag)), abs(low), np.finfo(float).tiny)
    return P[int(np.flatnonzero(obj <= low + tie)[0])].copy()


# -- k-means in the embedding -----------------------------------------------------------------
def _sq_dist(A, C):
    d = (A * A).sum(1)[:, None] - 2.0 * A @ C.T + (C * C).sum(1)[None, :]
    return np.maximum(d, 0.0)


def _argmin_ties(D, tie, prefer=None):
    """Per row, the lowest column within ``tie`` of the row's minimum (``prefer``: keep that
    column when it is within ``tie``, so tied points do not move)."""
    low = D.min(axis=1, keepdims=True)
    near = D <= low + tie
    labels = np.argmax(near, axis=1).astype(np.int32)
    if prefer is not None:
        stay = near[np.arange(D.shape[0]), prefer]
        labels[stay] = prefer[stay]
    return labels


def _farthest_point_labels(A, weights, k, tie):
    """A deterministic start: the point farthest from the weighted mean, then repeatedly the
    point farthest from the centres chosen so far (lowest index among ties); labels of the
    nearest centre. Points of zero weight are never chosen."""
    live = weights > 0
    mean = (weights @ A) / weights.sum()
    d = np.where(live, _sq_dist(A, mean[None, :])[:, 0], -1.0)
    centres = [_first_max(d, tie)]
    d = np.where(live, _sq_dist(A, A[centres])[:, 0], -1.0)
    for _ in range(1, k):
        nxt = _first_max(d, tie)
        centres.append(nxt)
        d = np.where(live, np.minimum(d, _sq_dist(A, A[[nxt]])[:, 0]), -1.0)
    return _argmin_ties(_sq_dist(A, A[centres]), tie)


def _first_max(d, tie):
    return int(np.flatnonzero(d >= d.max() - tie)[0])


def _plusplus_labels(A, weights, k, rng, tie):
    """Greedy weighted k-means++ centres in the embedding (2 + ⌊ln k⌋ candidates per step,
    the one lowering the potential most); labels of the nearest centre."""
    n = A.shape[0]
    p = weights / weights.sum()
    trials = 2 + int(np.log(k))
    centres = [int(rng.choice(n, p=p))]
    d = _sq_dist(A, A[centres])[:, 0]
    for _ in range(1, k):
        mass = weights * d
        total = mass.sum()
        cand = rng.choice(n, size=trials, p=mass / total if total > 0 else p)
        dc = np.minimum(d[None, :], _sq_dist(A, A[cand]).T)       # (trials, n)
        pot = dc @ weights
        best = int(np.flatnonzero(pot <= pot.min() + tie * weights.sum())[0])
        centres.append(int(cand[best]))
        d = dc[best]
    return _argmin_ties(_sq_dist(A, A[centres]), tie)


def _lloyd_explicit(A, weights, labels, k, max_iter, tie):
    """Weighted Lloyd with explicit centres until the labels are stable; a point moves only
    when another centre is nearer by more than ``tie``; an emptied cluster takes the point
    farthest from its centre."""
    labels = labels.astype(np.int32)
    for it in range(1, max_iter + 1):
        W = np.bincount(labels, weights=weights, minlength=k)
        C = np.zeros((k, A.shape[1]))
        np.add.at(C, labels, weights[:, None] * A)
        nz = W > 0
        C[nz] /= W[nz, None]
        D = _sq_dist(A, C)
        D[:, ~nz] = np.inf
        new = _argmin_ties(D, tie, prefer=np.where(nz[labels], labels, 0).astype(np.int32))
        own = D[np.arange(len(new)), new]
        for c in np.flatnonzero(~nz):
            far = int(np.argmax(np.where(weights > 0, own, -1.0)))
            new[far] = c
            own[far] = -1.0
        if np.array_equal(new, labels):
            return labels, it, True
        labels = new
    return labels, max_iter, False
