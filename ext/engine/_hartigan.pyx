# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Hartigan's single-point moves for weighted kernel k-means, through the kernel matrix K.

Notation as in ``_lloyd.pyx``: outer sums F[c, i] = Σ_{j∈c} w_j K_ij, inner sums
g_c = Σ_{i∈c} w_i F[c, i], cluster weights W_c, squared distance
d(i, c) = K_ii − 2 F[c, i]/W_c + g_c/W_c² (here *not* clamped: the move test must use the exact
objective Σ_i w_i K_ii − Σ_c g_c/W_c).

Moving point i (weight w) from cluster a to cluster b changes the objective by

    Δ = w·W_b/(W_b + w)·d(i, b) − w·W_a/(W_a − w)·d(i, a)

(the first term is the cost of adding i to b, the second the saving of removing it from a; for
W_b = 0 the first term is 0). A move is made when Δ < −min_gain; then, with F before the update,

    g_a ← g_a − 2w F[a, i] + w² K_ii      g_b ← g_b + 2w F[b, i] + w² K_ii
    W_a ← W_a − w                          W_b ← W_b + w
    F[a, :] −= w K[i, :]                   F[b, :] += w K[i, :]        (O(n) per move)

Points are visited in index order, so the result is deterministic. The sweep is sequential (each
move changes the sums the next test reads): one thread.
"""
from cython cimport floating


def hartigan_sweeps(const floating[:, ::1] K, const double[::1] diag,
                    const double[::1] weights, int[::1] labels, double[:, ::1] F,
                    double[::1] g, double[::1] W, Py_ssize_t[::1] members, double min_gain,
                    Py_ssize_t max_sweeps):
    """Sweep over the points, moving each to the cluster that lowers the objective most,
    until a whole sweep makes no move or ``max_sweeps`` sweeps were made.

    ``labels``, ``F``, ``g``, ``W`` and ``members`` (points of positive weight per cluster)
    are updated in place. A point that is the last one of positive weight in its cluster
    stays (no cluster is emptied); points of zero weight do not change the objective and are
    left to the assignment step.

    Returns
    -------
    (n_moves, n_sweeps, gain) : (int, int, float)
        ``gain`` is the total decrease of the objective, Σ −Δ over the moves.
    """
    cdef Py_ssize_t n = K.shape[0], k = F.shape[0]
    cdef Py_ssize_t i, j, c, sweep, n_sweeps = 0, n_moves = 0, moved_now
    cdef int a, b
    cdef double w, kii, kii_stored, da, db, cost, best, remove, gain = 0.0
    with nogil:
        for sweep in range(max_sweeps):
            n_sweeps += 1
            moved_now = 0
            for i in range(n):
                w = weights[i]
                if w <= 0.0:
                    continue
                a = labels[i]
                if members[a] < 2 or W[a] - w <= 0.0:
                    continue
                kii = diag[i]
                da = kii - 2.0 * F[a, i] / W[a] + g[a] / (W[a] * W[a])
                remove = w * W[a] / (W[a] - w) * da
                best = 0.0
                b = -1
                for c in range(k):
                    if c == a:
                        continue
                    if W[c] > 0.0:
                        db = kii - 2.0 * F[c, i] / W[c] + g[c] / (W[c] * W[c])
                        cost = w * W[c] / (W[c] + w) * db - remove
                    else:
                        cost = -remove
                    if cost < best:
                        best = cost
                        b = <int> c
                if b < 0 or best >= -min_gain:
                    continue
                kii_stored = K[i, i]
                g[a] = g[a] - 2.0 * w * F[a, i] + w * w * kii_stored
                g[b] = g[b] + 2.0 * w * F[b, i] + w * w * kii_stored
                W[a] -= w
                W[b] += w
                members[a] -= 1
                members[b] += 1
                for j in range(n):
                    F[a, j] -= w * K[i, j]
                    F[b, j] += w * K[i, j]
                labels[i] = b
                gain -= best
                moved_now += 1
            n_moves += moved_now
            if moved_now == 0:
                break
    return n_moves, n_sweeps, gain
