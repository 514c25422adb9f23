"""Hartigan's refinement of a converged kernel k-means result.

After Lloyd has converged, single points are moved while a move lowers the exact objective
(``_hartigan.pyx`` gives the O(k) test and the update of the outer sums). Only points near
a boundary can move: the sweeps run on the points whose move pays at the current sums
(their outer sums exact, from the kernel rows of the candidates that Elkan's bounds or
Lloyd's exact distances leave), with the kernel block of those points; the moves widen the
other points' bounds by the centre shifts, which gives the next candidates
(:func:`blocked_hartigan`). So no kernel matrix is needed, and the kernel matrix and the
blocked kernel make the same moves. Lloyd then runs again from the result, and the two
alternate until Hartigan finds no move, so the final labels are a Lloyd fixed point
(``predict(X_fit) == labels_``) and a Hartigan optimum. The objective never increases: if
a round ends higher (possible only for kernels that are not PSD, where a Lloyd step may
increase it) the best labels seen are kept.
"""
import numpy as np

from . import _hartigan
from .elkan import ERR_RTOL, MoveLog, replay_log
from .lloyd import inner_sums

MAX_SWEEPS = 50               # Hartigan sweeps per round
MAX_ROUNDS = 20               # Lloyd ↔ Hartigan rounds
MIN_GAIN_RTOL = 1e-10         # a move must gain more than this × Σ w_i K_ii
# Blocked Hartigan (no kernel matrix): sweeps over at most this many points near a boundary,
# with their kernel block K(S, S) (4096² float64: 134 MB)
HARTIGAN_BLOCK_POINTS = 4096


def hartigan(source, weights, labels, n_clusters, n_threads=1, outer_sums=None):
    """Hartigan sweeps from ``labels`` (fresh sums from one full pass, or ``outer_sums``:
    F of exactly these labels from a full pass on this source, e.g. Lloyd's final one).

    Returns
    -------
    labels : ndarray of int32
    n_moves : int
    gain : float
        Decrease of the objective.
    """
    n = source.n
    labels = np.array(labels, dtype=np.int32)
    if outer_sums is not None:
        F = np.array(outer_sums, dtype=np.float64, order="C")  # a copy: the sweeps change it
    else:
        F = np.empty((n_clusters, n), dtype=np.float64)
        source.full_outer_sums(labels, weights, F)
    g, W = inner_sums(F, labels, weights, n_clusters)
    members = np.bincount(labels[weights > 0], minlength=n_clusters).astype(np.intp)
    min_gain = MIN_GAIN_RTOL * max(float(np.abs(weights @ source.diag)), 1e-300)
    n_moves, _, gain = _hartigan.hartigan_sweeps(source.K, source.diag, weights, labels, F,
                                                 g, W, members, min_gain, MAX_SWEEPS)
    return labels, int(n_moves), float(gain)


def _move_costs(F, diag, weights, labels, g, W, points):
    """Hartigan's change of the objective for the best move of each of ``points`` (p,) and
    that move's cluster, from their exact outer sums ``F`` (k×p): Δ = w·W_b/(W_b + w)·d(i, b)
    − w·W_a/(W_a − w)·d(i, a) as in ``_hartigan.pyx`` (+inf where i may not move: zero
    weight, the last member of its cluster)."""
    k = W.size
    p = np.arange(points.size)
    a = labels[points]
    w, Wa = weights[points, None], W[a][:, None]
    Ws = np.where(W > 0, W, 1.0)
    d = diag[points, None] - 2.0 * F.T / Ws + g / Ws ** 2                       # (p, k)
    own = d[p, a][:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        remove = np.where(Wa - w > 0, w * Wa / (Wa - w) * own, np.nan)
    cost = np.where(W > 0, w * W / (W + w) * d, 0.0) - remove
    cost[p, a] = np.inf
    members = np.bincount(labels[weights > 0], minlength=k)
    stuck = (weights[points] <= 0) | (members[a] < 2) | ~np.isfinite(remove[:, 0])
    cost[stuck] = np.inf
    best = np.argmin(cost, axis=1)
    return cost[p, best], best


class ExactSums:
    """Exact outer sums F[:, i] of the points the rounds of one :func:`blocked_hartigan`
    call ask for (the sweeps between two Lloyd runs), kept across those rounds: a point's
    column is computed from scratch once (``source.outer_sums_of``, n kernel values), then
    brought up to date only when asked again, by replaying the moves made since (Elkan's
    :class:`~kkmeans_cli.engine.elkan.MoveLog`, ``source.refresh_outer_sums``: one kernel
    value per move), or computed afresh when more than n moves behind. A round that moves a
    few points thus costs a few kernel values per candidate, not the candidates' sums again.
    Memory: one k×n float64 array."""

    def __init__(self, source, weights, n_clusters, n):
        self.source, self.weights, self.k = source, weights, n_clusters
        self.F = np.zeros((n_clusters, n))
        self.known = np.zeros(n, dtype=bool)
        self.stamps = np.zeros(n, dtype=np.intp)
        self.log = MoveLog()

    def set(self, points, F):
        """Columns ``F`` (k×p) of ``points``, exact for the current labels."""
        self.F[:, points] = F
        self.known[points] = True
        self.stamps[points] = self.log.size

    def of(self, points, labels):
        """F[:, points] (k×p), exact for ``labels`` (the labels after every move recorded):
        the moves since replayed, or the sums computed afresh where that is cheaper (never
        asked for, or more than n moves behind)."""
        fresh = ~self.known[points] | (self.log.size - self.stamps[points] > self.F.shape[1])
        new = points[fresh]
        replay_log(self.source, points[~fresh], self.stamps, self.log, self.F)
        if new.size:
            self.set(new, self.source.outer_sums_of(new, labels, self.weights, self.k))
        return self.F[:, points]

    def moved(self, points, src, dst):
        """Record that ``points`` moved from ``src`` to ``dst``."""
        self.log.append(points, src, dst, self.weights[points])


def _bound_candidates(weights, labels, g, W, bounds, n_clusters):
    """Points whose Hartigan move the bounds (upper ≥ √d(i, a), lower ≤ √d(i, b), with
    rounding allowances) do not rule out, for the clusters ``labels``, ``g``, ``W``."""
    upper, lower = bounds
    n = labels.size
    members = np.bincount(labels[weights > 0], minlength=n_clusters)
    Wa = W[labels]
    movable = (weights > 0) & (members[labels] >= 2) & (Wa - weights > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        remove = np.where(movable, Wa / (Wa - weights) * upper ** 2, -np.inf)
        add = W[None, :] / (W[None, :] + weights[:, None]) * lower ** 2
    add[:, W <= 0] = -np.inf
    add[np.arange(n), labels] = np.inf
    return np.flatnonzero(add.min(axis=1) < remove)


def _centre_shifts(F0, points, labels0, labels, weights, g0, W0, g, W, err2):
    """‖μ_c − μ_c⁰‖ (upper bounds, with the rounding allowance) between the clusters
    ``labels0`` (sums g0, W0) and ``labels``, which differ only at ``points``; F0 (k×p) are
    the outer sums of those points for ``labels0``: Σ_{i∈c, j∈c⁰} w_i w_j K_ij =
    g0_c + Σ_{i moved into c} w_i F0[c, i] − Σ_{i moved out of c} w_i F0[c, i]."""
    k = W.size
    moved = np.flatnonzero(labels0[points] != labels[points])
    cross = g0.copy()
    if moved.size:
        i, w = points[moved], weights[points[moved]]
        np.add.at(cross, labels[i], w * F0[labels[i], moved])
        np.subtract.at(cross, labels0[i], w * F0[labels0[i], moved])
    ok = (W > 0) & (W0 > 0)
    Wn, Wo = np.where(ok, W, 1.0), np.where(ok, W0, 1.0)
    sq = g / Wn ** 2 - 2.0 * cross / (Wn * Wo) + g0 / Wo ** 2
    shift = np.where(ok, np.sqrt(np.maximum(sq, 0.0) + err2), np.inf)
    shift[(W <= 0) & (W0 <= 0)] = 0.0
    return shift[:k]


def blocked_hartigan(source, weights, result, n_clusters, max_points=HARTIGAN_BLOCK_POINTS):
    """Hartigan sweeps from a converged ``result`` without the kernel matrix, until no point
    can move (the same end as :func:`hartigan` on K: a Hartigan optimum).

    Only points near a boundary can move: those that Elkan's bounds do not settle (every
    point after Lloyd, whose final outer sums are exact). Their outer sums are computed
    exactly (``source.outer_sums_of``: n kernel values in blocks per point, once; a point
    asked for again in a later round replays the moves made since, :class:`ExactSums`),
    their best moves tested as Hartigan's sweep does, and the sweeps run, in index order, on the
    ``max_points`` of them with the lowest move cost, with the kernel block K(S, S) of those
    points: a move of i updates F[:, S] by w·K(i, S) only. The moves shift the centres; the
    bounds of the other points are widened by those shifts (as Elkan does), which gives the
    next candidates, until the candidates' exact costs show no move. When none can move, no
    point can (the others are ruled out by the bounds or have higher costs).

    Returns
    -------
    labels : ndarray of int32
    n_moves : int
    gain : float
    """
    n = result.labels.size
    labels = np.array(result.labels, dtype=np.int32)
    g = np.array(result.inner_sums, dtype=np.float64)
    W = np.array(result.cluster_weights, dtype=np.float64)
    diag = source.diag
    min_gain = MIN_GAIN_RTOL * max(float(np.abs(weights @ diag)), 1e-300)
    err2 = ERR_RTOL[np.dtype(getattr(source, "dtype", np.float64))] \
        * max(float(np.max(np.abs(diag))), np.finfo(np.float64).tiny)
    outer = getattr(result, "outer_sums", None)
    sums = ExactSums(source, weights, n_clusters, n)
    if result.bounds is not None and result.converged:
        upper, lower = (np.array(b, dtype=np.float64) for b in result.bounds)
    else:       # exact distances of every point bound them tightly
        F = np.asarray(outer, dtype=np.float64) if outer is not None else \
            source.outer_sums_of(np.arange(n), labels, weights, n_clusters)
        sums.set(np.arange(n), F)
        Ws = np.where(W > 0, W, 1.0)
        D = np.sqrt(np.maximum(diag[None, :] - 2.0 * F / Ws[:, None]
                               + (g / Ws ** 2)[:, None], 0.0)).T
        upper, lower = np.sqrt(D[np.arange(n), labels] ** 2 + err2), np.sqrt(
            np.maximum(D ** 2 - err2, 0.0))
        lower[:, W <= 0] = 0.0
    points = _bound_candidates(weights, labels, g, W, (upper, lower), n_clusters)
    F = sums.of(points, labels)
    total_moves, total_gain = 0, 0.0
    for _ in range(MAX_SWEEPS):
        if points.size == 0:
            break
        cost, _ = _move_costs(F, diag, weights, labels, g, W, points)
        if not np.any(cost < -min_gain):
            break
        keep = np.flatnonzero(cost < -min_gain)
        if keep.size > max_points:
            keep = np.sort(keep[np.argsort(cost[keep], kind="stable")[:max_points]])
        S = points[keep]
        F0 = np.ascontiguousarray(F[:, keep])
        labels0, g0, W0 = labels.copy(), g.copy(), W.copy()
        F_S, labels_S = F0.copy(), np.ascontiguousarray(labels[S])
        members = np.bincount(labels[weights > 0], minlength=n_clusters).astype(np.intp)
        moves, _, gain = _hartigan.hartigan_sweeps(
            source.submatrix(S), np.ascontiguousarray(diag[S]),
            np.ascontiguousarray(weights[S]), labels_S, F_S, g, W, members, min_gain,
            MAX_SWEEPS)
        labels[S] = labels_S
        total_moves += int(moves)
        total_gain += float(gain)
        if moves == 0:
            break
        moved = S[labels_S != labels0[S]]
        sums.moved(moved, labels0[moved], labels[moved])
        sums.set(S, F_S)           # the sweeps kept the sums of S exact
        # Widen every bound by the centre shifts; the moved points are exact again.
        shift = _centre_shifts(F0, S, labels0, labels, weights, g0, W0, g, W, err2)
        upper += shift[labels0]
        lower = np.maximum(lower - shift[None, :], 0.0)
        Ws = np.where(W > 0, W, 1.0)
        D = np.sqrt(np.maximum(diag[S, None] - 2.0 * F_S.T / Ws + g / Ws ** 2, 0.0))
        upper[S] = np.sqrt(D[np.arange(S.size), labels_S] ** 2 + err2)
        lower[S] = np.sqrt(np.maximum(D ** 2 - err2, 0.0))
        points = _bound_candidates(weights, labels, g, W, (upper, lower), n_clusters)
        F = sums.of(points, labels)
    return labels, total_moves, total_gain


def refine(source, weights, result, n_clusters, iterate, n_threads=1):
    """Alternate Hartigan moves and Lloyd (``iterate(start) → result``) from a converged
    result until Hartigan finds no move. Never returns a higher objective than it was given.

    Returns
    -------
    result : the final iteration result (a Lloyd fixed point)
    stats : dict
        ``refine_moves``, ``refine_rounds`` and ``refine_gain`` (objective decrease). The
        result's ``n_iter`` counts the Lloyd iterations of every round.
    """
    stats = {"refine_moves": 0, "refine_rounds": 0, "refine_gain": 0.0}
    if n_clusters < 2 or source.explicit_features:
        return result, stats          # nothing to move for k = 1; explicit features: none
    best = result
    start_inertia = result.inertia
    total_iter = result.n_iter
    for _ in range(MAX_ROUNDS):
        held = source.current
        labels, moves, _gain = blocked_hartigan(held, weights, result, n_clusters)
        stats["refine_rounds"] += 1
        if moves == 0:
            break
        stats["refine_moves"] += moves
        result = iterate(labels)
        total_iter += result.n_iter
        if result.inertia < best.inertia:
            best = result
        else:
            break
    stats["refine_gain"] = float(start_inertia - best.inertia)
    best.n_iter = total_iter
    return best, stats
