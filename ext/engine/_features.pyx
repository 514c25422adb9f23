# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Lloyd's assignment step on explicit features, chunk by chunk (driven by
``kkmeans_cli/engine/features.py``).

Notation: Φ (n×s) the features, x_sq[i] = ‖φ_i‖² (double), C (k×s) the centres in the storage
type of Φ, c_sq[c] = ‖C_c‖² (double), w the sample weights. For a chunk of rows the products
D = Φ_chunk Cᵀ come from one BLAS call (``scipy.linalg.cython_blas``), then

    d(i, c) = x_sq[i] − 2 D[i, c] + c_sq[c]     (double; clamped at 0)
    label_i = argmin_c d(i, c)                   (ties to the lowest c)

and the chunk's partial sums of the new assignment, in double:

    sums[c]  = Σ_{i∈chunk, label_i=c} w_i φ_i    (k×s)
    W[c]     = Σ_{i∈chunk, label_i=c} w_i
    inertia  = Σ_{i∈chunk} w_i d(i, label_i)
    moved    = #{i ∈ chunk: label_i changed}

Each chunk is summed in row order by one thread into its own slot of the output, so the partial
sums do not depend on the thread count; the caller reduces the slots in chunk order
(:func:`sum_in_order`).
"""
from cython cimport floating
from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, free
from libc.string cimport memset
from libc.math cimport sqrt, INFINITY
from scipy.linalg.cython_blas cimport sgemm, dgemm


cdef void _gemm_rows_ct(const floating *A, Py_ssize_t r, Py_ssize_t s,
                        const floating *C, Py_ssize_t k, floating *D) noexcept nogil:
    """D (r×k, row-major) = A (r×s, row-major) Cᵀ (C: k×s, row-major)."""
    cdef char ta = b'T', tb = b'N'
    cdef int m_ = <int>k, n_ = <int>r, k_ = <int>s, lda = <int>s, ldb = <int>s, ldc = <int>k
    cdef float one_f = 1.0, zero_f = 0.0
    cdef double one_d = 1.0, zero_d = 0.0
    if floating is float:
        sgemm(&ta, &tb, &m_, &n_, &k_, &one_f, <float*>C, &lda, <float*>A, &ldb, &zero_f,
              <float*>D, &ldc)
    else:
        dgemm(&ta, &tb, &m_, &n_, &k_, &one_d, <double*>C, &lda, <double*>A, &ldb, &zero_d,
              <double*>D, &ldc)


cdef void _assign_chunk(const floating[:, ::1] Phi, const double[::1] x_sq,
                        const double[::1] w, const floating[:, ::1] C, const double[::1] c_sq,
                        int[::1] labels, double[::1] dist, Py_ssize_t i0, Py_ssize_t i1,
                        floating *D, double *sums, double *W, double *inertia,
                        Py_ssize_t *moved, bint want_sums) noexcept nogil:
    cdef Py_ssize_t k = C.shape[0], s = C.shape[1], r = i1 - i0
    cdef Py_ssize_t i, c, j, best
    cdef double v, bv, wi
    cdef double *row
    _gemm_rows_ct(&Phi[i0, 0], r, s, &C[0, 0], k, D)
    if want_sums:
        memset(sums, 0, k * s * sizeof(double))
        memset(W, 0, k * sizeof(double))
    inertia[0] = 0.0
    moved[0] = 0
    for i in range(r):
        best = 0
        bv = c_sq[0] - 2.0 * D[i * k]
        for c in range(1, k):
            v = c_sq[c] - 2.0 * D[i * k + c]
            if v < bv:
                bv = v
                best = c
        bv = bv + x_sq[i0 + i]
        if bv < 0.0:
            bv = 0.0
        wi = w[i0 + i]
        if labels[i0 + i] != best:
            moved[0] += 1
            labels[i0 + i] = <int>best
        dist[i0 + i] = bv
        inertia[0] += wi * bv
        if want_sums:
            W[best] += wi
            row = sums + best * s
            for j in range(s):
                row[j] += wi * Phi[i0 + i, j]


def assign_chunks(const floating[:, ::1] Phi, const double[::1] x_sq, const double[::1] w,
                  const floating[:, ::1] C, const double[::1] c_sq, int[::1] labels,
                  double[::1] dist, Py_ssize_t chunk_rows, double[:, :, ::1] sums,
                  double[:, ::1] W, double[::1] inertia, Py_ssize_t[::1] moved,
                  bint want_sums, int n_threads):
    """One assignment step over the rows of Φ in chunks of ``chunk_rows`` rows.

    ``labels`` holds the previous labels on entry and the new ones on return; chunk t's
    partial sums go to ``sums[t]``, ``W[t]``, ``inertia[t]``, ``moved[t]`` (see the module
    docstring). With ``want_sums`` false only labels, dist, inertia and moved are written.
    Chunks run on ``n_threads`` OpenMP threads, each chunk on one thread (BLAS must be on one
    thread: the caller limits it).
    """
    cdef Py_ssize_t n = Phi.shape[0], k = C.shape[0], s = C.shape[1]
    cdef Py_ssize_t n_chunks = (n + chunk_rows - 1) // chunk_rows
    cdef Py_ssize_t t, i0, i1
    cdef floating *D = NULL
    if n == 0:
        return
    if Phi.shape[1] != s or sums.shape[0] < n_chunks or (want_sums and (
            sums.shape[1] != k or sums.shape[2] != s)):
        raise ValueError("assign_chunks: shapes do not match")
    with nogil, parallel(num_threads=n_threads):
        D = <floating*>malloc(chunk_rows * k * sizeof(floating))
        for t in prange(n_chunks, schedule="static"):
            i0 = t * chunk_rows
            i1 = i0 + chunk_rows
            if i1 > n:
                i1 = n
            _assign_chunk(Phi, x_sq, w, C, c_sq, labels, dist, i0, i1, D,
                          &sums[t, 0, 0], &W[t, 0], &inertia[t], &moved[t], want_sums)
        free(D)


def sum_in_order(const double[:, ::1] parts, double[::1] out):
    """out = ((parts[0] + parts[1]) + parts[2]) + …: the partial sums of the chunks reduced in
    chunk order, whatever produced them (threads here, or workers elsewhere)."""
    cdef Py_ssize_t p, j, n_parts = parts.shape[0], size = parts.shape[1]
    if out.shape[0] != size:
        raise ValueError("sum_in_order: shapes do not match")
    with nogil:
        for j in range(size):
            out[j] = 0.0
        for p in range(n_parts):
            for j in range(size):
                out[j] += parts[p, j]


def row_sq_norms(const floating[:, ::1] A, double[::1] out, int n_threads):
    """out[i] = Σ_j A[i, j]² in double, rows in order."""
    cdef Py_ssize_t n = A.shape[0], s = A.shape[1], i, j
    cdef double acc
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="static"):
        acc = 0.0
        for j in range(s):
            acc = acc + <double>A[i, j] * A[i, j]
        out[i] = acc


cdef void _bounded_chunk(const floating[:, ::1] Phi, const double[::1] x_sq,
                         const double[::1] w, const floating[:, ::1] C,
                         const double[::1] c_sq, const double[::1] half_sep,
                         const double[::1] shift, double max_shift,
                         int[::1] labels, double[::1] upper, double[::1] lower,
                         Py_ssize_t i0, Py_ssize_t i1, floating *G, floating *D,
                         Py_ssize_t *rows, double *dsums, double *dW, Py_ssize_t *moved,
                         Py_ssize_t *n_full) noexcept nogil:
    cdef Py_ssize_t k = C.shape[0], s = C.shape[1]
    cdef Py_ssize_t i, c, j, a, b, q, n_rows = 0
    cdef double u, l, z, dot, v, d1, d2, wi
    cdef double *row
    memset(dsums, 0, k * s * sizeof(double))
    memset(dW, 0, k * sizeof(double))
    moved[0] = 0
    for i in range(i0, i1):
        a = labels[i]
        u = upper[i] + shift[a]
        l = lower[i] - max_shift
        z = l if l > half_sep[a] else half_sep[a]
        if u <= z:
            upper[i] = u
            lower[i] = l
            continue
        dot = 0.0
        for j in range(s):
            dot = dot + <double>Phi[i, j] * C[a, j]
        v = x_sq[i] - 2.0 * dot + c_sq[a]
        u = sqrt(v) if v > 0.0 else 0.0
        upper[i] = u
        lower[i] = l
        if u <= z:
            continue
        for j in range(s):
            G[n_rows * s + j] = Phi[i, j]
        rows[n_rows] = i
        n_rows = n_rows + 1
    n_full[0] = n_rows
    if n_rows == 0:
        return
    _gemm_rows_ct(G, n_rows, s, &C[0, 0], k, D)
    for q in range(n_rows):
        i = rows[q]
        b = 0
        d1 = c_sq[0] - 2.0 * D[q * k]
        d2 = INFINITY
        for c in range(1, k):
            v = c_sq[c] - 2.0 * D[q * k + c]
            if v < d1:
                d2 = d1
                d1 = v
                b = c
            elif v < d2:
                d2 = v
        d1 = d1 + x_sq[i]
        d2 = d2 + x_sq[i]
        upper[i] = sqrt(d1) if d1 > 0.0 else 0.0
        lower[i] = sqrt(d2) if d2 > 0.0 else 0.0
        a = labels[i]
        if b != a:
            moved[0] += 1
            labels[i] = <int>b
            wi = w[i]
            dW[b] += wi
            dW[a] -= wi
            row = dsums + b * s
            for j in range(s):
                row[j] += wi * Phi[i, j]
            row = dsums + a * s
            for j in range(s):
                row[j] -= wi * Phi[i, j]


def bounded_chunks(const floating[:, ::1] Phi, const double[::1] x_sq, const double[::1] w,
                   const floating[:, ::1] C, const double[::1] c_sq,
                   const double[::1] half_sep, const double[::1] shift, double max_shift,
                   int[::1] labels, double[::1] upper, double[::1] lower,
                   Py_ssize_t chunk_rows, double[:, :, ::1] dsums, double[:, ::1] dW,
                   Py_ssize_t[::1] moved, Py_ssize_t[::1] n_full, int n_threads):
    """One assignment step with Hamerly's bounds (``features.bounded_step_chunk``).

    Per point an upper bound u on the distance (not squared) to its centre and a lower
    bound l on the distance to every other centre, both valid for the previous centres. The
    centres moved by ``shift`` (their own, ‖μ_c − μ_c'‖) and at most ``max_shift``:
    u += shift[label], l −= max_shift. A point is settled when u ≤ max(l, half_sep[label])
    (half_sep[c] = ½ min_{c'≠c} ‖μ_c − μ_c'‖), first with the bound, then with its exact
    distance; the others are gathered and get every distance from one BLAS product, their new
    label and fresh bounds (nearest and second nearest). For chunk t, the changes of the
    cluster sums go to ``dsums[t]`` (Σ w φ into the new cluster − out of the old), ``dW[t]``,
    the labels changed to ``moved[t]`` and the points given every distance to ``n_full[t]``.
    """
    cdef Py_ssize_t n = Phi.shape[0], k = C.shape[0], s = C.shape[1]
    cdef Py_ssize_t n_chunks = (n + chunk_rows - 1) // chunk_rows
    cdef Py_ssize_t t, i0, i1
    cdef floating *G = NULL
    cdef floating *D = NULL
    cdef Py_ssize_t *rows = NULL
    if n == 0:
        return
    if (Phi.shape[1] != s or dsums.shape[0] < n_chunks or dsums.shape[1] != k
            or dsums.shape[2] != s):
        raise ValueError("bounded_chunks: shapes do not match")
    with nogil, parallel(num_threads=n_threads):
        G = <floating*>malloc(chunk_rows * s * sizeof(floating))
        D = <floating*>malloc(chunk_rows * k * sizeof(floating))
        rows = <Py_ssize_t*>malloc(chunk_rows * sizeof(Py_ssize_t))
        for t in prange(n_chunks, schedule="static"):
            i0 = t * chunk_rows
            i1 = i0 + chunk_rows
            if i1 > n:
                i1 = n
            _bounded_chunk(Phi, x_sq, w, C, c_sq, half_sep, shift, max_shift, labels, upper,
                           lower, i0, i1, G, D, rows, &dsums[t, 0, 0], &dW[t, 0], &moved[t],
                           &n_full[t])
        free(G)
        free(D)
        free(rows)
