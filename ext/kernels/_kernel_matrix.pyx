# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Elementwise kernel passes that turn BLAS products into kernel values.

The Python layer (``kkmeans_cli.kernels``) computes the Gram block G = A·Bᵀ with BLAS and the
squared row norms; the functions here apply the kernel formula in one OpenMP pass and write the
result into a row block of the output matrix, which may be float32 or float64. For the kernels
with an exponential only the exponent is computed here: NumPy's vectorised ``exp`` (several
times faster than libm's scalar one) then writes K.

Kernel codes (``kind``) follow scikit-learn's ``pairwise_kernels`` formulas:

    0 linear    G
    1 poly      (γ G + c₀)^degree
    2 rbf       exp(−γ s), s = ‖a‖² + ‖b‖² − 2G, and s = 0 when it is below the
                rounding noise 4ε(‖a‖² + ‖b‖²) of that expansion (so K_ii = 1 exactly)
    3 sigmoid   tanh(γ G + c₀)
    4 cosine    G / (‖a‖ ‖b‖)            (0 where a norm is 0)

The L1-type kernels have no BLAS form and are computed directly:

    5 laplacian exp(−γ Σ |a − b|)
    6 chi2      exp(−γ Σ (a − b)² / (a + b))     (0/0 terms are 0)
"""
import numpy as np

from cython cimport floating
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from libc.math cimport tanh, sqrt, pow, fabs
from libc.float cimport DBL_EPSILON

cdef enum:
    CHUNK = 64


def gram_to_kernel(const double[:, ::1] G, const double[::1] sq_a, const double[::1] sq_b,
                   floating[:, ::1] out, Py_ssize_t row_start, int kind, double gamma,
                   double coef0, double degree, int n_threads):
    """out[row_start + r, j] = kernel(G[r, j]) for the dot-product kernels (codes 0, 1, 3, 4).

    ``sq_a`` holds ‖a_r‖² for the block's rows, ``sq_b`` ‖b_j‖² for its columns; ``out`` has at
    least ``G.shape[1]`` columns. The rbf kernel goes through :func:`rbf_exponent` instead.
    """
    cdef Py_ssize_t n_rows = G.shape[0], n_cols = G.shape[1]
    cdef Py_ssize_t r, j
    cdef double v, na
    with nogil:
        for r in prange(n_rows, num_threads=n_threads, schedule="static"):
            for j in range(n_cols):
                v = G[r, j]
                if kind == 1:
                    v = pow(gamma * v + coef0, degree)
                elif kind == 3:
                    v = tanh(gamma * v + coef0)
                elif kind == 4:
                    na = sq_a[r] * sq_b[j]
                    if na > 0.0:
                        v = v / sqrt(na)
                    else:
                        v = 0.0
                out[row_start + r, j] = <floating> v


def rbf_exponent(double[:, ::1] G, const double[::1] sq_a, const double[::1] sq_b,
                 double gamma, int n_threads):
    """In place: G[r, j] ← −γ·s with s = ‖a_r‖² + ‖b_j‖² − 2G[r, j], and s = 0 below the
    rounding noise 4ε(‖a_r‖² + ‖b_j‖²) of that expansion (coinciding points, so K_ii = 1)."""
    cdef Py_ssize_t n_rows = G.shape[0], n_cols = G.shape[1]
    cdef Py_ssize_t r, j
    cdef double v, na
    with nogil:
        for r in prange(n_rows, num_threads=n_threads, schedule="static"):
            for j in range(n_cols):
                na = sq_a[r] + sq_b[j]
                v = na - 2.0 * G[r, j]
                if v <= 4.0 * DBL_EPSILON * na:
                    v = 0.0
                G[r, j] = -gamma * v


def l1_exponent(const double[:, ::1] A, const double[:, ::1] B, double[:, ::1] out,
                int kind, double gamma, int n_threads):
    """out[r, j] = −γ·dist(A_r, B_j): L1 distance (laplacian, kind 5) or chi-squared distance
    Σ (a − b)²/(a + b) with 0/0 terms 0 (chi2, kind 6)."""
    cdef Py_ssize_t n_rows = A.shape[0], n_cols = B.shape[0], d = A.shape[1]
    cdef Py_ssize_t r, j, t
    cdef double s, diff, tot
    with nogil:
        for r in prange(n_rows, num_threads=n_threads, schedule="static"):
            for j in range(n_cols):
                s = 0.0
                if kind == 5:
                    for t in range(d):
                        s = s + fabs(A[r, t] - B[j, t])
                else:
                    for t in range(d):
                        tot = A[r, t] + B[j, t]
                        if tot != 0.0:
                            diff = A[r, t] - B[j, t]
                            s = s + diff * diff / tot
                out[r, j] = -gamma * s


def mirror_rows(floating[:, ::1] K, Py_ssize_t i0, Py_ssize_t i1, int n_threads):
    """Copy the lower-triangle rows [i0, i1) onto the upper triangle: K[i, j] = K[j, i] for
    j in [i0, i1) and i < j. Called right after a block is computed, while it is in cache."""
    cdef Py_ssize_t i, j
    with nogil:
        for i in prange(i1 - 1, num_threads=n_threads, schedule="static"):
            for j in range(max(i0, i + 1), i1):
                K[i, j] = K[j, i]


cdef extern from "_rbf_sums.h" nogil:
    const int KK_ROWS
    void kk_rbf_sums(const double *A, Py_ssize_t R, Py_ssize_t d, const double *sq_a,
                     const double *Bt, const double *sq_b, const double *w, Py_ssize_t n,
                     const Py_ssize_t *starts, Py_ssize_t k, double gamma, double *dots,
                     double *out)
    const int KK_TILE
    const int KK_SCATTER_ABOVE
    void kk_rbf_replay(const double *A, Py_ssize_t R, Py_ssize_t d, const double *sq_a,
                       const double *Bt, const double *sq_b, const double *coef,
                       const double *w, const int *src, const int *dst, Py_ssize_t m,
                       Py_ssize_t j0, double gamma, double *dots, const double *zero,
                       double *const *o, Py_ssize_t stride, Py_ssize_t k)


cdef void _gather(const double[:, ::1] X, const Py_ssize_t[::1] index, double *out,
                  Py_ssize_t point_stride, Py_ssize_t feature_stride,
                  double[::1] sq) noexcept nogil:
    """Point i of ``index`` copied to out[i·point_stride + t·feature_stride] (t a feature:
    rows with strides (d, 1), the points transposed with (1, m)), sq[i] = its squared norm."""
    cdef Py_ssize_t i, t
    cdef double s, v
    for i in range(index.shape[0]):
        s = 0.0
        for t in range(X.shape[1]):
            v = X[index[i], t]
            out[i * point_stride + t * feature_stride] = v
            s = s + v * v
        sq[i] = s


def rbf_sums_of(const double[:, ::1] X, const Py_ssize_t[::1] rows,
                const Py_ssize_t[::1] cols, const int[::1] labels, const double[::1] weights,
                double gamma, double[:, ::1] out, int n_threads):
    """out[c, r] = Σ_{j: labels[j] = c} w_j exp(−γ‖x_rows[r] − x_cols[j]‖²) (k×p), rbf,
    fused: X is the centred data; ``labels`` and ``weights`` go with ``cols``. The columns
    are sorted by cluster (a counting sort, stable) and gathered transposed, the rows
    gathered, once; each thread then takes whole groups of ``KK_ROWS`` rows
    (``_rbf_sums.h: kk_rbf_sums``), so results do not depend on the thread count."""
    cdef Py_ssize_t p = rows.shape[0], d = X.shape[1], m = cols.shape[0], k = out.shape[0]
    cdef Py_ssize_t i, j, t, c, q, r, r0, nr, acc
    cdef Py_ssize_t n_groups = (p + KK_ROWS - 1) // KK_ROWS
    cdef double s
    cdef double *dots = NULL
    cdef double *block = NULL
    if p == 0:
        return
    cdef Py_ssize_t[::1] starts = np.zeros(k + 1, dtype=np.intp)
    cdef Py_ssize_t[::1] fill = np.empty(k, dtype=np.intp)
    cdef Py_ssize_t[::1] by_cluster = np.empty(m, dtype=np.intp)
    cdef double[:, ::1] A = np.empty((p, d))
    cdef double[::1] sq_a = np.empty(p)
    cdef double[:, ::1] Bt = np.empty((d, max(m, 1)))
    cdef double[::1] sq_b = np.empty(max(m, 1))
    cdef double[::1] w = np.empty(max(m, 1))
    with nogil:
        for j in range(m):                       # counting sort of the columns by cluster
            starts[labels[j] + 1] += 1
        for c in range(k):
            starts[c + 1] += starts[c]
            fill[c] = starts[c]
        for j in range(m):
            i = fill[labels[j]]
            fill[labels[j]] += 1
            by_cluster[i] = cols[j]
            w[i] = weights[j]
        _gather(X, by_cluster, &Bt[0, 0], 1, Bt.shape[1], sq_b)
        _gather(X, rows, &A[0, 0], d, 1, sq_a)
    with nogil, parallel(num_threads=n_threads):
        dots = <double *> malloc(KK_ROWS * KK_TILE * sizeof(double))
        block = <double *> malloc(KK_ROWS * k * sizeof(double))
        for q in prange(n_groups, schedule="dynamic", chunksize=8):
            r0 = q * KK_ROWS
            nr = p - r0 if p - r0 < KK_ROWS else KK_ROWS
            kk_rbf_sums(&A[r0, 0], nr, d, &sq_a[r0], &Bt[0, 0], &sq_b[0], &w[0], m,
                        &starts[0], k, gamma, dots, block)
            for r in range(nr):
                for c in range(k):
                    out[c, r0 + r] = block[r * k + c]
        free(block)
        free(dots)


def rbf_replay(const double[:, ::1] X, const Py_ssize_t[::1] rows,
               const Py_ssize_t[::1] starts, const Py_ssize_t[::1] moved, const int[::1] src,
               const int[::1] dst, const double[::1] weights, double gamma,
               double[:, ::1] F, int n_threads):
    """Elkan's log of moves replayed into the outer sums F (k×n), rbf, fused: for each point
    ``rows[r]`` (a row of X, the centred data), every move j ≥ ``starts[r]`` of the log
    (point ``moved[j]`` from cluster ``src[j]`` to ``dst[j]``, weight ``weights[j]``) adds
    w_j K(x_rows[r], x_moved[j]) to F[dst_j, rows[r]] and subtracts it from F[src_j, rows[r]].

    The rows are sorted by start (a counting sort, stable) and replayed in groups of at most
    ``KK_ROWS`` rows with one start (``_rbf_sums.h: kk_rbf_replay``); a row's sums do not
    depend on its group, and each group is one thread's (``rows`` distinct), so results do not
    depend on the thread count."""
    cdef Py_ssize_t p = rows.shape[0], d = X.shape[1], m = moved.shape[0], n = F.shape[1]
    cdef Py_ssize_t k = F.shape[0], i, j, t, c, q, r, r0, nr, n_groups
    cdef double *dots = NULL
    cdef double **o = NULL
    cdef double s
    cdef Py_ssize_t acc
    if p == 0 or m == 0:
        return
    cdef Py_ssize_t[::1] count = np.zeros(m + 1, dtype=np.intp)
    cdef Py_ssize_t[::1] order = np.empty(p, dtype=np.intp)
    cdef Py_ssize_t[::1] groups = np.empty(p + 1, dtype=np.intp)
    cdef Py_ssize_t[::1] sorted_rows = np.empty(p, dtype=np.intp)
    cdef double[:, ::1] A = np.empty((p, d))
    cdef double[::1] sq_a = np.empty(p)
    cdef double[:, ::1] Bt = np.empty((d, m))
    cdef double[::1] sq_b = np.empty(m)
    cdef double[:, ::1] coef = (np.zeros((k, m)) if k <= KK_SCATTER_ABOVE
                                else np.zeros((1, 1)))
    cdef double[::1] zero = np.zeros(KK_TILE)
    with nogil:
        for r in range(p):                       # counting sort by start, stable
            count[min(starts[r], m)] += 1
        acc = 0
        for j in range(m + 1):
            i = count[j]
            count[j] = acc
            acc = acc + i
        for r in range(p):
            j = min(starts[r], m)
            order[count[j]] = r
            count[j] += 1
        n_groups = 0
        for i in range(p):                       # runs of one start, cut every KK_ROWS rows
            if (i == 0 or starts[order[i]] != starts[order[i - 1]]
                    or i - groups[n_groups - 1] == KK_ROWS):
                groups[n_groups] = i
                n_groups += 1
        groups[n_groups] = p
        for i in range(p):
            sorted_rows[i] = rows[order[i]]
        _gather(X, sorted_rows, &A[0, 0], d, 1, sq_a)
        _gather(X, moved, &Bt[0, 0], 1, m, sq_b)
        if k <= KK_SCATTER_ABOVE:
            for j in range(m):
                coef[dst[j], j] = weights[j]
                coef[src[j], j] = -weights[j]
    with nogil, parallel(num_threads=n_threads):
        dots = <double *> malloc(KK_ROWS * KK_TILE * sizeof(double))
        o = <double **> malloc(KK_ROWS * sizeof(double *))
        for q in prange(n_groups, schedule="dynamic", chunksize=4):
            r0 = groups[q]
            nr = groups[q + 1] - r0
            if starts[order[r0]] < m:
                for r in range(nr):
                    o[r] = &F[0, sorted_rows[r0 + r]]
                kk_rbf_replay(&A[r0, 0], nr, d, &sq_a[r0], &Bt[0, 0], &sq_b[0], &coef[0, 0],
                              &weights[0], &src[0], &dst[0], m, starts[order[r0]], gamma,
                              dots, &zero[0], o, n, k)
        free(o)
        free(dots)
