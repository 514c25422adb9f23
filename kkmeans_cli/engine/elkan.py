"""Elkan's algorithm for weighted kernel k-means in feature space: exactly Lloyd, fewer sums.

Lloyd (``lloyd.py``) keeps the outer sums F[c, i] = Σ_{j∈c} w_j K_ij of *every* point current,
which costs a kernel value K_ij for every point i and every moved point j. Elkan keeps bounds on
the feature-space distances instead (C. Elkan, "Using the triangle inequality to accelerate
k-means", ICML 2003; ``docs/engine.md``, "Elkan's algorithm in feature space"):

- ``upper[i] ≥ d(i, own)``, ``lower[i, c] ≤ d(i, c)``, moved by the centre shifts each
  iteration; a point whose bounds show that no other centre can be nearer is skipped;
- the centre shifts ‖μ_c^new − μ_c^old‖ and the inner sums come from the outer sums of the
  moved points only (O(moved·k)); centre-to-centre distances from below come from the cross
  sums C[a, b] = Σ_{i∈a} w_i F[b, i] after a full pass, and otherwise from the previous ones
  less both shifts or through one representative point per cluster (``_Representatives``);
- the outer sums are brought up to date lazily: the moves since the last full pass form a log,
  and F[:, i] is replayed from the log only when point i's distances are needed. Skipped points
  cost no kernel values at all — this is what Elkan saves when K is recomputed in blocks
  (``BlockedKernel``) and, in the explicit Nyström space, a product S[c]·φ_i of O(m) per
  (point, cluster) pair that is needed.

The result is Lloyd's: the same labels, inertia and number of iterations from the same start.
Distances of the points that are evaluated use Lloyd's arithmetic and tie rule, and every bound
carries an allowance for rounding (``ERR_RTOL``), so rounding never prunes a centre that Lloyd
would choose. Kernels that are not positive semidefinite have no Euclidean feature space, so the
triangle inequality behind the bounds does not hold; the estimator refuses Elkan for them.
"""

import numpy as np

from . import _elkan, _lloyd
from .lloyd import (STALL_RTOL, LloydResult, objective, own_distances,
                    relocate_empty_clusters, warn_not_converged, weighted_move)

# Allowance for the rounding of a squared distance, relative to max K_ii. The sums carry
# relative errors near 1e-16 per operation; 1e-10 leaves a wide margin and costs nothing
# measurable in pruning (distances are compared at √1e-10 = 1e-5 of the kernel's scale).
ERR_RTOL = {np.dtype(np.float64): 1e-10,
            # A float32 kernel matrix rounds each value by ~6e-8 (relative), and the diagonal
            # (K_ii in float64 from the kernel function) does not share that rounding.
            np.dtype(np.float32): 1e-5}
# Replaying the log for the points that need distances costs this fraction of a full pass or
# more: do the full pass instead (it also resets the log).
REFRESH_FRACTION = 0.25
# The final own outer sums are replayed from the log when that costs less than this fraction
# of recomputing them from scratch (Σ_c n_c² kernel values, about half computed by symmetry).
OWN_REPLAY_FRACTION = 0.4


class MoveLog:
    """The moves since the last full pass, in order: point, source, destination, weight."""

    def __init__(self):
        self.size = 0
        self._point = np.empty(0, dtype=np.int32)
        self._src = np.empty(0, dtype=np.int32)
        self._dst = np.empty(0, dtype=np.int32)
        self._weight = np.empty(0, dtype=np.float64)

    def append(self, points, src, dst, weights):
        end = self.size + len(points)
        if end > self._point.size:
            capacity = max(end, 2 * self._point.size, 1024)
            for name in ("_point", "_src", "_dst", "_weight"):
                old = getattr(self, name)
                new = np.empty(capacity, dtype=old.dtype)
                new[:self.size] = old[:self.size]
                setattr(self, name, new)
        self._point[self.size:end] = points
        self._src[self.size:end] = src
        self._dst[self.size:end] = dst
        self._weight[self.size:end] = weights
        self.size = end

    def clear(self):
        self.size = 0

    def entries(self, start=0):
        """(point, src, dst, weight) of the entries from ``start`` on (views)."""
        return (self._point[start:self.size], self._src[start:self.size],
                self._dst[start:self.size], self._weight[start:self.size])


def cross_sums(F, labels, weights, n_clusters):
    """C[a, b] = Σ_{i∈a} w_i F[b, i] (k×k). Its diagonal is Lloyd's inner sums g, summed in
    the same order (``lloyd.inner_sums``)."""
    C = np.empty((n_clusters, n_clusters))
    for b in range(n_clusters):
        C[:, b] = np.bincount(labels, weights=weights * F[b], minlength=n_clusters)
    return C


def elkan(source, weights, labels, n_clusters, max_iter=300, tol=1e-4, n_threads=1,
          check_bounds=False, kernel_budget=None, iterations_done=0):
    """Elkan's iterations from ``labels``; same parameters and result as :func:`lloyd.lloyd`
    (``tol`` only chooses Lloyd's kind of update, so Elkan does not need it).

    ``check_bounds`` (for tests) recomputes every distance each iteration and raises
    ``AssertionError`` if a bound is violated. ``LloydResult.n_distances`` counts the
    point–centre distances evaluated; the kernel source counts kernel values.

    ``kernel_budget`` (kernel values): stop before an iteration once the source has computed
    more, or when an iteration would need a full pass or an empty-cluster refill. The result
    is then ``interrupted``: its ``labels`` are the labels after ``n_iter`` updates, exactly
    where Lloyd from the same start is after as many, so Lloyd (on the kernel matrix) can go
    on from them with ``iterations_done=n_iter`` (``KernelKMeans`` does, for
    ``storage='auto'``).
    Its sums and inertia are not computed. ``iterations_done``: as in :func:`lloyd.lloyd`.
    """
    n, k = source.n, n_clusters
    diag = source.diag
    labels = np.array(labels, dtype=np.int32)
    scale = float(np.max(np.abs(diag))) if n else 1.0
    err2 = ERR_RTOL[np.dtype(getattr(source, "dtype", np.float64))] \
        * max(scale, np.finfo(np.float64).tiny)

    # F[c, i] is current where valid[i, c] and point i has replayed the log (stamps[i]).
    F = np.zeros((k, n), dtype=np.float64)
    valid = np.zeros((n, k), dtype=np.uint8)
    mark = np.zeros((n, k), dtype=np.uint8)
    row_mark, row_need = np.zeros(n, dtype=np.uint8), np.zeros(n, dtype=np.int32)
    log, stamps = MoveLog(), np.zeros(n, dtype=np.intp)
    upper = np.empty(n, dtype=np.float64)
    lower = np.empty((n, k), dtype=np.float64)
    new_labels = np.empty(n, dtype=np.int32)
    dist = np.empty(n, dtype=np.float64)

    def full_pass():
        source.full_outer_sums(labels, weights, F)
        valid[...] = 1
        log.clear()
        stamps[:] = 0

    def exact_start():
        """Sums and tight bounds from a full pass (C exact)."""
        full_pass()
        C = cross_sums(F, labels, weights, k)
        g, W = np.diag(C).copy(), np.bincount(labels, weights=weights, minlength=k)
        _elkan.exact_bounds(F, g, W, diag, labels, err2, upper, lower, n_threads)
        return g, W, _half_centre_distances(C, g, W, err2)

    if source.replays_log:
        # No full pass: the own sums exactly, the other bounds through one representative
        # point per cluster (n·k kernel values instead of n²).
        own = source.own_outer_sums(labels, weights, k)
        F[labels, np.arange(n)] = own
        valid[np.arange(n), labels] = 1
        g = np.bincount(labels, weights=weights * own, minlength=k)
        W = np.bincount(labels, weights=weights, minlength=k)
        half_dist, reps = _bounds_from_representatives(source, labels, own, g, W, err2,
                                                       upper, lower)
    else:
        g, W, half_dist = exact_start()
    obj = objective(diag, weights, g, W)
    trace = [obj]
    shift = np.zeros(k)

    n_updates, n_relocated, n_distances = iterations_done, 0, 0
    converged = stalled = False

    def interrupted():
        return LloydResult(labels=labels.copy(), distances=None, inner_sums=None,
                           cluster_weights=None, inertia=float("nan"), n_iter=n_updates,
                           converged=False, n_relocated=n_relocated, objective_trace=trace,
                           n_distances=n_distances, interrupted=True)

    budgeted = kernel_budget is not None
    while True:
        if budgeted and source.kernel_evaluations > kernel_budget:
            return interrupted()
        # Assignment: the distances the bounds cannot exclude, with current sums.
        half_min = _half_min(half_dist)
        _elkan.update_bounds_and_mark(labels, upper, lower, shift, half_dist, half_min, W,
                                      mark, valid, row_mark, row_need, n_threads)
        if check_bounds:
            _check_bounds(source, labels, weights, g, W, upper, lower)
        points = np.flatnonzero(row_mark)
        if not _refresh_marked(source, labels, weights, points, row_need, mark, valid, stamps,
                               log, F):
            if budgeted:
                return interrupted()
            full_pass()  # cheaper than replaying the log for the marked points
        new_labels[:] = labels
        n_distances += _elkan.assign_marked(points, labels, F, g, W, diag, upper, lower,
                                            half_dist, mark, err2, new_labels, n_threads)

        relocated = 0
        if np.any(np.bincount(new_labels, weights=weights, minlength=k) <= 0):
            if budgeted:
                return interrupted()
            # An empty cluster: Lloyd refills it from every point's exact distance.
            full_pass()
            _lloyd.assign(F, g, W, diag, new_labels, dist, n_threads)
            relocated = relocate_empty_clusters(new_labels, dist, weights, k)
            n_relocated += relocated
        moved = np.flatnonzero(new_labels != labels)
        if moved.size == 0:
            converged = True
            break
        counted = weighted_move(weights, moved)  # zero-weight moves alone: no iteration
        if counted:
            if n_updates == max_iter:
                break
            n_updates += 1

        # Sums of the new labels from the outer sums of the moved points (docs/engine.md):
        # g_new[c] = g[c] + Σ_m Δ[c, m] (F_old[c, m] + F_new[c, m]), with Δ = ±w.
        src, dst, w_moved = labels[moved], new_labels[moved], weights[moved]
        columns = np.arange(moved.size)
        delta = np.zeros((k, moved.size))
        delta[dst, columns] += w_moved
        delta[src, columns] -= w_moved
        F_old = np.where(delta != 0.0, F[:, moved], 0.0)  # current: src own, dst evaluated
        old_new = g + np.einsum("cm,cm->c", delta, F_old)  # Σ_{i∈c_new} w_i F_old[c, i]
        g_old, W_old = g, W
        labels[moved] = dst
        valid[moved, dst] = 1
        source.record_moves(moved, src, dst, w_moved)
        if relocated:
            g, W, half_dist = exact_start()
            shift = np.zeros(k)
            if source.replays_log:  # the centres jumped: new representatives
                reps = _Representatives.choose(source, labels, upper, W, err2)
        else:
            log.append(moved, src, dst, w_moved)
            if source.replays_log:
                replay_log(source, moved, stamps, log, F)
            else:
                source.pair_sums(np.concatenate([moved, moved]), np.concatenate([src, dst]),
                                 labels, weights, F)
            F_new = np.where(delta != 0.0, F[:, moved], 0.0)
            g = g + np.einsum("cm,cm->c", delta, F_old + F_new)
            W = np.bincount(labels, weights=weights, minlength=k)
            shift = _centre_shifts(g, W, g_old, W_old, old_new, err2)
            # Centre distances from below: the old ones less both shifts, or through the
            # representatives, whichever is larger.
            half_dist = np.maximum(half_dist - 0.5 * (shift[:, None] + shift[None, :]), 0.0)
            if source.replays_log:
                half_dist = np.maximum(half_dist, reps.half_distances(labels, upper, shift))
            else:
                sq = source.centre_sq_distances(W)
                half_dist = np.maximum(half_dist, 0.5 * np.sqrt(np.maximum(sq - err2, 0.0)))
            half_dist[W <= 0, :] = np.inf
            half_dist[:, W <= 0] = np.inf

        if not counted:
            continue
        previous, obj = obj, objective(diag, weights, g, W)
        trace.append(obj)
        if abs(previous - obj) <= STALL_RTOL * abs(previous) and not n_relocated:
            stalled = True
            break

    # Final sums and every point's distance to its own centre: the own outer sums replayed
    # from the log where that is cheaper than recomputing them (Σ n_c² kernel values).
    own = _final_own_sums(source, labels, weights, k, stamps, log, F)
    g = np.bincount(labels, weights=weights * own, minlength=k)
    W = np.bincount(labels, weights=weights, minlength=k)
    dist = own_distances(diag, own, labels, g, W)
    if not converged:
        warn_not_converged("Elkan", stalled, max_iter)
    n_iter = n_updates + 1 if converged else n_updates
    return LloydResult(labels=labels, distances=dist, inner_sums=g, cluster_weights=W,
                       inertia=float(weights @ dist), n_iter=n_iter, converged=converged,
                       n_relocated=n_relocated, objective_trace=trace,
                       n_distances=n_distances, bounds=(upper, lower) if converged else None)


def _final_own_sums(source, labels, weights, n_clusters, stamps, log, F):
    """Σ_{j∈own cluster} w_j K_ij for every point: F[labels_i, i] is current up to the log
    for every point (own sums at the start, a move's destination sum was evaluated, a full
    pass makes all current), so replaying the log gives it with Σ_i (log size − stamp_i)
    kernel values; from scratch it costs Σ_c n_c² (about half of that computed, by symmetry).
    The cheaper is taken; either is exact up to the rounding of the sums."""
    n = labels.size
    if not source.replays_log:
        return source.own_outer_sums(labels, weights, n_clusters)
    sizes = np.bincount(labels, minlength=n_clusters).astype(np.float64)
    replay = float(np.sum(log.size - stamps))
    if replay >= OWN_REPLAY_FRACTION * float(sizes @ sizes):
        return source.own_outer_sums(labels, weights, n_clusters)
    replay_log(source, np.arange(n), stamps, log, F)
    return F[labels, np.arange(n)]


def replay_log(source, points, stamps, log, F):
    """F[:, i] of the given points brought up to date with the log of moves."""
    if source.replays_log:
        points = points[stamps[points] < log.size]
        source.refresh_outer_sums(points, stamps, log, F)
        stamps[points] = log.size


def _refresh_marked(source, labels, weights, points, row_need, mark, valid, stamps, log, F):
    """Make F current at every marked pair of the marked ``points``: replay the log for
    them, then sums from scratch for marked pairs never computed. Returns False (and does
    nothing) when that would cost more than ``REFRESH_FRACTION`` of a full pass."""
    n, k = mark.shape
    if source.replays_log:
        need_points, need_clusters = _elkan.needed_pairs(points, row_need, mark, valid)
        stale = points[stamps[points] < log.size]
        sizes = np.bincount(labels, minlength=k)
        cost = float(np.sum(log.size - stamps[stale])) + float(np.sum(sizes[need_clusters]))
        if cost > REFRESH_FRACTION * float(n) * n:
            return False
        replay_log(source, stale, stamps, log, F)
    else:
        need_points, need_clusters = _elkan.needed_pairs(points, np.full(n, k, np.int32), mark,
                                                         np.zeros_like(mark))
        if need_points.size > REFRESH_FRACTION * n * k:
            return False
    source.pair_sums(need_points, need_clusters, labels, weights, F)
    valid[need_points, need_clusters] = 1
    return True


class _Representatives:
    """One member p_c per cluster, chosen at the start, for centre distances from below:
    d(μ_a, μ_b) ≥ d(p_a, p_b) − r_a − r_b with r_c ≥ ‖μ_c − p_c‖, kept by the triangle
    inequality (r_c grows by the centre's shift) and tightened by p_c's upper bound while
    p_c stays in c. O(k) per iteration; d(p_a, p_b) is computed once."""

    def __init__(self, clusters, points, between, radius):
        self.clusters, self.points = clusters, points
        self.between, self.radius = between, radius

    @classmethod
    def choose(cls, source, labels, upper, W, err2):
        """Representatives for bounds ``upper`` that are current (k² kernel values)."""
        clusters, points = _representatives(labels, upper, W)
        R = source.submatrix(points)
        d = np.diag(R)
        between = np.sqrt(np.maximum(d[:, None] + d[None, :] - 2.0 * R - err2, 0.0))
        return cls(clusters, points, between, upper[points].copy())

    def half_distances(self, labels, upper, shift):
        """Call after the moves, before the bounds are moved by ``shift``."""
        c, p = self.clusters, self.points
        r = self.radius + shift[c]
        inside = labels[p] == c
        r[inside] = np.minimum(r[inside], upper[p[inside]] + shift[c[inside]])
        self.radius = r
        half = np.zeros((shift.size, shift.size))
        half[np.ix_(c, c)] = 0.5 * np.maximum(self.between - r[:, None] - r[None, :], 0.0)
        return half


def _representatives(labels, upper, W):
    """Per non-empty cluster, the member with the smallest upper bound (ties by index)."""
    order = np.lexsort((np.arange(labels.size), upper, labels))
    first = np.searchsorted(labels[order], np.arange(W.size))
    present = np.flatnonzero((W > 0) & (first < labels.size))
    present = present[labels[order[first[present]]] == present]
    return present, order[first[present]]


def _bounds_from_representatives(source, labels, own, g, W, err2, upper, lower):
    """Starting bounds from the own outer sums only (no full pass).

    The own distances are exact (upper and lower for the own cluster); for the others,
    d(i, μ_c) ≥ d(i, p_c) − ‖μ_c − p_c‖ with p_c the member of c nearest its centre, from
    the k kernel rows of the representatives. Returns the half centre distances from below
    and the :class:`_Representatives`.
    """
    n, k = lower.shape
    Ws = np.where(W > 0, W, 1.0)
    Wl = Ws[labels]
    d2 = np.maximum(source.diag - 2.0 * own / Wl + g[labels] / Wl ** 2, 0.0)
    upper[:] = np.sqrt(d2 + err2)
    clusters, reps = _representatives(labels, upper, W)
    R = source.rows(reps)  # k×n kernel rows
    dp2 = source.diag[None, :] + source.diag[reps][:, None] - 2.0 * R
    dp = np.sqrt(np.maximum(dp2 - err2, 0.0))
    r = upper[reps]
    lower_t = np.maximum(dp - r[:, None], 0.0)
    if clusters.size == k:
        lower[...] = lower_t.T
    else:
        lower[:] = np.inf  # empty clusters: never a candidate
        lower[:, clusters] = lower_t.T
    lower[np.arange(n), labels] = np.sqrt(np.maximum(d2 - err2, 0.0))
    half = np.full((k, k), np.inf)
    between = dp[:, reps]
    half[np.ix_(clusters, clusters)] = 0.5 * np.maximum(between - r[:, None] - r[None, :], 0.0)
    return half, _Representatives(clusters, reps, between, r)


def _half_min(half_dist):
    others = half_dist.copy()
    np.fill_diagonal(others, np.inf)
    return others.min(axis=1)


def _centre_shifts(g, W, g_old, W_old, old_new, err2):
    """Upper bounds on ‖μ_c^new − μ_c^old‖ from the sums (docs/engine.md):
    g_new/W_new² − 2·old_new/(W_new·W_old) + g_old/W_old², plus the rounding allowance."""
    ok = (W > 0) & (W_old > 0)
    Wn, Wo = np.where(ok, W, 1.0), np.where(ok, W_old, 1.0)
    sq = g / Wn ** 2 - 2.0 * old_new / (Wn * Wo) + g_old / Wo ** 2
    return np.where(ok, np.sqrt(np.maximum(sq, 0.0) + err2), 0.0)


def _half_centre_distances(C, g, W, err2):
    """½ d(μ_a, μ_b) from below (k×k; +inf for empty clusters), from the cross sums."""
    ok = W > 0
    Ws = np.where(ok, W, 1.0)
    norms = g / Ws ** 2
    sq = norms[:, None] + norms[None, :] - 2.0 * C / np.outer(Ws, Ws)
    half = 0.5 * np.sqrt(np.maximum(sq - err2, 0.0))
    half[~ok, :] = np.inf
    half[:, ~ok] = np.inf
    return half


def _check_bounds(source, labels, weights, g, W, upper, lower):
    """Every distance recomputed from scratch against the bounds (tests only)."""
    k, n = lower.shape[1], source.n
    counter = getattr(source, "kernel_evaluations", None)
    F = np.empty((k, n))
    source.full_outer_sums(labels, weights, F)
    if counter is not None:
        source.kernel_evaluations = counter
    D = np.empty((n, k))
    _lloyd.distances(F, g, W, source.diag, D, 1)
    D = np.sqrt(D)
    own = D[np.arange(n), labels]
    if np.any(own > upper):
        i = int(np.argmax(own - upper))
        raise AssertionError(f"upper bound violated at point {i}: {upper[i]} < {own[i]}")
    live = np.isfinite(D)
    if np.any(lower[live] > D[live]):
        i, c = np.unravel_index(np.argmax(np.where(live, lower - D, -np.inf)), D.shape)
        raise AssertionError(f"lower bound violated at point {i}, cluster {c}: "
                             f"{lower[i, c]} > {D[i, c]}")
