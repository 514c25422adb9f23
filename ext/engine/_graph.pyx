# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Weighted kernel k-means on a sparse affinity graph: passes in O(nnz(A) + n·k).

Notation (``engine/graph.py``, docs/engine.md): A symmetric non-negative CSR (self-loops
allowed), degrees d_i = Σ_j A_ij > 0, weights w_i = d_i, the kernel K = σD⁻¹ + D⁻¹AD⁻¹.
For a labelling c(·):

    L[i, c]   = Σ_{j∈c} A_ij                          (links of i into c; one row of A)
    F[c, i]   = Σ_{j∈c} w_j K_ij = σ[c(i) = c] + L[i, c]/d_i
    W_c       = vol(c) = Σ_{i∈c} d_i
    g_c       = Σ_{i∈c} w_i F[c, i] = σ vol(c) + links(c, c),  links(c, c) = Σ_{i∈c} L[i, c]
    d(i, c)   = K_ii − 2 F[c, i]/W_c + g_c/W_c²,      K_ii = σ/d_i + A_ii/d_i²

so a point's distances to every centre need only its row of A (a scratch array of k links),
never a row of K: one pass costs O(nnz + n·k).

Hartigan's move of i (weight d_i, self-loop s = A_ii) from a to b changes the normalized cut
ncut = k − Σ_c links(c, c)/vol(c) by Δ = −δ_a − δ_b with

    δ_a = links'_a/vol'_a − links_a/vol_a = (d_i links_a − vol_a (2L[i, a] − s)) / (vol_a (vol_a − d_i))
    δ_b = links'_b/vol'_b − links_b/vol_b = (vol_b (2L[i, b] + s) − d_i links_b) / (vol_b (vol_b + d_i))

(L[i, a] includes s); the kernel k-means objective changes by the same Δ (they differ by a
constant for a fixed k: engine/graph.py), whatever σ.
"""
from cython.parallel cimport parallel, prange
from libc.stdlib cimport calloc, free
from libc.math cimport INFINITY


def own_links(const long[::1] indptr, const int[::1] indices, const double[::1] data,
              const int[::1] labels, double[::1] out, int n_threads):
    """out[i] = L[i, c(i)] = Σ_{j ∈ c(i)} A_ij (its self-loop included), rows in parallel
    (each row is summed alone, in index order: the result does not depend on threads)."""
    cdef Py_ssize_t n = labels.shape[0], i
    cdef long p
    cdef int a
    cdef double s
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="static"):
        a = labels[i]
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            if labels[indices[p]] == a:
                s = s + data[p]
        out[i] = s


def lloyd_pass(const long[::1] indptr, const int[::1] indices, const double[::1] data,
               const double[::1] deg, const double[::1] diag, const int[::1] labels,
               const double[::1] links, const double[::1] vol, double sigma,
               int[::1] new_labels, double[::1] own_dist, int n_threads):
    """One assignment step: new_labels[i] = the cluster of the smallest d(i, c), kept at c(i)
    unless another centre is strictly nearer (then the lowest index among the nearest);
    ``own_dist[i]`` = d(i, new_labels[i]) (unclamped). Clusters with vol ≤ 0 are at +inf.
    Rows run in parallel, each on its own scratch links: no result depends on threads.

    Returns the number of labels that changed.
    """
    cdef Py_ssize_t n = labels.shape[0], k = vol.shape[0], i, c
    cdef long p
    cdef int a, best
    cdef double di, Fc, dist, dbest, down
    cdef double *L = NULL
    cdef Py_ssize_t changed = 0
    with nogil, parallel(num_threads=n_threads):
        L = <double *> calloc(k, sizeof(double))
        for i in prange(n, schedule="static"):
            a = labels[i]
            di = deg[i]
            for p in range(indptr[i], indptr[i + 1]):
                L[labels[indices[p]]] += data[p]
            best = a
            down = INFINITY
            if vol[a] > 0.0:
                Fc = sigma + L[a] / di
                down = diag[i] - 2.0 * Fc / vol[a] + (sigma * vol[a] + links[a]) / (vol[a] * vol[a])
            dbest = down
            for c in range(k):
                if c == a or vol[c] <= 0.0:
                    continue
                Fc = L[c] / di
                dist = diag[i] - 2.0 * Fc / vol[c] + (sigma * vol[c] + links[c]) / (vol[c] * vol[c])
                if dist < dbest:
                    dbest = dist
                    best = <int> c
            for c in range(k):
                L[c] = 0.0
            new_labels[i] = best
            own_dist[i] = dbest
            if best != a:
                changed += 1
        free(L)
    return changed


def moved_links_delta(const long[::1] indptr, const int[::1] indices, const double[::1] data,
                      const int[::1] old, const int[::1] new, const long[::1] moved,
                      const unsigned char[::1] is_moved, double[::1] delta):
    """delta[c] += links_new(c, c) − links_old(c, c), from the rows of the moved points only:
    Σ_{i moved} Σ_j A_ij (1 + [j not moved]) ([new_i = new_j = c] − [old_i = old_j = c])
    (an edge to a point that stayed is seen from one side only; the self-loop once). Serial,
    in the order of ``moved``: O(Σ deg of the moved points)."""
    cdef Py_ssize_t t, i, j
    cdef long p
    cdef double a
    with nogil:
        for t in range(moved.shape[0]):
            i = moved[t]
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                a = data[p] if is_moved[j] else 2.0 * data[p]
                if new[i] == new[j]:
                    delta[new[i]] += a
                if old[i] == old[j]:
                    delta[old[i]] -= a


def hartigan_sweeps(const long[::1] indptr, const int[::1] indices, const double[::1] data,
                    const double[::1] deg, int[::1] labels, double[::1] links,
                    double[::1] vol, Py_ssize_t[::1] members, double min_gain,
                    Py_ssize_t max_sweeps):
    """Sweeps over the points in index order, moving each to the cluster that lowers the
    normalized cut most (Δ of the module docstring) when Δ < −min_gain, until a sweep makes no
    move or ``max_sweeps`` were made. No cluster is emptied. ``labels``, ``links``, ``vol``
    and ``members`` are updated in place. One thread (each move changes what the next reads).

    Returns (n_moves, n_sweeps, gain), gain = the total decrease Σ −Δ.
    """
    cdef Py_ssize_t n = labels.shape[0], k = vol.shape[0], i, c, sweep
    cdef Py_ssize_t n_moves = 0, n_sweeps = 0, moved_now
    cdef long p
    cdef int a, b
    cdef double w, s, da, db, cost, best, gain = 0.0
    cdef double *L = <double *> calloc(k, sizeof(double))
    try:
        with nogil:
            for sweep in range(max_sweeps):
                n_sweeps += 1
                moved_now = 0
                for i in range(n):
                    a = labels[i]
                    w = deg[i]
                    if members[a] < 2 or vol[a] - w <= 0.0:
                        continue
                    s = 0.0
                    for p in range(indptr[i], indptr[i + 1]):
                        L[labels[indices[p]]] += data[p]
                        if indices[p] == i:
                            s = data[p]
                    da = (w * links[a] - vol[a] * (2.0 * L[a] - s)) / (vol[a] * (vol[a] - w))
                    best = 0.0
                    b = -1
                    for c in range(k):
                        if c == a or vol[c] <= 0.0:
                            continue
                        db = (vol[c] * (2.0 * L[c] + s) - w * links[c]) / (vol[c] * (vol[c] + w))
                        cost = -da - db
                        if cost < best:
                            best = cost
                            b = <int> c
                    if b >= 0 and best < -min_gain:
                        links[a] = links[a] - 2.0 * L[a] + s
                        links[b] = links[b] + 2.0 * L[b] + s
                        vol[a] -= w
                        vol[b] += w
                        members[a] -= 1
                        members[b] += 1
                        labels[i] = b
                        gain -= best
                        moved_now += 1
                    for c in range(k):
                        L[c] = 0.0
                n_moves += moved_now
                if moved_now == 0:
                    break
    finally:
        free(L)
    return n_moves, n_sweeps, gain


def heavy_edge_matching(const long[::1] indptr, const int[::1] indices, const double[::1] data,
                        const double[::1] deg, const long[::1] order, long[::1] coarse_of):
    """Graclus' coarsening step for the normalized cut (Dhillon, Guan & Kulis, "Weighted graph
    cuts without eigenvectors: a multilevel approach", TPAMI 2007): visit the points in
    ``order``; an unmatched x is merged with the unmatched neighbour y ≠ x that maximises
    A_xy/d_x + A_xy/d_y (the first in row order on ties), or stays alone. Coarse nodes are
    numbered into ``coarse_of`` in the order of their first member, so the coarse graph keeps
    the fine one's locality (numbered in the random visit order, a node's neighbours fall
    anywhere in the coarse arrays: contracting the graph of 10⁶ moons took 4.7 s, now
    0.6 s). Serial. Returns the number of coarse nodes."""
    import numpy as np

    cdef Py_ssize_t n = order.shape[0], t, x, y, best
    cdef long p, m = 0, c
    cdef double score, top
    for t in range(n):
        coarse_of[t] = -1
    with nogil:
        for t in range(n):
            x = order[t]
            if coarse_of[x] >= 0:
                continue
            best = -1
            top = 0.0
            for p in range(indptr[x], indptr[x + 1]):
                y = indices[p]
                if y == x or coarse_of[y] >= 0 or data[p] <= 0.0:
                    continue
                score = data[p] / deg[x] + data[p] / deg[y]
                if score > top:
                    top = score
                    best = y
            coarse_of[x] = m
            if best >= 0:
                coarse_of[best] = m
            m += 1
    renumber_ = np.full(m, -1, dtype=np.int64)
    cdef long[::1] renumber = renumber_
    with nogil:
        c = 0
        for x in range(n):
            if renumber[coarse_of[x]] < 0:
                renumber[coarse_of[x]] = c
                c += 1
            coarse_of[x] = renumber[coarse_of[x]]
    return m


cdef long _coarse_rows(const long[::1] indptr, const int[::1] indices, const double[::1] data,
                       const long[::1] coarse_of, const long[::1] mptr,
                       const long[::1] members, long[::1] last, long[::1] pos,
                       long[::1] Mptr, int[::1] Mcol, double[::1] Mval):
    """M = PᵀAP's rows, unsorted: every coarse node's members in increasing order, each
    member's row in its order, a coarse column's first sight marked in ``last``. Without
    ``Mcol`` (None) only the rows' lengths into ``Mptr``; with it their columns and sums
    (``Mval`` zeroed). Returns the entries."""
    cdef Py_ssize_t m = Mptr.shape[0] - 1, c, cc, t, i
    cdef long e, q = 0
    cdef bint fill = Mcol is not None
    with nogil:
        Mptr[0] = 0
        for c in range(m):
            for t in range(mptr[c], mptr[c + 1]):
                i = members[t]
                for e in range(indptr[i], indptr[i + 1]):
                    cc = coarse_of[indices[e]]
                    if last[cc] != c:
                        last[cc] = c
                        if fill:
                            pos[cc] = q
                            Mcol[q] = <int> cc
                        q += 1
                    if fill:
                        Mval[pos[cc]] += data[e]
            Mptr[c + 1] = q
    return q


def contract_graph(const long[::1] indptr, const int[::1] indices, const double[::1] data,
                   const long[::1] coarse_of, long m):
    """(indptr, indices, data) of R = (M + Mᵀ)/2, M = PᵀAP (P the n × m indicator of
    ``coarse_of``): CSR with sorted indices, exactly symmetric, a sum of zero left out. A must
    have a symmetric pattern (every graph here has). In O(nnz): M's rows unsorted (every
    coarse node's members in increasing order, each member's row in its order, the coarse
    columns found by a marker array), T = Mᵀ by a counting sort (rows sorted, M's pattern),
    then each row of M scattered into a dense row to give R's values on T's indices. Raises
    RuntimeError (an internal error, not the user's data) when the pattern is not
    symmetric."""
    import numpy as np

    cdef Py_ssize_t n = coarse_of.shape[0], i, c, cc
    cdef long p, q, nnz = 0, kept = 0
    cdef double v
    mptr_ = np.zeros(m + 1, dtype=np.int64)
    members_ = np.empty(n, dtype=np.int64)
    last_ = np.full(m, -1, dtype=np.int64)
    cdef long[::1] mptr = mptr_, members = members_, last = last_
    for i in range(n):
        mptr[coarse_of[i] + 1] += 1
    for c in range(m):
        mptr[c + 1] += mptr[c]
    fill_ = np.array(mptr_[:m])
    cdef long[::1] fill = fill_
    Mptr_ = np.empty(m + 1, dtype=np.int64)
    cdef long[::1] Mptr = Mptr_
    with nogil:
        for i in range(n):
            members[fill[coarse_of[i]]] = i
            fill[coarse_of[i]] += 1
    nnz = _coarse_rows(indptr, indices, data, coarse_of, mptr, members, last, fill, Mptr,
                       None, None)
    Mcol_ = np.empty(nnz, dtype=np.int32)
    Mval_ = np.zeros(nnz, dtype=np.float64)
    cdef int[::1] Mcol = Mcol_
    cdef double[::1] Mval = Mval_
    last_[:] = -1
    _coarse_rows(indptr, indices, data, coarse_of, mptr, members, last, fill, Mptr, Mcol, Mval)
    cdef long[::1] pos = fill                       # reused: each row's next slot in T
    Tptr_ = np.zeros(m + 1, dtype=np.int64)
    Tcol_ = np.empty(nnz, dtype=np.int32)
    Tval_ = np.empty(nnz, dtype=np.float64)
    cdef long[::1] Tptr = Tptr_
    cdef int[::1] Tcol = Tcol_
    cdef double[::1] Tval = Tval_
    dense_ = np.zeros(m, dtype=np.float64)
    cdef double[::1] dense = dense_
    cdef bint symmetric = True
    with nogil:
        for q in range(nnz):
            Tptr[Mcol[q] + 1] += 1
        for c in range(m):
            Tptr[c + 1] += Tptr[c]
        for c in range(m):
            pos[c] = Tptr[c]
        for c in range(m):                          # rows of M in order: T's rows sorted
            for q in range(Mptr[c], Mptr[c + 1]):
                cc = Mcol[q]
                Tcol[pos[cc]] = <int> c
                Tval[pos[cc]] = Mval[q]
                pos[cc] += 1
        for c in range(m):
            last[c] = -1
        for c in range(m):                          # R's values on T's indices, in place
            if Mptr[c + 1] - Mptr[c] != Tptr[c + 1] - Tptr[c]:
                symmetric = False
                break
            for q in range(Mptr[c], Mptr[c + 1]):
                dense[Mcol[q]] = Mval[q]
                last[Mcol[q]] = c
            p = Tptr[c]
            Tptr[c] = kept
            for q in range(p, Tptr[c + 1]):
                cc = Tcol[q]
                if last[cc] != c:
                    symmetric = False
                    break
                v = dense[cc] + Tval[q]
                if v != 0.0:
                    Tcol[kept] = <int> cc
                    Tval[kept] = v * 0.5
                    kept += 1
            if not symmetric:
                break
            for q in range(Mptr[c], Mptr[c + 1]):
                dense[Mcol[q]] = 0.0
        if symmetric:
            Tptr[m] = kept
    if not symmetric:
        raise RuntimeError("contract_graph: the graph's pattern is not symmetric (internal)")
    if kept < nnz:                                  # zeros left out: no buffer kept whole
        return Tptr_, Tcol_[:kept].copy(), Tval_[:kept].copy()
    return Tptr_, Tcol_, Tval_
