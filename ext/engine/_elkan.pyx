# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Elkan's bounds for weighted kernel k-means in feature space (driven by
``kkmeans_cli/engine/elkan.py``).

Bounds are on true (not squared) feature-space distances: ``upper[i] ≥ d(i, own)`` and
``lower[i, c] ≤ d(i, c)``. Squared distances use Lloyd's arithmetic
(``K_ii − 2 F[c, i] / W_c + g_c / W_c²``, clamped at 0, see ``_lloyd.pyx``), so a point whose
distances are evaluated gets Lloyd's label, ties to the lowest cluster. ``err2`` is an absolute
allowance for the rounding of a squared distance: upper bounds are ``√(d² + err2)``, lower
bounds ``√(max(d² − err2, 0))``, so a bound is never violated by rounding.

Each thread owns whole points, so results do not depend on the number of threads.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport sqrt, INFINITY

import numpy as np

from _common cimport centre_terms, sq_dist  # ext/engine/_common.pxd, on the include path


def update_bounds_and_mark(const int[::1] labels, double[::1] upper, double[:, ::1] lower,
                           const double[::1] shift, const double[:, ::1] half_dist,
                           const double[::1] half_min, const double[::1] cluster_weights,
                           unsigned char[:, ::1] mark, const unsigned char[:, ::1] valid,
                           unsigned char[::1] row_mark, int[::1] row_need, int n_threads):
    """Move the bounds by the centre shifts, then mark the distances that may be needed.

    ``upper[i] += shift[own]``, ``lower[i, c] −= shift[c]`` (at least 0). A point is skipped
    when ``upper[i] ≤ half_min[own]`` (half the distance from its centre to the nearest other
    centre). Otherwise ``mark[i, c] = 1`` for every other non-empty cluster c with
    ``upper[i] > lower[i, c]`` and ``upper[i] > half_dist[own, c]``, and for the own cluster
    when any other is marked (its distance makes the upper bound tight). ``row_mark[i]``
    says whether point i has marks, ``row_need[i]`` how many of them are not ``valid`` (their
    sums were never computed). Returns the number of marked points.
    """
    cdef Py_ssize_t n = labels.shape[0], k = lower.shape[1]
    cdef Py_ssize_t i, c
    cdef int a, any_marked, need
    cdef double u, lo
    cdef Py_ssize_t n_marked = 0
    with nogil:
        for i in prange(n, num_threads=n_threads, schedule="static"):
            a = labels[i]
            u = upper[i] + shift[a]
            upper[i] = u
            any_marked = 0
            need = 0
            for c in range(k):
                lo = lower[i, c] - shift[c]
                lo = lo if lo > 0.0 else 0.0
                lower[i, c] = lo
                mark[i, c] = 0
                if (c != a and cluster_weights[c] > 0.0 and u > half_min[a] and u > lo
                        and u > half_dist[a, c]):
                    mark[i, c] = 1
                    any_marked = 1
                    need = need + (valid[i, c] == 0)
            if any_marked:
                mark[i, a] = 1
                need = need + (valid[i, a] == 0)
                n_marked += 1
            row_mark[i] = any_marked
            row_need[i] = need
    return n_marked


def needed_pairs(const Py_ssize_t[::1] rows, const int[::1] row_need,
                 const unsigned char[:, ::1] mark, const unsigned char[:, ::1] valid):
    """The marked pairs (i, c) that are not valid, for the given rows: (points, clusters).
    ``row_need[i]`` bounds their number in row i (exact from :func:`update_bounds_and_mark`)."""
    import numpy as np
    cdef Py_ssize_t total = 0, r, i, c, p = 0, k = mark.shape[1]
    for r in range(rows.shape[0]):
        total += row_need[rows[r]]
    points_arr = np.empty(total, dtype=np.intp)
    clusters_arr = np.empty(total, dtype=np.intp)
    cdef Py_ssize_t[::1] points = points_arr
    cdef Py_ssize_t[::1] clusters = clusters_arr
    with nogil:
        for r in range(rows.shape[0]):
            i = rows[r]
            if row_need[i] == 0:
                continue
            for c in range(k):
                if mark[i, c] and not valid[i, c]:
                    points[p] = i
                    clusters[p] = c
                    p += 1
    return points_arr[:p], clusters_arr[:p]


def assign_marked(const Py_ssize_t[::1] points, const int[::1] labels,
                  const double[:, ::1] F, const double[::1] inner_sums,
                  const double[::1] cluster_weights, const double[::1] diag,
                  double[::1] upper, double[:, ::1] lower, const double[:, ::1] half_dist,
                  const unsigned char[:, ::1] mark, double err2, int[::1] labels_out,
                  int n_threads):
    """Elkan's assignment of the given points, whose marked outer sums F[c, i] are current.

    The own distance is evaluated (the upper bound becomes tight); every other marked
    cluster that the bounds cannot exclude is evaluated against the best so far (an unmarked
    one was excluded by larger bounds). Returns the number of point–centre distances
    evaluated.
    """
    cdef Py_ssize_t n_points = points.shape[0], k = F.shape[0]
    cdef Py_ssize_t p, i, c
    cdef int a, best_c
    cdef double best, d2, u
    cdef Py_ssize_t n_eval = 0
    cdef double[::1] lin = np.empty(cluster_weights.shape[0])
    cdef double[::1] shift = np.empty(cluster_weights.shape[0])
    centre_terms(inner_sums, cluster_weights, &lin[0], &shift[0])
    with nogil:
        for p in prange(n_points, num_threads=n_threads, schedule="static"):
            i = points[p]
            a = labels[i]
            d2 = sq_dist(diag[i], lin[a], F[a, i], shift[a])
            n_eval += 1
            best = d2
            best_c = a
            u = sqrt(d2 + err2)
            lower[i, a] = sqrt(d2 - err2) if d2 > err2 else 0.0
            for c in range(k):
                if c == a or not mark[i, c] or shift[c] == INFINITY:
                    continue
                if u <= lower[i, c] or u <= half_dist[best_c, c]:
                    continue
                d2 = sq_dist(diag[i], lin[c], F[c, i], shift[c])
                n_eval += 1
                lower[i, c] = sqrt(d2 - err2) if d2 > err2 else 0.0
                if d2 < best or (d2 == best and c < best_c):
                    best = d2
                    best_c = <int> c
                    u = sqrt(d2 + err2)
            upper[i] = u
            labels_out[i] = best_c
    return n_eval


def exact_bounds(const double[:, ::1] F, const double[::1] inner_sums,
                 const double[::1] cluster_weights, const double[::1] diag,
                 const int[::1] labels, double err2, double[::1] upper, double[:, ::1] lower,
                 int n_threads):
    """Tight bounds from current outer sums of every point: upper for the given labels."""
    cdef Py_ssize_t n = F.shape[1], k = F.shape[0]
    cdef Py_ssize_t i, c
    cdef double d2
    cdef double[::1] lin = np.empty(cluster_weights.shape[0])
    cdef double[::1] shift = np.empty(cluster_weights.shape[0])
    centre_terms(inner_sums, cluster_weights, &lin[0], &shift[0])
    with nogil:
        for i in prange(n, num_threads=n_threads, schedule="static"):
            for c in range(k):
                if shift[c] == INFINITY:
                    lower[i, c] = INFINITY
                    continue
                d2 = sq_dist(diag[i], lin[c], F[c, i], shift[c])
                lower[i, c] = sqrt(d2 - err2) if d2 > err2 else 0.0
                if c == labels[i]:
                    upper[i] = sqrt(d2 + err2)


def refresh_from_matrix(const floating[:, ::1] K, const Py_ssize_t[::1] points,
                        const Py_ssize_t[::1] stamps, const int[::1] log_point,
                        const int[::1] log_src, const int[::1] log_dst,
                        const double[::1] log_weight, double[:, ::1] F, int n_threads):
    """F[:, i] brought up to date for each i in ``points``: the moves of the log from
    ``stamps[i]`` on, in order (F[src] −= w K_ij, F[dst] += w K_ij), read from K's row i."""
    cdef Py_ssize_t n_points = points.shape[0], n_log = log_point.shape[0]
    cdef Py_ssize_t p, i, e
    cdef double v
    with nogil:
        for p in prange(n_points, num_threads=n_threads, schedule="dynamic"):
            i = points[p]
            for e in range(stamps[i], n_log):
                v = log_weight[e] * K[i, log_point[e]]
                F[log_src[e], i] -= v
                F[log_dst[e], i] += v


def refresh_from_rows(const floating[:, ::1] K_rows, const Py_ssize_t[::1] points,
                      const int[::1] log_src, const int[::1] log_dst,
                      const double[::1] log_weight, double[:, ::1] F, int n_threads):
    """As :func:`refresh_from_matrix` for points that share a stamp: ``K_rows[r, e]`` is the
    kernel value between ``points[r]`` and the point of log entry e (from the stamp on)."""
    cdef Py_ssize_t n_points = points.shape[0], n_log = log_src.shape[0]
    cdef Py_ssize_t r, i, e
    cdef double v
    with nogil:
        for r in prange(n_points, num_threads=n_threads, schedule="static"):
            i = points[r]
            for e in range(n_log):
                v = log_weight[e] * K_rows[r, e]
                F[log_src[e], i] -= v
                F[log_dst[e], i] += v


def pair_sums_from_matrix(const floating[:, ::1] K, const Py_ssize_t[::1] pair_point,
                          const Py_ssize_t[::1] pair_cluster, const Py_ssize_t[::1] order,
                          const Py_ssize_t[::1] starts, const double[::1] weights,
                          double[:, ::1] F, int n_threads):
    """F[c, i] = Σ_{j∈c} w_j K_ij from scratch for each pair (i, c) given, with the members
    of cluster c ``order[starts[c]:starts[c + 1]]``."""
    cdef Py_ssize_t n_pairs = pair_point.shape[0]
    cdef Py_ssize_t p, q, i, c
    cdef double acc
    with nogil:
        for p in prange(n_pairs, num_threads=n_threads, schedule="dynamic", chunksize=16):
            i = pair_point[p]
            c = pair_cluster[p]
            acc = 0.0
            for q in range(starts[c], starts[c + 1]):
                acc = acc + weights[order[q]] * K[i, order[q]]
            F[c, i] = acc


def own_sums_from_matrix(const floating[:, ::1] K, const Py_ssize_t[::1] order,
                         const Py_ssize_t[::1] starts, const double[::1] weights,
                         double[::1] out, int n_threads):
    """out[i] = Σ_{j in i's cluster} w_j K_ij, with ``order`` the points sorted by cluster and
    cluster c's members ``order[starts[c]:starts[c + 1]]``."""
    cdef Py_ssize_t k = starts.shape[0] - 1
    cdef Py_ssize_t n = order.shape[0]
    cdef Py_ssize_t p, c, q, i, j, lo, hi
    cdef double acc
    with nogil:
        for p in prange(n, num_threads=n_threads, schedule="dynamic", chunksize=64):
            i = order[p]
            # the cluster of position p: the last c with starts[c] <= p
            lo = 0
            hi = k
            while hi - lo > 1:
                c = (lo + hi) // 2
                if starts[c] <= p:
                    lo = c
                else:
                    hi = c
            acc = 0.0
            for q in range(starts[lo], starts[lo + 1]):
                j = order[q]
                acc = acc + weights[j] * K[i, j]
            out[i] = acc


def pair_dots(const double[:, ::1] Phi, const double[:, ::1] S,
              const Py_ssize_t[::1] pair_point, const Py_ssize_t[::1] pair_cluster,
              double[:, ::1] F, int n_threads):
    """F[c, i] = S[c] · Phi[i] for each pair (i, c) given (explicit feature space)."""
    cdef Py_ssize_t n_pairs = pair_point.shape[0], m = Phi.shape[1]
    cdef Py_ssize_t p, q, i, c
    cdef double acc
    with nogil:
        for p in prange(n_pairs, num_threads=n_threads, schedule="static"):
            i = pair_point[p]
            c = pair_cluster[p]
            acc = 0.0
            for q in range(m):
                acc = acc + S[c, q] * Phi[i, q]
            F[c, i] = acc
