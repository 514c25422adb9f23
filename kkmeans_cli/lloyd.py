"""Lloyd's algorithm for weighted kernel k-means with incremental outer sums.

Each iteration assigns every point to its nearest centre (ties to the lowest cluster), fills
empty clusters deterministically, and updates the outer sums F: column-wise for the moved points
when few moved (cost O(n·moved)), with a full pass over K otherwise. At the end F is recomputed
from scratch and one more assignment is made, so the stored labels are exactly the argmin under
the stored sums (``predict(X_fit) == labels_``). See ``shared/spec/engine.md``.
"""
import warnings
from dataclasses import dataclass

import numpy as np

from . import _lloyd
from .kernels import KKMeansWarning

# Moves beyond this fraction of n are cheaper as a full pass than as column updates.
FULL_PASS_FRACTION = 1.0 / 3.0


@dataclass
class LloydResult:
    """The outcome of one Lloyd run.

    ``inner_sums`` and ``cluster_weights`` describe the centres the final ``labels`` were
    assigned to; they are the sums of ``labels`` themselves whenever the run converged.
    """

    labels: np.ndarray
    distances: np.ndarray
    inner_sums: np.ndarray
    cluster_weights: np.ndarray
    inertia: float
    n_iter: int
    converged: bool
    n_relocated: int
    objective_trace: list


def inner_sums(F, labels, weights, n_clusters):
    """g_c = Σ_{i∈c} w_i F[c, i] and W_c = Σ_{i∈c} w_i, from the outer sums (no pass over K)."""
    own = F[labels, np.arange(F.shape[1])]
    g = np.bincount(labels, weights=weights * own, minlength=n_clusters)
    W = np.bincount(labels, weights=weights, minlength=n_clusters)
    return g, W


def objective(diag, weights, g, W):
    """Σ_i w_i K_ii − Σ_c g_c / W_c, the inertia of labels whose sums are g, W."""
    nonempty = W > 0
    return float(weights @ diag - np.sum(g[nonempty] / W[nonempty]))


def relocate_empty_clusters(labels, distances, weights, n_clusters):
    """Move the points farthest from their centres into clusters of zero weight.

    Deterministic (scikit-learn's rule): candidates are points of positive weight, by decreasing
    distance, ties by index; a point is taken only if its cluster keeps another point of
    positive weight. Modifies ``labels`` in place and returns the number of points moved.
    """
    W = np.bincount(labels, weights=weights, minlength=n_clusters)
    empty = np.flatnonzero(W <= 0)
    if empty.size == 0:
        return 0
    members = np.bincount(labels[weights > 0], minlength=n_clusters)
    order = np.argsort(-distances, kind="stable")
    moved = 0
    for i in order:
        if moved == empty.size:
            break
        if weights[i] <= 0 or members[labels[i]] < 2:
            continue
        members[labels[i]] -= 1
        labels[i] = empty[moved]
        moved += 1
    if moved:
        warnings.warn(f"{moved} empty cluster(s) refilled with the points farthest from their "
                      "centres", KKMeansWarning, stacklevel=3)
    return moved


def lloyd(source, weights, labels, n_clusters, max_iter=300, tol=1e-4, n_threads=1):
    """Run Lloyd's iterations from ``labels`` on a kernel source.

    Parameters
    ----------
    source : kernel source (see ``kernel_source``)
    weights : ndarray of float64, shape (n,)
    labels : ndarray of int, shape (n,)
        Starting labels (not modified).
    n_clusters : int
    max_iter : int
    tol : float
        Stop when the relative change of the objective is at most ``tol`` (0: only when the
        labels stop changing).
    n_threads : int

    Returns
    -------
    LloydResult
    """
    n = source.n
    diag = source.diag
    labels = np.array(labels, dtype=np.int32)
    new_labels = np.empty(n, dtype=np.int32)
    dist = np.empty(n, dtype=np.float64)
    F = np.empty((n_clusters, n), dtype=np.float64)
    source.full_outer_sums(labels, weights, F)
    g, W = inner_sums(F, labels, weights, n_clusters)
    obj = objective(diag, weights, g, W)
    trace = [obj]
    n_iter, converged, n_relocated = 0, False, 0
    for n_iter in range(1, max_iter + 1):
        _lloyd.assign(F, g, W, diag, new_labels, dist, n_threads)
        n_relocated += relocate_empty_clusters(new_labels, dist, weights, n_clusters)
        moved = np.flatnonzero(new_labels != labels)
        if moved.size == 0:
            converged = True
            break
        if moved.size < FULL_PASS_FRACTION * n:
            source.update_outer_sums(moved, labels[moved], new_labels[moved], weights[moved], F)
            labels[moved] = new_labels[moved]
        else:
            labels, new_labels = new_labels, labels
            source.full_outer_sums(labels, weights, F)
        g, W = inner_sums(F, labels, weights, n_clusters)
        previous, obj = obj, objective(diag, weights, g, W)
        trace.append(obj)
        if tol > 0 and abs(previous - obj) <= tol * abs(previous):
            break
    # Drift-free sums, and labels that are exactly the argmin under them.
    source.full_outer_sums(labels, weights, F)
    g, W = inner_sums(F, labels, weights, n_clusters)
    _lloyd.assign(F, g, W, diag, new_labels, dist, n_threads)
    if np.any(np.bincount(new_labels, minlength=n_clusters) == 0):
        warnings.warn("the final assignment left a cluster empty", KKMeansWarning, stacklevel=2)
    return LloydResult(labels=new_labels, distances=dist, inner_sums=g, cluster_weights=W,
                       inertia=float(weights @ dist), n_iter=n_iter, converged=converged,
                       n_relocated=n_relocated, objective_trace=trace)
