# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The symmetrized neighbour graph and its connected components, from the neighbour lists.

``kernels/graph.py``: row i lists its k neighbours idx[i, :] with weights B[i, :]. The graph
A = (B + Bᵀ)/2 is assembled as CSR in O(nnz log deg): every listed edge i → j adds B_ij/2 to
A_ij and to A_ji; each row is then sorted by column and equal columns merged, so
A_ij = B_ij/2 + B_ji/2 = A_ji exactly (the same two halves, added in either order). The
connected components of A are those of the lists read as undirected edges (union-find).
"""
from libc.stdlib cimport qsort


cdef struct Entry:
    int col
    double val


cdef int _by_column(const void *a, const void *b) noexcept nogil:
    cdef int ca = (<Entry *> a).col, cb = (<Entry *> b).col
    return (ca > cb) - (ca < cb)


def symmetrize_lists(const long[:, ::1] idx, const double[:, ::1] B):
    """(indptr int64, indices int32, data float64) of (B + Bᵀ)/2, columns sorted."""
    import numpy as np

    cdef Py_ssize_t n = idx.shape[0], k = idx.shape[1], i, t, j, r, w
    cdef long[::1] count = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        for t in range(k):
            count[i + 1] += 1
            count[idx[i, t] + 1] += 1
    for i in range(n):
        count[i + 1] += count[i]
    cdef long total = count[n]
    entries_arr = np.empty(total * 16, dtype=np.uint8)
    cdef Entry *entries = <Entry *> <size_t> entries_arr.ctypes.data
    cdef long[::1] fill = np.array(count[:n], dtype=np.int64)
    cdef double half
    with nogil:
        for i in range(n):
            for t in range(k):
                j = idx[i, t]
                half = 0.5 * B[i, t]
                entries[fill[i]].col = <int> j
                entries[fill[i]].val = half
                fill[i] += 1
                entries[fill[j]].col = <int> i
                entries[fill[j]].val = half
                fill[j] += 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    indices = np.empty(total, dtype=np.int32)
    data = np.empty(total, dtype=np.float64)
    cdef long[::1] ip = indptr
    cdef int[::1] ind = indices
    cdef double[::1] dat = data
    cdef long p, start, end
    w = 0
    with nogil:
        for i in range(n):
            start = count[i]
            end = count[i + 1]
            qsort(&entries[start], end - start, sizeof(Entry), _by_column)
            p = start
            while p < end:
                ind[w] = entries[p].col
                dat[w] = entries[p].val
                p += 1
                while p < end and entries[p].col == ind[w]:
                    dat[w] = dat[w] + entries[p].val
                    p += 1
                w += 1
            ip[i + 1] = w
    return indptr, indices[:w].copy(), data[:w].copy()


cdef inline Py_ssize_t _root(long[::1] parent, Py_ssize_t i) noexcept nogil:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def list_components(const long[:, ::1] idx):
    """(count, component of each node as int32): components numbered by their lowest node,
    as ``scipy.sparse.csgraph.connected_components`` numbers them."""
    import numpy as np

    cdef Py_ssize_t n = idx.shape[0], k = idx.shape[1], i, t, a, b
    cdef long[::1] parent = np.arange(n, dtype=np.int64)
    comp = np.empty(n, dtype=np.int32)
    cdef int[::1] c = comp
    cdef long[::1] number = np.full(n, -1, dtype=np.int64)
    cdef long m = 0
    with nogil:
        for i in range(n):
            for t in range(k):
                a = _root(parent, i)
                b = _root(parent, idx[i, t])
                if a < b:
                    parent[b] = a
                elif b < a:
                    parent[a] = b
        for i in range(n):
            a = _root(parent, i)
            if number[a] < 0:
                number[a] = m
                m += 1
            c[i] = <int> number[a]
    return int(m), comp
