"""The silhouette in the feature space of a graph kernel, in O(nnz + n·(k + P)), nothing n×n.

For the graph kernel K = σD⁻¹ + D⁻¹AD⁻¹ (``engine/graph.py``) the feature-space distance of
two nodes is δ_ij = √max(K_ii + K_jj − 2K_ij, 0) with K_ij = A_ij/(d_i d_j) (i ≠ j), which is
√(v_i + v_j), v = diag K, for every pair that is not an edge. So the sum of distances from i
to the nodes of cluster c is

    S(i, c) = f_c(v_i) − [i ∈ c] √(2v_i) + Σ_{j∈N(i)∩c, j≠i} (δ_ij − √(v_i + v_j)),
    f_c(x)  = Σ_{j∈c} √(x + v_j),

the correction running over the edges only. f_c is evaluated exactly on the distinct values of
v when there are few (a connectivity graph's degrees are multiples of ½), else by Chebyshev
interpolation on the pieces [2^p v_min, 2^{p+1} v_min] (f_c is analytic there, its nearest
singularity −v_min far from each piece, so ``CHEB_NODES`` nodes reach rounding level). Then,
as Rousseeuw's silhouette, a(i) = S(i, c(i))/(n_c(i) − 1), b(i) = min_{c≠c(i)} S(i, c)/n_c,
s(i) = (b − a)/max(a, b) (0 for a singleton), averaged over the nodes: equal to scikit-learn's
``silhouette_score`` on the dense matrix δ with ``metric='precomputed'``.
"""
import numpy as np

CHEB_NODES = 24          # Chebyshev points per piece
EXACT_DISTINCT = 512     # at most this many distinct v: f_c evaluated exactly on them
ROW_BLOCK = 1 << 16


def graph_silhouette(kernel, labels, k, return_samples=False):
    """Mean silhouette of ``labels`` (0 … k−1, ≥ 2 clusters) on a ``GraphKernel``'s nodes."""
    labels = np.asarray(labels, dtype=np.int64)
    v = kernel.diag
    S = _cluster_sums_of_roots(v, labels, k)
    S[np.arange(kernel.n), labels] -= np.sqrt(2.0 * v)
    S += _edge_corrections(kernel, labels, k)
    size = np.bincount(labels, minlength=k).astype(np.float64)
    own = size[labels]
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(own > 1, S[np.arange(kernel.n), labels] / (own - 1), 0.0)
        M = np.where(size > 0, S / np.where(size > 0, size, 1.0), np.inf)
    M[np.arange(kernel.n), labels] = np.inf
    b = M.min(axis=1)
    top = np.maximum(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where((own > 1) & (top > 0), (b - a) / top, 0.0)
    return s if return_samples else float(s.mean())


def _cluster_sums_of_roots(v, labels, k):
    """f_c(v_i) = Σ_{j∈c} √(v_i + v_j) for every node i and cluster c (n×k)."""
    values, where = np.unique(v, return_inverse=True)
    out = np.empty((v.size, k))
    if values.size <= EXACT_DISTINCT:
        for c in range(k):
            u, counts = np.unique(v[labels == c], return_counts=True)
            table = np.sqrt(values[:, None] + u[None, :]) @ counts.astype(np.float64)
            out[:, c] = table[where.reshape(-1)]
        return out
    for c in range(k):
        out[:, c] = _chebyshev_roots(v[labels == c], values)[where.reshape(-1)]
    return out


def _chebyshev_roots(members, x):
    """Σ_j √(x + members_j) at every x ≥ 0 by Chebyshev interpolation on dyadic pieces
    (x = 0, a node without shift or self-loop, directly)."""
    out = np.empty(x.size)
    zero = x <= 0.0
    out[zero] = np.sqrt(members).sum()
    if zero.all():
        return out
    lo = float(x[~zero].min())
    piece = np.full(x.size, -1, dtype=np.int64)
    piece[~zero] = np.floor(np.log2(x[~zero] / lo)).astype(np.int64)
    t = np.cos(np.pi * np.arange(CHEB_NODES + 1) / CHEB_NODES)
    bary = (-1.0) ** np.arange(CHEB_NODES + 1)
    bary[[0, -1]] *= 0.5
    for p in np.unique(piece[~zero]):
        a, b = lo * 2.0 ** p, lo * 2.0 ** (p + 1)
        nodes = 0.5 * (a + b) + 0.5 * (b - a) * t
        f = _sum_roots(nodes, members)
        sel = np.flatnonzero(piece == p)
        out[sel] = _barycentric(x[sel], nodes, f, bary)
    return out


def _sum_roots(points, members):
    """Σ_j √(p + members_j) for each p (members in blocks)."""
    total = np.zeros(points.size)
    for s in range(0, members.size, ROW_BLOCK):
        total += np.sqrt(points[:, None] + members[None, s:s + ROW_BLOCK]).sum(axis=1)
    return total


def _barycentric(x, nodes, f, bary):
    """The interpolant through (nodes, f) at x (second barycentric formula)."""
    diff = x[:, None] - nodes[None, :]
    exact = diff == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        q = bary[None, :] / diff
        value = (q @ f) / q.sum(axis=1)
    hit = exact.any(axis=1)
    value[hit] = f[np.argmax(exact[hit], axis=1)]
    return value


def _edge_corrections(kernel, labels, k):
    """Σ_{j∈N(i)∩c, j≠i} (δ_ij − √(v_i + v_j)) for every node i and cluster c (n×k)."""
    n, v, d = kernel.n, kernel.diag, kernel.degrees
    out = np.zeros(n * k)
    for r0 in range(0, n, ROW_BLOCK):
        r1 = min(n, r0 + ROW_BLOCK)
        p0, p1 = kernel.indptr[r0], kernel.indptr[r1]
        rows = np.repeat(np.arange(r0, r1), np.diff(kernel.indptr[r0:r1 + 1]))
        cols = kernel.indices[p0:p1].astype(np.int64)
        keep = cols != rows
        rows, cols, a = rows[keep], cols[keep], kernel.data[p0:p1][keep]
        base = v[rows] + v[cols]
        corr = np.sqrt(np.maximum(base - 2.0 * a / (d[rows] * d[cols]), 0.0)) - np.sqrt(base)
        out += np.bincount(rows * k + labels[cols], weights=corr, minlength=n * k)
    return out.reshape(n, k)
