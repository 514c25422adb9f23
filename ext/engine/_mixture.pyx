# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""One E-step of a Gaussian mixture and the moments of its M-step, over pieces of rows.

``kernels/graph_fit.py`` (``gaussian_mixture``): a point z (a row of Z, in the coordinates
of the classification criterion) costs ‖(z − μ_c)·M_c‖² + κ_c under component c (M_c the
inverse of its covariance's Cholesky factor, transposed; κ_c its log-determinant, weight and
2π terms), so ln(w_c N(z; μ_c, S_c)) = −cost/2. Per point: the posteriors r_c beside a
uniform component of log density ``log_noise`` (−∞: none), ln p(z) of the whole mixture, and
the sums Σ r_c, Σ r_c (z − μ_c), Σ r_c (z − μ_c)(z − μ_c)ᵀ, Σ r₀. Each piece of ``piece``
rows sums its rows in order into its own slot; pieces run in parallel and the caller adds
the slots in their order, so the sums are the same whatever the threads. A posterior that
underflows to 0 adds nothing and is skipped (the sums to the bit as when added). Where k is
large and the coordinates few this is one pass over the points in C, where NumPy took k
passes of a few operations each (a grid of 100 blobs: the split test's 2k = 200 components);
in many coordinates NumPy's products by BLAS are quicker (``kernels/graph_fit.py``,
``MIXTURE_COMPILED_MAX_DIM``).
"""
from cython.parallel cimport parallel, prange
from libc.math cimport exp, log, INFINITY
from libc.stdlib cimport malloc, free


def mixture_sums(const double[:, ::1] Z, const double[:, ::1] means,
                 const double[:, :, ::1] inverses, const double[::1] consts,
                 double log_noise, Py_ssize_t piece, int n_threads):
    """(mass (p, k), first (p, k, d), second (p, k, d, d), log_likelihood (p,), noise (p,)):
    each piece's sums (module docstring) of its rows Z[t·piece : (t + 1)·piece].
    ``inverses[c]`` is M_cᵀ, lower triangular (``triangular_inverses``): entries above its
    diagonal are not read."""
    import numpy as np

    cdef Py_ssize_t n = Z.shape[0], d = Z.shape[1], k = means.shape[0]
    cdef Py_ssize_t pieces = (n + piece - 1) // piece if n > 0 else 0
    mass_ = np.zeros((pieces, k))
    first_ = np.zeros((pieces, k, d))
    second_ = np.zeros((pieces, k, d, d))
    ll_ = np.zeros(pieces)
    noise_ = np.zeros(pieces)
    cdef double[:, ::1] mass = mass_
    cdef double[:, :, ::1] first = first_
    cdef double[:, :, :, ::1] second = second_
    cdef double[::1] ll = ll_
    cdef double[::1] noise = noise_
    cdef Py_ssize_t t, i, c, a, b, lo, hi
    cdef double top, total, s, cost, r, da, rda
    cdef bint has_noise = log_noise > -INFINITY
    # each thread's scratch rows from malloc (fresh memory, which the compiler knows aliases
    # no output: rows of a NumPy array here took twice the time); one that fails is flagged
    # through a pointer (shared by the threads), its pieces skipped, and MemoryError raised
    failed_ = np.zeros(1, dtype=np.intc)
    cdef int[::1] failed_view = failed_
    cdef int *failed = &failed_view[0]
    cdef double *logp = NULL
    cdef double *diff = NULL
    with nogil, parallel(num_threads=n_threads):
        logp = <double *> malloc((k + 1) * sizeof(double))
        diff = <double *> malloc((d + 1) * sizeof(double))
        if logp == NULL or diff == NULL:
            failed[0] = 1
        for t in prange(pieces, schedule="static"):
            if logp == NULL or diff == NULL:
                continue
            lo = t * piece
            hi = lo + piece
            if hi > n:
                hi = n
            for i in range(lo, hi):
                top = log_noise if has_noise else -INFINITY
                for c in range(k):
                    for a in range(d):
                        diff[a] = Z[i, a] - means[c, a]
                    cost = consts[c]
                    for b in range(d):
                        s = 0.0
                        for a in range(b + 1):
                            s = s + inverses[c, b, a] * diff[a]
                        cost = cost + s * s
                    logp[c] = -0.5 * cost
                    if logp[c] > top:
                        top = logp[c]
                total = 0.0
                for c in range(k):
                    # exp underflows to 0 below −745.2; said directly (glibc's slow path)
                    logp[c] = exp(logp[c] - top) if logp[c] - top > -746.0 else 0.0
                    total = total + logp[c]
                if has_noise:
                    r = exp(log_noise - top)
                    total = total + r
                    noise[t] += r / total
                ll[t] += log(total) + top
                for c in range(k):
                    r = logp[c] / total
                    if r == 0.0:
                        continue
                    mass[t, c] += r
                    for a in range(d):
                        diff[a] = Z[i, a] - means[c, a]
                    for a in range(d):
                        da = diff[a]
                        first[t, c, a] += r * da
                        rda = r * da
                        for b in range(a, d):
                            second[t, c, a, b] += rda * diff[b]
        free(logp)
        free(diff)
    if failed_[0]:
        raise MemoryError(f"mixture_sums: no memory for a thread's {k + 1} + {d + 1} doubles")
    for a in range(d):
        for b in range(a):
            second_[:, :, a, b] = second_[:, :, b, a]
    return mass_, first_, second_, ll_, noise_


def triangular_inverses(const double[:, :, ::1] L):
    """The inverses of the lower-triangular matrices L[c] (k×d×d), by forward substitution:
    X[i, j] = (δ_ij − Σ_{j ≤ m < i} L[i, m] X[m, j]) / L[i, i], zero above the diagonal."""
    import numpy as np

    cdef Py_ssize_t k = L.shape[0], d = L.shape[1], c, i, j, m
    cdef double s
    out = np.zeros((k, d, d))
    cdef double[:, :, ::1] X = out
    with nogil:
        for c in range(k):
            for j in range(d):
                X[c, j, j] = 1.0 / L[c, j, j]
                for i in range(j + 1, d):
                    s = 0.0
                    for m in range(j, i):
                        s = s + L[c, i, m] * X[c, m, j]
                    X[c, i, j] = -s / L[c, i, i]
    return out
