# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Arithmetic shared by the Lloyd and Elkan kernels (``_lloyd.pyx``, ``_elkan.pyx``).

Notation (docs/engine.md): F[c, i] = Σ_{j∈c} w_j K_ij (outer sums), g_c = Σ_{i,j∈c} w_i w_j K_ij
(inner sums), W_c = Σ_{i∈c} w_i (cluster weights). The squared feature-space distance

    d(i, c) = K_ii − 2 F[c, i] / W_c + g_c / W_c²

is evaluated as ``K_ii + lin_c · F[c, i] + shift_c`` with the per-cluster terms below, in this
one order everywhere, so Lloyd, Elkan and predict round it identically (ties then break the
same way: to the lowest cluster index).
"""
from libc.math cimport INFINITY


cdef inline void centre_terms(const double[::1] inner_sums,  # IN (k,)
                              const double[::1] cluster_weights,  # IN (k,)
                              double *lin,  # OUT (k,)
                              double *shift,  # OUT (k,)
                              ) noexcept nogil:
    """lin[c] = −2/W_c and shift[c] = g_c/W_c²; an empty cluster (W_c ≤ 0) gets lin 0 and
    shift +inf, which marks it as never the nearest."""
    cdef Py_ssize_t c
    for c in range(cluster_weights.shape[0]):
        if cluster_weights[c] > 0.0:
            lin[c] = -2.0 / cluster_weights[c]
            shift[c] = inner_sums[c] / (cluster_weights[c] * cluster_weights[c])
        else:
            lin[c] = 0.0
            shift[c] = INFINITY


cdef inline double sq_dist(double diag, double lin, double F, double shift) noexcept nogil:
    """d(i, c) = K_ii + lin_c·F[c, i] + shift_c, clamped at 0 (rounding can make it negative)."""
    cdef double d = diag + lin * F + shift
    if d < 0.0:
        d = 0.0
    return d
