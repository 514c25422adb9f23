# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Lloyd's iteration for weighted kernel k-means, through the kernel matrix K.

Notation (see ``docs/engine.md``): w the sample weights, labels the cluster of each point,
W_c = Σ_{j∈c} w_j the cluster weights,

    outer sums   F[c, i] = Σ_{j∈c} w_j K_ij                    (k×n, row c contiguous)
    inner sums   g_c     = Σ_{i∈c} w_i F[c, i]
    distance     d(i, c) = K_ii − 2 F[c, i] / W_c + g_c / W_c²  (clamped at 0)

Every routine here gives each thread whole output elements, summed in a fixed order, so results
do not depend on the number of threads. Accumulators are double, whatever the storage of K.
"""
from cython cimport floating
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from libc.math cimport INFINITY

from _common cimport centre_terms, sq_dist  # ext/engine/_common.pxd, on the include path

cdef enum:
    CHUNK = 256
    PAD = 16     # doubles (128 bytes) around per-thread buffers: no false sharing


def outer_sums_rows(const floating[:, ::1] K_rows, Py_ssize_t row_start,
                    const int[::1] labels, const double[::1] weights,
                    double[:, ::1] F, int n_threads):
    """Full pass: F[c, row_start + r] = Σ_{j: labels_j = c} w_j K_rows[r, j].

    ``K_rows`` is a block of rows of K (all of K for an in-memory fit); K is symmetric, so row i
    of K is also column i and one streaming read per row gives every cluster's sum. Four rows
    are summed per sweep over j, sharing the label and weight loads; each row is still summed
    in order j = 0, 1, …, so the result does not depend on the grouping or the thread count.
    Each thread's accumulators are padded so that two threads never share a cache line.
    """
    cdef Py_ssize_t n_rows = K_rows.shape[0], n = K_rows.shape[1], k = F.shape[0]
    cdef Py_ssize_t n_quads = (n_rows + 3) // 4
    cdef Py_ssize_t q, r, j, c, t
    cdef int l
    cdef double wj
    cdef double *buf = NULL
    cdef double *acc = NULL
    with nogil, parallel(num_threads=n_threads):
        buf = <double *> malloc((4 * k + 2 * PAD) * sizeof(double))
        acc = buf + PAD
        for q in prange(n_quads, schedule="static"):
            r = 4 * q
            if r + 4 <= n_rows:
                for c in range(4 * k):
                    acc[c] = 0.0
                for j in range(n):
                    l = labels[j]
                    wj = weights[j]
                    acc[l] += wj * K_rows[r, j]
                    acc[k + l] += wj * K_rows[r + 1, j]
                    acc[2 * k + l] += wj * K_rows[r + 2, j]
                    acc[3 * k + l] += wj * K_rows[r + 3, j]
                for t in range(4):
                    for c in range(k):
                        F[c, row_start + r + t] = acc[t * k + c]
            else:
                for t in range(r, n_rows):
                    for c in range(k):
                        acc[c] = 0.0
                    for j in range(n):
                        acc[labels[j]] += weights[j] * K_rows[t, j]
                    for c in range(k):
                        F[c, row_start + t] = acc[c]
        free(buf)


def update_outer_sums(const floating[:, ::1] K_rows, const int[::1] rows,
                      const int[::1] src, const int[::1] dst,
                      const double[::1] w_moved, double[:, ::1] F, int n_threads):
    """Incremental update after points moved: for each moved point m (row ``rows[m]`` of
    ``K_rows``) going from cluster src[m] to dst[m],

        F[src, :] −= w_m K[m, :]      F[dst, :] += w_m K[m, :]

    Cost O(n·|moved|). Threads own column chunks and apply the moves in the given order.
    """
    cdef Py_ssize_t n = F.shape[1], n_moved = rows.shape[0]
    cdef Py_ssize_t n_chunks = (n + CHUNK - 1) // CHUNK
    cdef Py_ssize_t ch, m, i, i0, i1, r
    cdef int a, b
    cdef double wm, v
    with nogil:
        for ch in prange(n_chunks, num_threads=n_threads, schedule="static"):
            i0 = ch * CHUNK
            i1 = min(i0 + CHUNK, n)
            for m in range(n_moved):
                r = rows[m]
                a = src[m]
                b = dst[m]
                wm = w_moved[m]
                for i in range(i0, i1):
                    v = wm * K_rows[r, i]
                    F[a, i] -= v
                    F[b, i] += v


def assign(const double[:, ::1] F, const double[::1] inner_sums,
           const double[::1] cluster_weights, const double[::1] diag,
           int[::1] labels_out, double[::1] dist_out, int n_threads):
    """labels_out[i] = argmin_c d(i, c) (ties to the lowest c), dist_out[i] = that distance.

    Clusters with W_c ≤ 0 (empty) are skipped. Distances are clamped at 0 before comparing.
    """
    cdef Py_ssize_t k = F.shape[0], n = F.shape[1]
    cdef Py_ssize_t n_chunks = (n + CHUNK - 1) // CHUNK
    cdef Py_ssize_t ch, c, i, i0, i1
    cdef double *lin = <double *> malloc(k * sizeof(double))
    cdef double *shift = <double *> malloc(k * sizeof(double))
    cdef double *best = NULL
    cdef int *best_c = NULL
    cdef double dist
    centre_terms(inner_sums, cluster_weights, lin, shift)
    with nogil, parallel(num_threads=n_threads):
        best = <double *> malloc(CHUNK * sizeof(double))
        best_c = <int *> malloc(CHUNK * sizeof(int))
        for ch in prange(n_chunks, schedule="static"):
            i0 = ch * CHUNK
            i1 = min(i0 + CHUNK, n)
            for i in range(i1 - i0):
                best[i] = INFINITY
                best_c[i] = 0
            for c in range(k):
                if shift[c] == INFINITY:
                    continue
                for i in range(i0, i1):
                    dist = sq_dist(diag[i], lin[c], F[c, i], shift[c])
                    if dist < best[i - i0]:
                        best[i - i0] = dist
                        best_c[i - i0] = <int> c
            for i in range(i0, i1):
                labels_out[i] = best_c[i - i0]
                dist_out[i] = best[i - i0]
        free(best)
        free(best_c)
    free(lin)
    free(shift)


def distances(const double[:, ::1] F, const double[::1] inner_sums,
              const double[::1] cluster_weights, const double[::1] diag,
              double[:, ::1] out, int n_threads):
    """out[i, c] = d(i, c), clamped at 0, +inf for clusters with W_c ≤ 0.

    Same arithmetic as :func:`assign`, so argmin over a row of ``out`` is assign's label.
    """
    cdef Py_ssize_t k = F.shape[0], n = F.shape[1]
    cdef Py_ssize_t i, c
    cdef double dist
    cdef double *lin = <double *> malloc(k * sizeof(double))
    cdef double *shift = <double *> malloc(k * sizeof(double))
    centre_terms(inner_sums, cluster_weights, lin, shift)
    with nogil:
        for i in prange(n, num_threads=n_threads, schedule="static"):
            for c in range(k):
                if shift[c] == INFINITY:
                    out[i, c] = INFINITY
                else:
                    out[i, c] = sq_dist(diag[i], lin[c], F[c, i], shift[c])
    free(lin)
    free(shift)
