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
    void kk_rbf_replay(const double *a, Py_ssize_t d, double sa, const double *Bt,
                       const double *sq_b, const double *w, const int *src, const int *dst,
                       Py_ssize_t m, Py_ssize_t j0, double gamma, double *buf, double *o,
                       Py_ssize_t stride, Py_ssize_t k)


def rbf_outer_sums(const double[:, ::1] A, const double[::1] sq_a, const double[:, ::1] Bt,
                   const double[::1] sq_b, const double[::1] weights,
                   const Py_ssize_t[::1] starts, double gamma, double[:, ::1] out,
                   int n_threads):
    """out[r, c] = Σ_{j∈c} w_j exp(−γ‖a_r − b_j‖²), the kernel values never stored.

    ``Bt`` (d×n) holds the training points transposed and sorted by cluster (cluster c is
    columns ``starts[c]:starts[c + 1]``), ``sq_b`` and ``weights`` in that order; ``sq_a``
    holds ‖a_r‖². Each thread takes whole groups of ``KK_ROWS`` rows (``_rbf_sums.h``): the
    dot products, the exponential and the float64 sums are fused per row, so the results do
    not depend on the thread count.
    """
    cdef Py_ssize_t m = A.shape[0], d = A.shape[1], n = Bt.shape[1], k = out.shape[1]
    cdef Py_ssize_t n_groups = (m + KK_ROWS - 1) // KK_ROWS
    cdef Py_ssize_t q, r0, rows
    cdef double *dots = NULL
    if m == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        dots = <double *> malloc(KK_ROWS * n * sizeof(double))
        for q in prange(n_groups, schedule="dynamic", chunksize=8):
            r0 = q * KK_ROWS
            rows = m - r0 if m - r0 < KK_ROWS else KK_ROWS
            kk_rbf_sums(&A[r0, 0], rows, d, &sq_a[r0], &Bt[0, 0], &sq_b[0], &weights[0], n,
                        &starts[0], k, gamma, dots, &out[r0, 0])
        free(dots)


def rbf_replay(const double[:, ::1] A, const Py_ssize_t[::1] cols, const double[::1] sq_a,
               const Py_ssize_t[::1] starts, const double[:, ::1] Bt, const double[::1] sq_b,
               const double[::1] weights, const int[::1] src, const int[::1] dst,
               double gamma, double[:, ::1] F, int n_threads):
    """Elkan's log replayed for the points A (rbf, fused): for row r, every move j ≥
    ``starts[r]`` of the log (its point's coordinates column j of ``Bt``, d×m, going from
    ``src[j]`` to ``dst[j]`` with weight ``weights[j]``) adds w_j K(a_r, b_j) to
    F[dst_j, cols[r]] and subtracts it from F[src_j, cols[r]]. Each row is one
    thread's (``cols`` distinct), so the sums do not depend on the thread count. ``sq_a``,
    ``sq_b``: squared norms of the rows of A and of the moved points."""
    cdef Py_ssize_t p = A.shape[0], d = A.shape[1], m = Bt.shape[1], n = F.shape[1]
    cdef Py_ssize_t k = F.shape[0], r
    cdef double *buf = NULL
    if p == 0 or m == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        buf = <double *> malloc(m * sizeof(double))
        for r in prange(p, schedule="dynamic", chunksize=16):
            if starts[r] < m:
                kk_rbf_replay(&A[r, 0], d, sq_a[r], &Bt[0, 0], &sq_b[0], &weights[0],
                              &src[0], &dst[0], m, starts[r], gamma, buf, &F[0, cols[r]], n,
                              k)
        free(buf)
