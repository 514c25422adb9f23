"""Lloyd's algorithm for weighted kernel k-means with incremental outer sums.

Each iteration assigns every point to its nearest centre (ties to the lowest cluster), fills
empty clusters deterministically, and updates the outer sums F: column-wise for the moved points
when few moved (cost O(n·moved)), with a full pass over K otherwise. Convergence is confirmed
with F recomputed from scratch, so the stored labels are exactly the argmin under the stored
sums (``predict(X_fit) == labels_``) and the sums carry no drift. See ``docs/engine.md``.
"""
import warnings
from dataclasses import dataclass

import numpy as np

from . import _lloyd
from .._text import plural
from ..errors import KKMeansWarning

# An update that changes the objective by less than this (relative) while labels change is a
# cycle between tied points (e.g. more clusters than distinct points).
STALL_RTOL = 1e-13
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
    n_distances: int = 0  # point–centre distances evaluated
    # Elkan only: (upper, lower) bounds on the distances to the final centres when converged
    # (``hartigan.blocked_hartigan`` settles most points with them), and whether the run was
    # stopped at its kernel budget (``elkan(kernel_budget=...)``) before converging.
    bounds: tuple = None
    interrupted: bool = False
    # Lloyd only: F of the final labels from a full pass (k×n), for Hartigan's refinement.
    outer_sums: np.ndarray = None


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


def relocation_moves(labels, distances, weights, empty, n_clusters):
    """Which points refill the empty clusters ``empty`` (scikit-learn's rule): candidates are
    points of positive weight, by decreasing distance, ties by index; a point is taken only if
    its cluster keeps another point of positive weight. Returns ``[(point, cluster), ...]``;
    nothing is modified."""
    if len(empty) == 0:
        return []
    members = np.bincount(labels[weights > 0], minlength=n_clusters)
    moves = []
    for i in np.argsort(-distances, kind="stable"):
        if len(moves) == len(empty):
            break
        if weights[i] <= 0 or members[labels[i]] < 2:
            continue
        members[labels[i]] -= 1
        moves.append((int(i), int(empty[len(moves)])))
    return moves


def warn_relocated(moved, stacklevel):
    """The one warning of a refill (Lloyd, Elkan and the explicit-feature engine)."""
    if moved:
        warnings.warn(f"{plural(moved, 'empty cluster')} refilled with the points farthest "
                      "from their centres", KKMeansWarning, stacklevel=stacklevel + 1)


def relocate_empty_clusters(labels, distances, weights, n_clusters):
    """Move the points farthest from their centres into clusters of zero weight
    (:func:`relocation_moves`). Modifies ``labels`` in place and returns the number of points
    moved."""
    W = np.bincount(labels, weights=weights, minlength=n_clusters)
    moves = relocation_moves(labels, distances, weights, np.flatnonzero(W <= 0), n_clusters)
    for i, c in moves:
        labels[i] = c
    warn_relocated(len(moves), stacklevel=3)
    return len(moves)


def own_distances(diag, own, labels, g, W):
    """d(i, own centre) = K_ii − 2 own_i / W + g / W² (clamped at 0), with own_i the outer sum
    of point i's own cluster."""
    Wl = W[labels]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(diag - 2.0 * own / Wl + g[labels] / Wl ** 2, 0.0)


def weighted_move(weights, moved):
    """Whether a point of positive weight is among ``moved``. Moves of zero-weight points
    alone change no centre and no objective: they are not an iteration, they do not count
    towards ``max_iter`` and they are not the cycle the stall rule (``STALL_RTOL``) stops."""
    return bool(np.any(weights[moved] > 0))


def warn_not_converged(scheme, stalled, max_iter):
    why = ("the objective stopped changing while tied points kept moving" if stalled
           else f"max_iter={max_iter} was reached")
    warnings.warn(f"{scheme} did not converge ({why}); a few training points may be closer "
                  "to another centre than to their own", KKMeansWarning, stacklevel=3)


def lloyd(source, weights, labels, n_clusters, max_iter=300, tol=1e-4, n_threads=1,
          iterations_done=0):
    """Run Lloyd's iterations from ``labels`` on a kernel source until the labels are stable.

    Parameters
    ----------
    source : kernel source (see ``kernel_source``)
    weights : ndarray of float64, shape (n,)
    labels : ndarray of int, shape (n,)
        Starting labels (not modified).
    n_clusters : int
    max_iter : int
        At most this many label updates.
    tol : float
        Once the relative change of the objective is at most ``tol``, no more full passes are
        made: the last few moves are applied with incremental updates (O(n·moved) each) until
        the labels are stable. Stopping *before* they are stable would leave labels that are
        not the argmin under their own sums, so ``predict(X_fit)`` would not return them.

    Returns
    -------
    LloydResult
        ``labels`` with their own sums. When converged (the usual case) the labels are the
        argmin under those sums, computed drift-free by a final full pass.

    ``iterations_done``: label updates already made on the way to ``labels`` (by Elkan on
    kernel values in blocks, ``storage='auto'``); they count towards ``max_iter`` and
    ``n_iter``, so the run goes on as one from the original start.
    """
    n = source.n
    diag = source.diag
    labels = np.array(labels, dtype=np.int32)
    new_labels = np.empty(n, dtype=np.int32)
    dist = np.empty(n, dtype=np.float64)
    F = np.empty((n_clusters, n), dtype=np.float64)
    source.full_outer_sums(labels, weights, F)
    fresh = True  # F was computed by a full pass since the last label change
    g, W = inner_sums(F, labels, weights, n_clusters)
    obj = objective(diag, weights, g, W)
    trace = [obj]
    n_updates, n_relocated = iterations_done, 0
    converged = finishing = stalled = False
    n_distances = 0
    while True:
        _lloyd.assign(F, g, W, diag, new_labels, dist, n_threads)
        n_distances += n * int(np.count_nonzero(W > 0))
        n_relocated += relocate_empty_clusters(new_labels, dist, weights, n_clusters)
        moved = np.flatnonzero(new_labels != labels)
        if moved.size and not weighted_move(weights, moved):
            # Only points of zero weight moved: they follow the centres without changing them
            # (F, g, W and the objective stay as they are), so this is no iteration.
            labels[moved] = new_labels[moved]
            moved = moved[:0]
        if moved.size == 0:
            if fresh:
                converged = True
                break
            # Confirm with drift-free sums (not counted as an iteration).
            source.full_outer_sums(labels, weights, F)
            fresh = True
            g, W = inner_sums(F, labels, weights, n_clusters)
            continue
        if n_updates == max_iter:
            break
        n_updates += 1
        if finishing or moved.size < FULL_PASS_FRACTION * n:
            source.update_outer_sums(moved, labels[moved], new_labels[moved], weights[moved], F)
            labels[moved] = new_labels[moved]
            fresh = False
        else:
            labels, new_labels = new_labels, labels
            source.full_outer_sums(labels, weights, F)
            fresh = True
        g, W = inner_sums(F, labels, weights, n_clusters)
        previous, obj = obj, objective(diag, weights, g, W)
        trace.append(obj)
        change = abs(previous - obj)
        if change <= STALL_RTOL * abs(previous) and not n_relocated:
            # Labels change but the objective does not: ties between coinciding points.
            # (Moves of weight-0 points alone never get here: see weighted_move above.)
            stalled = True
            break
        if tol > 0 and change <= tol * abs(previous):
            finishing = True
    if not converged:
        if not fresh:
            source.full_outer_sums(labels, weights, F)
            g, W = inner_sums(F, labels, weights, n_clusters)
        dist = own_distances(diag, F[labels, np.arange(n)], labels, g, W)
        warn_not_converged("Lloyd", stalled, max_iter)
    n_iter = n_updates + 1 if converged else n_updates
    return LloydResult(labels=labels, distances=dist, inner_sums=g, cluster_weights=W,
                       inertia=float(weights @ dist), n_iter=n_iter, converged=converged,
                       n_relocated=n_relocated, objective_trace=trace,
                       n_distances=n_distances, outer_sums=F)
