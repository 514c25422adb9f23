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
    eigenpairs come from a dense ``eigh`` up to ``SPECTRAL_DENSE_MAX`` nodes, Lanczos above.

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

SPECTRAL_DENSE_MAX = 3000    # dense eigh up to this many nodes
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
    """Y = D^{-½}V_kΛ_k^½ of the top k eigenpairs of σI + D^{-½}AD^{-½} (module docstring)."""
    s = 1.0 / np.sqrt(kernel.degrees)
    k = min(k, kernel.n)
    if kernel.n <= SPECTRAL_DENSE_MAX:
        N = kernel.matrix().toarray() * s[:, None] * s[None, :]
        lam, V = np.linalg.eigh(N)
        lam, V = lam[::-1][:k], V[:, ::-1][:, :k]
    else:
        from scipy.sparse.linalg import eigsh

        N = kernel.matrix().multiply(s[:, None]).multiply(s[None, :]).tocsr()
        lam, V = eigsh(N, k=k, which="LA", v0=rng.uniform(0.5, 1.5, kernel.n), tol=1e-6)
        order = np.argsort(-lam, kind="stable")
        lam, V = lam[order], V[:, order]
    lam = np.maximum(lam + kernel.sigma, 0.0)
    return s[:, None] * V * np.sqrt(lam)[None, :]


def spectral_start(kernel, k, rng, n_threads=1):
    """Labels of weighted k-means (weights d) on the spectral embedding."""
    from .optima import embedding_kmeans

    Y = np.ascontiguousarray(spectral_embedding(kernel, k, rng))
    return embedding_kmeans(Y, kernel.degrees, k, rng, n_init=EMBEDDING_N_INIT,
                            n_threads=n_threads)


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
    labels = spectral_start(kernel, k, rng, n_threads)
    labels = refine(kernel, labels, k, max_iter).labels
    for level_A, coarse_of in reversed(levels[1:]):
        labels = labels[coarse_of]
        labels = refine(GraphKernel(level_A, n_threads=n_threads), labels, k, max_iter).labels
    if levels:
        labels = labels[levels[0][1]]
    return np.ascontiguousarray(labels, dtype=np.int32), len(levels)
