"""Starts for the normalized cut of a graph (``engine/graph.py``): components, spectral,
multilevel.

Connected components
    A labelling whose clusters are unions of connected components cuts no edge: ncut = 0, the
    optimum. With exactly k components they are the answer; with more, the components are
    grouped into k clusters by volume, largest first into the lightest cluster (ties: the
    lowest cluster), so that no cluster is a stray speck while the bulk is merged; with fewer,
    a start must split inside them (below).

Spectral (Dhillon, Guan & Kulis, KDD 2004: the relaxation of weighted kernel k-means)
    With K = σD⁻¹ + D⁻¹AD⁻¹ and w = d, W^½KW^½ = σI + D^{-½}AD^{-½} = VΛVᵀ; the rows of
    Y = D^{-½}V_kΛ_k^½ (YYᵀ ≈ K) are clustered by weighted k-means (weights d). The top k
    eigenpairs come from a dense ``eigh`` up to ``SPECTRAL_DENSE_MAX`` nodes, Lanczos above;
    the k-means in the embedding is the best of ``EMBEDDING_N_INIT`` seeded runs.

Multilevel (Dhillon, Guan & Kulis, "Weighted graph cuts without eigenvectors: a multilevel
approach", TPAMI 2007 — Graclus)
    Coarsen by heavy-edge matching (``_graph.heavy_edge_matching``: x merged with the unmatched
    neighbour maximising A_xy/d_x + A_xy/d_y, in a seeded random order); a coarse node carries
    the sum of its points' edges, A_c = PᵀAP (P the n×m assignment), internal edges becoming
    self-loops, so degrees, volumes, links and the normalized cut of every labelling of coarse
    nodes are those of its projection. Coarsening stops at ``coarse_nodes(k)`` nodes (or when a
    level shrinks by less than 5%); the coarsest graph gets the spectral start, and the labels
    are refined by the graph kernel k-means (Lloyd and Hartigan, ``graph.refine``) at every
    level on the way back up. Every level costs O(nnz), so the start is O(nnz · levels).
"""
import numpy as np

from . import _graph
from .graph import GraphKernel, refine

SPECTRAL_DENSE_MAX = 500     # dense eigh up to this many nodes (Lanczos above)
COARSE_PER_CLUSTER = 40      # coarsest graph: max(COARSE_MIN, COARSE_PER_CLUSTER · k) nodes
COARSE_MIN = 200
MIN_SHRINK = 0.95            # stop coarsening when a level keeps more than this fraction
EMBEDDING_N_INIT = 10


def component_start(components, n_components, degrees, k):
    """Labels from the connected components (module docstring), or None when there are fewer
    than k of them."""
    if n_components < k:
        return None
    if n_components == k:
        return np.ascontiguousarray(components, dtype=np.int32)
    vol = np.bincount(components, weights=degrees, minlength=n_components)
    group = np.empty(n_components, dtype=np.int32)
    load = np.zeros(k)
    for comp in np.argsort(-vol, kind="stable"):
        c = int(np.argmin(load))
        group[comp] = c
        load[c] += vol[comp]
    return group[components]


def spectral_embedding(kernel, k, rng):
    """Y = D^{-½}V_kΛ_k^½ of the top k eigenpairs of σI + D^{-½}AD^{-½} (module docstring):
    a dense ``eigh`` up to ``SPECTRAL_DENSE_MAX`` nodes, else Lanczos on the sparse matrix."""
    s = 1.0 / np.sqrt(kernel.degrees)
    k = min(k, kernel.n)
    N = kernel.matrix().multiply(s[:, None]).multiply(s[None, :]).tocsr()
    if kernel.n <= SPECTRAL_DENSE_MAX or k >= kernel.n - 1:
        lam, V = np.linalg.eigh(N.toarray())
        lam, V = lam[::-1][:k], V[:, ::-1][:, :k]
    else:
        from scipy.sparse.linalg import eigsh

        lam, V = eigsh(N, k=k, which="LA", v0=rng.uniform(0.5, 1.5, kernel.n), tol=1e-8)
        order = np.argsort(-lam, kind="stable")
        lam, V = lam[order], V[:, order]
    lam = np.maximum(lam + kernel.sigma, 0.0)
    return s[:, None] * V * np.sqrt(lam)[None, :]


def spectral_start(kernel, k, rng, embedding=None):
    """Labels of weighted k-means (weights d) on the spectral embedding (computed unless
    given: the restarts of one fit share it)."""
    Y = spectral_embedding(kernel, k, rng) if embedding is None else embedding
    return weighted_kmeans(Y, kernel.degrees, k, rng, EMBEDDING_N_INIT)


def weighted_kmeans(Y, w, k, rng, n_init=EMBEDDING_N_INIT, max_iter=100):
    """Weighted k-means on the rows of Y (n×r, r small): the best of ``n_init`` runs of
    Lloyd's iterations from weighted k-means++ seeds, by Σ w_i ‖y_i − μ_c(i)‖². Returns int32
    labels with k non-empty clusters (an emptied cluster takes the farthest point)."""
    best, best_cost = None, np.inf
    for _ in range(n_init):
        labels = _lloyd_rows(Y, w, _plusplus(Y, w, k, rng), max_iter)
        centres = _centres(Y, w, labels, k)
        cost = float(w @ ((Y - centres[labels]) ** 2).sum(1))
        if cost < best_cost:
            best, best_cost = labels, cost
    return best.astype(np.int32)


def _plusplus(Y, w, k, rng):
    """Weighted k-means++ seeds (indices of k rows)."""
    seeds = [int(rng.choice(Y.shape[0], p=w / w.sum()))]
    d2 = ((Y - Y[seeds[0]]) ** 2).sum(1)
    for _ in range(1, k):
        p = w * d2
        i = int(rng.choice(Y.shape[0], p=p / p.sum())) if p.sum() > 0 else \
            int(rng.integers(Y.shape[0]))
        seeds.append(i)
        d2 = np.minimum(d2, ((Y - Y[i]) ** 2).sum(1))
    return Y[seeds]


def _centres(Y, w, labels, k):
    W = np.bincount(labels, weights=w, minlength=k)
    S = np.stack([np.bincount(labels, weights=w * Y[:, j], minlength=k)
                  for j in range(Y.shape[1])], axis=1)
    return S / np.where(W > 0, W, 1.0)[:, None]


def _lloyd_rows(Y, w, centres, max_iter):
    k = centres.shape[0]
    labels = None
    for _ in range(max_iter):
        D = ((Y[:, None, :] - centres[None, :, :]) ** 2).sum(-1)
        new = np.argmin(D, axis=1)
        counts = np.bincount(new, minlength=k)
        for c in np.flatnonzero(counts == 0):
            far = int(np.argmax(D[np.arange(Y.shape[0]), new]))
            if counts[new[far]] > 1:
                counts[new[far]] -= 1
                new[far] = c
                counts[c] = 1
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        centres = _centres(Y, w, labels, k)
    return labels


def coarse_nodes(k):
    return max(COARSE_MIN, COARSE_PER_CLUSTER * k)


def coarsen(A, rng, target):
    """The levels of heavy-edge matching: [(A_0, coarse_of_0), (A_1, coarse_of_1), ...] and
    the coarsest graph; coarse_of_l maps the nodes of A_l to those of A_{l+1}."""
    levels = []
    while A.shape[0] > target:
        kernel = GraphKernel(A, sigma=0.0)
        coarse_of = np.empty(kernel.n, dtype=np.int64)
        order = rng.permutation(kernel.n).astype(np.int64)
        m = _graph.heavy_edge_matching(kernel.indptr, kernel.indices, kernel.data,
                                       kernel.degrees, order, coarse_of)
        if m > MIN_SHRINK * kernel.n:
            break
        levels.append((A, coarse_of))
        A = contract(A, coarse_of, m)
    return levels, A


def contract(A, coarse_of, m):
    """PᵀAP, made exactly symmetric ((M + Mᵀ)/2), CSR with sorted indices."""
    from scipy import sparse

    n = A.shape[0]
    P = sparse.csr_matrix((np.ones(n), (np.arange(n), coarse_of)), shape=(n, m))
    M = (P.T @ A @ P).tocsr()
    M = ((M + M.T) * 0.5).tocsr()
    M.sum_duplicates()
    M.sort_indices()
    return M


def multilevel_start(A, k, rng, max_iter=300, n_threads=1):
    """Labels of the multilevel scheme (module docstring), refined at every level but the
    finest (the caller refines that one). Returns (labels, number of levels)."""
    levels, coarsest = coarsen(A, rng, coarse_nodes(k))
    kernel = GraphKernel(coarsest, n_threads=n_threads)
    labels = spectral_start(kernel, k, rng)
    labels = refine(kernel, labels, k, max_iter).labels
    for level_A, coarse_of in reversed(levels[1:]):
        labels = labels[coarse_of]
        labels = refine(GraphKernel(level_A, n_threads=n_threads), labels, k, max_iter).labels
    if levels:
        labels = labels[levels[0][1]]
    return np.ascontiguousarray(labels, dtype=np.int32), len(levels)
