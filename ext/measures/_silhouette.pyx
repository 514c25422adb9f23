# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Exact silhouette (Rousseeuw) in feature space, in one streaming pass over the kernel matrix.

The feature-space distance of two points is

    δ_ij = ‖φ(x_i) − φ(x_j)‖ = sqrt(max(K_ii + K_jj − 2 K_ij, 0)),

so the silhouette needs nothing but K: for point i in cluster A (n_A members),

    a_i = Σ_{j∈A} δ_ij / (n_A − 1)
    b_i = min_{B≠A, n_B>0} Σ_{j∈B} δ_ij / n_B
    s_i = (b_i − a_i) / max(a_i, b_i)     (0 when n_A = 1 or a_i = b_i = 0)

which is ``sklearn.metrics.silhouette_samples(δ, labels, metric="precomputed")``.

Each thread owns whole rows: it reads row i of K once, turns it into distances in a thread-local
n-vector and adds them into k-length per-cluster sums. Extra memory is O(n·threads + k·threads);
no n×n distance matrix is formed. The sums of a row are made in a fixed order (four interleaved
partial sums, added at the end), so results do not depend on the number of threads.
"""
from cython cimport floating
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from libc.math cimport sqrt, INFINITY

cdef enum:
    LANES = 4


def silhouette_rows(const floating[:, ::1] K_rows, Py_ssize_t row_start,
                    const double[::1] diag, const int[:, ::1] labels, const double[:, ::1] counts,
                    double[:, ::1] out, int n_threads, const double[::1] weights=None,
                    double[:, :, ::1] F=None):
    """out[l, row_start + r] = s_i of labelling l for i = row_start + r, from the block of rows
    ``K_rows`` of K — for L labellings of the same points at once (a sweep over k reads K
    and takes the square roots once for all of them).

    Parameters
    ----------
    K_rows : (n_rows, n) float32 or float64
        Rows row_start … row_start + n_rows − 1 of the symmetric kernel matrix (all of K for an
        in-memory matrix).
    row_start : int
    diag : (n,) float64
        K_jj for every column j.
    labels : (L, n) int32
        Labelling l in 0 … k_l − 1.
    counts : (L, k) float64
        counts[l, c] = the number of points with labels[l] = c (zero beyond k_l; k ≥ every k_l).
    out : (L, n) float64
        Receives the silhouette of each row of the block, per labelling.
    n_threads : int
    weights : (n,) float64, optional
    F : (L, k, n) float64, optional
        When given (with ``weights``), also receives the outer sums of the same rows,
        F[l, c, i] = Σ_{j: labels[l, j] = c} w_j K_ij — read from the row while it is in cache,
        so the silhouette and every centre-based measure cost one pass over K together.

    Notes
    -----
    δ_ij = sqrt(max(K_ii + K_jj − 2 K_ij, 0)); S[c] = Σ_{j: labels_j = c} δ_ij (double);
    a = S[own] / (n_own − 1), b = min_{c≠own, n_c>0} S[c] / n_c, s = (b − a) / max(a, b);
    s = 0 for a singleton (n_own = 1) and when max(a, b) = 0.
    """
    cdef Py_ssize_t n_rows = K_rows.shape[0], n = K_rows.shape[1]
    cdef Py_ssize_t L = labels.shape[0], k = counts.shape[1]
    cdef Py_ssize_t n4 = n - n % LANES
    cdef Py_ssize_t r, i, j, c, q, l
    cdef int own
    cdef double *dist = NULL
    cdef double *acc = NULL
    cdef const int *lab
    cdef double kii, t, a, b, m, mean
    cdef bint want_F = F is not None
    if labels.shape[1] != n or counts.shape[0] != L or out.shape[0] != L or diag.shape[0] != n:
        raise ValueError("labels must be (L, n), counts (L, k), out (L, n) and diag (n,)")
    if want_F and (weights is None or F.shape[0] != L or F.shape[1] != k or F.shape[2] != n
                   or weights.shape[0] != n):
        raise ValueError("F must be (L, k, n) and weights (n,)")
    with nogil, parallel(num_threads=n_threads):
        dist = <double *> malloc(n * sizeof(double))
        acc = <double *> malloc(2 * LANES * k * sizeof(double))
        for r in prange(n_rows, schedule="static"):
            i = row_start + r
            kii = diag[i]
            # Distances of row i (a contiguous, vectorisable loop), once for every labelling.
            for j in range(n):
                t = kii + diag[j] - 2.0 * K_rows[r, j]
                dist[j] = sqrt(t) if t > 0.0 else 0.0
            for l in range(L):
                lab = &labels[l, 0]
                # Per-cluster sums; four interleaved partial sums break the dependency chain of
                # consecutive points of the same cluster.
                for c in range(LANES * k):
                    acc[c] = 0.0
                for q in range(n4 // LANES):
                    j = q * LANES
                    acc[lab[j]] += dist[j]
                    acc[k + lab[j + 1]] += dist[j + 1]
                    acc[2 * k + lab[j + 2]] += dist[j + 2]
                    acc[3 * k + lab[j + 3]] += dist[j + 3]
                for j in range(n4, n):
                    acc[lab[j]] += dist[j]
                for c in range(k):
                    acc[c] = (acc[c] + acc[k + c]) + (acc[2 * k + c] + acc[3 * k + c])
                if want_F:
                    for c in range(LANES * k, 2 * LANES * k):
                        acc[c] = 0.0
                    for q in range(n4 // LANES):
                        j = q * LANES
                        acc[LANES * k + lab[j]] += weights[j] * K_rows[r, j]
                        acc[(LANES + 1) * k + lab[j + 1]] += weights[j + 1] * K_rows[r, j + 1]
                        acc[(LANES + 2) * k + lab[j + 2]] += weights[j + 2] * K_rows[r, j + 2]
                        acc[(LANES + 3) * k + lab[j + 3]] += weights[j + 3] * K_rows[r, j + 3]
                    for j in range(n4, n):
                        acc[LANES * k + lab[j]] += weights[j] * K_rows[r, j]
                    for c in range(k):
                        F[l, c, i] = ((acc[LANES * k + c] + acc[(LANES + 1) * k + c])
                                      + (acc[(LANES + 2) * k + c] + acc[(LANES + 3) * k + c]))
                own = lab[i]
                if counts[l, own] <= 1.0:
                    out[l, i] = 0.0
                    continue
                a = acc[own] / (counts[l, own] - 1.0)
                b = INFINITY
                for c in range(k):
                    if c != own and counts[l, c] > 0.0:
                        mean = acc[c] / counts[l, c]
                        if mean < b:
                            b = mean
                m = a if a > b else b
                if m > 0.0 and b < INFINITY:
                    out[l, i] = (b - a) / m
                else:
                    out[l, i] = 0.0
        free(dist)
        free(acc)
