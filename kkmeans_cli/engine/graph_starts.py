"""Starts for the normalized cut of a graph (``engine/graph.py``): components, the default
NJW and over-segment-and-merge starts, and the earlier spectral and multilevel starts.

Connected components
    A labelling whose clusters are unions of connected components cuts no edge: ncut = 0, the
    optimum. With exactly k components they are the answer; with more, and no way to join
    them (``kernels.graph.join_components``), the components are grouped into k clusters by
    volume, largest first into the lightest cluster (ties: the lowest cluster); with fewer, a
    start must split inside them (below).

The default starts (``default_starts``, ``best_default_start``)
    One NJW start (Ng, Jordan & Weiss, "On spectral clustering: analysis and an algorithm",
    NIPS 2001: the rows of the top-k eigenvectors of D^{-½}AD^{-½} normalised, k-means) and
    over-segment-and-merge starts: NJW into k' = 2k, 3k, 4k, 6k and 10k pieces (all but 2k
    only while k' is at most ``PIECES_MAX``: ``oversegment_multiples``), merged greedily down
    to k, each merge the pair whose union raises ncut least (``merge_to_k``). Spectral starts alone land
    in the arc cut of rings and noisy circles; merging arcs by least ncut does not
    (docs/engine.md). Up to ``SPECTRAL_DIRECT_MAX`` nodes on the graph itself, above
    on its multilevel coarsening (below), where the best start is carried up. Given a choice
    graph (``kernels.graph.choice_graph``), the starts run on it instead and only the one that
    cuts it least after refinement is returned, for the caller to refine on its own graph.

Spectral (Dhillon, Guan & Kulis, KDD 2004: the relaxation of weighted kernel k-means)
    With K = σD⁻¹ + D⁻¹AD⁻¹ and w = d, W^½KW^½ = σI + D^{-½}AD^{-½} = VΛVᵀ; the rows of
    Y = D^{-½}V_kΛ_k^½ (YYᵀ ≈ K) are clustered by weighted k-means (weights d). The top k
    eigenpairs come from a dense ``eigh`` up to ``SPECTRAL_DENSE_MAX`` nodes, Lanczos above
    (the eigenvectors of a disconnected graph's components written down: ``top_eigenvectors``);
    the k-means in the embedding is the best of ``EMBEDDING_N_INIT`` seeded runs
    (``start='spectral'``).

Multilevel (Dhillon, Guan & Kulis, "Weighted graph cuts without eigenvectors: a multilevel
approach", TPAMI 2007 — Graclus)
    Coarsen by heavy-edge matching (``_graph.heavy_edge_matching``: x merged with the unmatched
    neighbour maximising A_xy/d_x + A_xy/d_y, in a seeded random order); a coarse node carries
    the sum of its points' edges, A_c = PᵀAP (P the n×m assignment), internal edges becoming
    self-loops, so degrees, volumes, links and the normalized cut of every labelling of coarse
    nodes are those of its projection. ``start='multilevel'`` coarsens to ``coarse_nodes(k)``
    nodes (or until a level shrinks by less than 5%), starts the coarsest graph spectrally and
    refines the labels by the graph kernel k-means (Lloyd and Hartigan, ``graph.refine``) at
    every level on the way back up. Every level costs O(nnz), so the start is O(nnz · levels).
"""
import numpy as np

from ..errors import DataError
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
    """Y = D^{-½}V_kΛ_k^½ of the top k eigenpairs of σI + D^{-½}AD^{-½} (module docstring;
    the eigenpairs of ``top_eigenvectors``; :class:`EigenvectorsFailed`, naming the default
    starts as the way out, when there are none)."""
    try:
        return _embedding(kernel, k, rng)
    except EigenvectorsFailed as exc:
        raise EigenvectorsFailed(f"the spectral start: {exc}; the default starts "
                                 f"(init='k-means++') need no eigenvectors of a graph this "
                                 f"large") from None


def _embedding(kernel, k, rng):
    s = 1.0 / np.sqrt(kernel.degrees)
    lam, V = top_eigenvectors(kernel, min(k, kernel.n), rng)
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
    """PᵀAP (P the indicator of ``coarse_of``), made exactly symmetric ((M + Mᵀ)/2), CSR with
    sorted indices, in O(nnz) (``_graph.contract_graph``; at 10⁶ moons 1.2–2× quicker than
    SciPy's two sparse products, transpose and sum: the same sums in another order, so the
    same values for connectivity weights (sums of halves, exact) and within a few ulps for
    others)."""
    from scipy import sparse

    indptr, indices, data = _graph.contract_graph(
        np.ascontiguousarray(A.indptr, dtype=np.int64),
        np.ascontiguousarray(A.indices, dtype=np.int32),
        np.ascontiguousarray(A.data, dtype=np.float64),
        np.ascontiguousarray(coarse_of, dtype=np.int64), int(m))
    M = sparse.csr_matrix((data, indices, indptr), shape=(m, m))
    M.has_sorted_indices = True
    return M


def multilevel_start(A, k, rng, max_iter=300, n_threads=1):
    """Labels of the multilevel scheme (module docstring), refined at every level but the
    finest (the caller refines that one). Returns (labels, number of levels)."""
    levels, coarsest = coarsen(A, rng, coarse_nodes(k))
    kernel = GraphKernel(coarsest, n_threads=n_threads)
    try:
        embedding = _embedding(kernel, k, rng)
    except EigenvectorsFailed as exc:
        raise EigenvectorsFailed(f"the multilevel start, on its coarsest graph: {exc}") \
            from None
    labels = spectral_start(kernel, k, rng, embedding)
    labels = refine(kernel, labels, k, max_iter).labels
    for level_A, coarse_of in reversed(levels[1:]):
        labels = labels[coarse_of]
        labels = refine(GraphKernel(level_A, n_threads=n_threads), labels, k, max_iter).labels
    if levels:
        labels = labels[levels[0][1]]
    return np.ascontiguousarray(labels, dtype=np.int32), len(levels)


# -- the default starts: NJW, and over-segment then merge --------------------------------------
OVERSEGMENT = (2, 3, 4, 6, 10)  # the merge starts split into these multiples of k first: 2k
PIECES_MAX = 100                # always, the others while they are at most this many pieces.
# 10k finds the three rings' lower cut, which every coarser start missed on 3 of 200 draws
# (1.1–1.5× the time of a fit of k ≤ 10); past 100 pieces the finer starts cost the most
# eigenvectors and found the same cut on 21 of 26 sets of k = 20–100 (a lower one by at
# most 2.8 % on the others) at 1.1–11 times the time (docs/performance.md)
SPECTRAL_DIRECT_MAX = 5000   # eigenvectors of the graph itself up to this many nodes, else of
                             # its multilevel coarsening (Lanczos slows sharply above: 20 s at
                             # 2·10⁴ nodes, 220 s at 10⁵ for 12 vectors of a moons graph)
EIGEN_TOL = 1e-8
DENSE_FALLBACK_MAX = 10_000  # a dense eigh when Lanczos fails, up to this many nodes
DENSE_FRACTION = 7           # a dense eigh for r ≥ n/7 vectors: Lanczos is slower there (1,000
                             # moons, 200 vectors: 0.55 s against 0.22 s; 3,000, 600: 18 s
                             # against 5.6 s; 300: 2.2 s, Lanczos still ahead)
DENSE_FRACTION_MAX = 2000    # … up to this many nodes (its n × n arrays: 32 MB each)


class EigenvectorsFailed(DataError):
    """Lanczos did not converge on a graph too large for the dense solver (more than
    ``DENSE_FALLBACK_MAX`` nodes): one line for the user, a ``ValueError`` for the API. The
    callers that can do without the eigenvectors do (the default starts of a coarse graph fall
    back to the multilevel start); the others add what they needed them for and the way out."""


def top_eigenvectors(kernel, r, rng):
    """(λ, V): the r largest eigenpairs of N = D^{-½}AD^{-½}, λ descending (a dense ``eigh``
    up to ``SPECTRAL_DENSE_MAX`` nodes, or up to ``DENSE_FRACTION_MAX`` when r ≥
    n/``DENSE_FRACTION``; Lanczos above, the dense solver
    again when Lanczos does not converge, up to ``DENSE_FALLBACK_MAX`` nodes; above,
    :class:`EigenvectorsFailed`, never SciPy's ``ArpackNoConvergence``).

    Lanczos finds one vector of a repeated eigenvalue, and a graph of c components has the
    eigenvalue 1 c times (eigenvectors D^{½}1_C/√vol(C)). So above ``SPECTRAL_DENSE_MAX``
    nodes those c vectors are written down (largest volume first) and Lanczos runs on N with
    their space moved to the eigenvalue −2, below N's spectrum [−1, 1]."""
    n = kernel.n
    r = int(min(r, n))
    s = 1.0 / np.sqrt(kernel.degrees)
    N = kernel.matrix().multiply(s[:, None]).multiply(s[None, :]).tocsr()
    if n > SPECTRAL_DENSE_MAX and r < n - 1 and (r * DENSE_FRACTION < n
                                                  or n > DENSE_FRACTION_MAX):
        from scipy.sparse.linalg import ArpackNoConvergence

        try:
            return _lanczos_top(N, kernel.degrees, r, rng)
        except ArpackNoConvergence as exc:
            if n > DENSE_FALLBACK_MAX:
                raise EigenvectorsFailed(
                    f"Lanczos did not converge to the {r} largest eigenvalues of the graph's "
                    f"normalized affinity D^-1/2 A D^-1/2 ({n:,} nodes, more than the "
                    f"{DENSE_FALLBACK_MAX:,} the dense solver takes; {exc})") from None
    lam, V = np.linalg.eigh(N.toarray())
    return lam[::-1][:r], V[:, ::-1][:, :r]


def _lanczos_top(N, degrees, r, rng):
    """``top_eigenvectors`` by Lanczos, the components' eigenvectors written down."""
    from scipy.sparse.csgraph import connected_components
    from scipy.sparse.linalg import LinearOperator, eigsh

    n = N.shape[0]
    v0 = rng.uniform(-1.0, 1.0, n)
    c, comp = connected_components(N, directed=False)
    if c == 1:
        lam, V = eigsh(N, k=r, which="LA", v0=v0, tol=EIGEN_TOL)
        order = np.argsort(-lam, kind="stable")
        return lam[order], V[:, order]
    root, vol = np.sqrt(degrees), np.bincount(comp, weights=degrees, minlength=c)
    by_volume = np.argsort(-vol, kind="stable")
    U = np.zeros((n, min(r, c)))
    for j, comp_j in enumerate(by_volume[:U.shape[1]]):
        inside = comp == comp_j
        U[inside, j] = root[inside] / np.sqrt(vol[comp_j])
    if r <= c:
        return np.ones(r), U

    def deflated(x):
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        on_u = np.bincount(comp, weights=root * x, minlength=c) / vol
        return N @ x - 3.0 * root * on_u[comp]

    op = LinearOperator((n, n), matvec=deflated, dtype=np.float64)
    lam, V = eigsh(op, k=r - c, which="LA", v0=v0, tol=EIGEN_TOL)
    order = np.argsort(-lam, kind="stable")
    return np.concatenate([np.ones(c), lam[order]]), np.hstack([U, V[:, order]])


def njw_labels(V, k, rng):
    """Ng, Jordan & Weiss ("On spectral clustering: analysis and an algorithm", NIPS 2001):
    the rows of the top-k eigenvectors normalised to unit length, clustered by k-means (one
    run from greedy k-means++ seeds). int32 labels; fewer than k clusters only when V has
    fewer than k distinct rows."""
    Y = V[:, :k] / np.maximum(np.linalg.norm(V[:, :k], axis=1, keepdims=True), 1e-300)
    return kmeans_rows(Y, k, rng)


def kmeans_rows(Y, k, rng, max_iter=300):
    """k-means (unweighted) on the rows of a small Y: greedy k-means++ seeds (2 + ⌊ln k⌋
    candidates a step, as scikit-learn's KMeans), then Lloyd's iterations with distances by
    ‖y‖² − 2y·c + ‖c‖² (n×k, never n×k×r); an emptied cluster takes the farthest point."""
    n = Y.shape[0]
    yy = np.einsum("ij,ij->i", Y, Y)

    def sqdist(C):
        return np.maximum(yy[:, None] - 2.0 * (Y @ C.T) + np.einsum("ij,ij->i", C, C)[None, :],
                          0.0)

    trials = 2 + int(np.log(k))
    first = int(rng.integers(n))
    d2 = sqdist(Y[first:first + 1])[:, 0]
    seeds = [first]
    for _ in range(1, k):
        total = d2.sum()
        cand = rng.choice(n, size=trials, p=d2 / total) if total > 0 else \
            rng.integers(n, size=trials)
        D = np.minimum(d2[:, None], sqdist(Y[cand]))
        best = int(np.argmin(D.sum(0)))
        seeds.append(int(cand[best]))
        d2 = D[:, best]
    C = Y[seeds].copy()
    labels = None
    for _ in range(max_iter):
        D = sqdist(C)
        new = np.argmin(D, axis=1)
        counts = np.bincount(new, minlength=k)
        for c in np.flatnonzero(counts == 0):
            near = D[np.arange(n), new]
            movable = counts[new] > 1
            if not movable.any():
                break
            far = int(np.argmax(np.where(movable, near, -1.0)))
            counts[new[far]] -= 1
            new[far], counts[c] = c, 1
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        W = np.bincount(labels, minlength=k).astype(np.float64)
        C = np.stack([np.bincount(labels, weights=Y[:, j], minlength=k)
                      for j in range(Y.shape[1])], axis=1) / np.maximum(W, 1.0)[:, None]
    return labels.astype(np.int32)


def cluster_links(kernel, labels, kp):
    """M[a, b] = Σ_{i∈a, j∈b} A_ij (kp×kp, dense: kp is small) and vol (kp,)."""
    from scipy import sparse

    Z = sparse.csr_matrix((np.ones(kernel.n), (np.arange(kernel.n), labels)),
                          shape=(kernel.n, kp))
    M = np.asarray((Z.T @ kernel.matrix() @ Z).todense())
    return (M + M.T) * 0.5, np.bincount(labels, weights=kernel.degrees, minlength=kp)


def merge_increase(M, vol, a, b):
    """The increase of ncut when clusters a and b merge: links(a∪b) = M_aa + M_bb + 2M_ab,
    vol(a∪b) = vol_a + vol_b, one cluster less:
    M_aa/vol_a + M_bb/vol_b − (M_aa + M_bb + 2M_ab)/(vol_a + vol_b) − 1."""
    return (M[a, a] / vol[a] + M[b, b] / vol[b]
            - (M[a, a] + M[b, b] + 2.0 * M[a, b]) / (vol[a] + vol[b]) - 1.0)


def merge_to_k(kernel, labels, k):
    """Merge the clusters of ``labels`` greedily down to k, each merge the pair whose union
    raises ncut least (the first pair in index order on ties). Returns (int32 labels
    numbered 0 … k−1 in order of their lowest old cluster, the ncut increase of each merge).

    The increases of all pairs are held in one upper-triangular table; a merge of a and b
    (a < b) retires b's row and column and recomputes a's alone, so k' pieces cost O(k'²) a
    merge, not O(k'²) to rebuild the table and as much again to copy the links."""
    labels = np.unique(labels, return_inverse=True)[1].reshape(-1)
    kp = int(labels.max()) + 1
    M, vol = cluster_links(kernel, labels, kp)
    dg = np.diag(M).copy()
    own = dg / vol
    D = (own[:, None] + own[None, :]
         - (dg[:, None] + dg[None, :] + 2.0 * M) / (vol[:, None] + vol[None, :]) - 1.0)
    D[np.tril_indices(kp)] = np.inf
    alive = np.ones(kp, dtype=bool)
    group = np.arange(kp)
    increases = []
    for _ in range(kp - k):
        a, b = np.unravel_index(int(np.argmin(D)), D.shape)     # row-major: first pair
        a, b = int(a), int(b)
        delta = merge_increase(M, vol, a, b)
        M[a, :] += M[b, :]
        M[:, a] += M[:, b]
        vol[a] += vol[b]
        group[group == b] = a
        alive[b] = False
        D[b, :] = np.inf
        D[:, b] = np.inf
        dg[a], own[a] = M[a, a], M[a, a] / vol[a]
        lo, hi = np.flatnonzero(alive[:a]), a + 1 + np.flatnonzero(alive[a + 1:])
        D[lo, a] = (own[lo] + own[a] - (dg[lo] + dg[a] + 2.0 * M[lo, a]) / (vol[lo] + vol[a])
                    - 1.0)
        D[a, hi] = (own[a] + own[hi] - (dg[a] + dg[hi] + 2.0 * M[a, hi]) / (vol[a] + vol[hi])
                    - 1.0)
        increases.append(float(delta))
    new = np.empty(kp, dtype=np.int32)
    for i, c in enumerate(np.flatnonzero(alive)):
        new[group == c] = i
    return new[labels], increases


def oversegment_multiples(k):
    """The multiples m of k that the merge starts of k clusters split into first: the first
    of ``OVERSEGMENT`` (2), and each other while m·k ≤ ``PIECES_MAX`` (all five up to k = 10,
    2–6 up to 16, 2–4 up to 25, 2 and 3 up to 33, 2 alone above)."""
    return tuple(m for i, m in enumerate(OVERSEGMENT) if i == 0 or m * k <= PIECES_MAX)


def default_starts(kernel, k, rng):
    """[(kind, labels)] of the default starts on one graph (Ng, Jordan & Weiss; the merge
    starts): one NJW start on the top k eigenvectors of D^{-½}AD^{-½}, and for k' = m·k, m of
    ``oversegment_multiples(k)`` (2k, and 3k, 4k, 6k, 10k up to 100 pieces; at most n − 2), NJW
    into k' pieces merged greedily down to k (``merge_to_k``). The top max(k + 1, k'max)
    eigenvectors are computed once; their prefixes serve every k'. Starts with fewer than k
    clusters, and repeats of an earlier start, are left out."""
    n = kernel.n
    multiples = oversegment_multiples(k)
    r = max(k + 1, min(max(multiples) * k, n - 2))
    _, V = top_eigenvectors(kernel, r, rng)
    starts = [("spectral", njw_labels(V, k, rng))]
    for mult in multiples:
        kp = min(mult * k, V.shape[1])
        if kp <= k:
            continue
        pieces = njw_labels(V, kp, rng)
        starts.append((f"merge-{mult}k", merge_to_k(kernel, pieces, k)[0]))
    out, seen = [], set()
    for kind, labels in starts:
        key = canonical_labels(labels).tobytes()
        if np.unique(labels).size < k or key in seen:
            continue
        seen.add(key)
        out.append((kind, np.ascontiguousarray(labels, dtype=np.int32)))
    return out


def canonical_labels(labels):
    """Labels renumbered by first appearance (two labellings equal up to names compare
    equal)."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int32)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size, dtype=np.int32)
    return rank[inverse.reshape(-1)]


def best_default_start(A, k, rng, max_iter=300, n_threads=1, choice=None):
    """The default starts (``default_starts``) on A itself up to ``SPECTRAL_DIRECT_MAX``
    nodes; above, on its multilevel coarsening (heavy-edge matching down to that many nodes:
    the ncut of a coarse labelling is that of its projection), where every start is refined
    and the lowest ncut (first on ties) is carried up, refined at every level but the finest.
    With ``choice`` (a graph of A's nodes: ``kernels.graph.choice_graph``) all of this runs on
    ``choice`` instead, and on a small graph too only the start whose refinement cuts
    ``choice`` least is returned (its refined labels: ``lowest_refined``).

    Returns (runs, levels): runs [(kind, labels)] to refine on A — every default start when
    A is small, the carried-up winner otherwise, none when Lanczos fails on a graph too large
    for the dense solver (the caller falls back to the multilevel start) — and the number of
    coarsening levels."""
    if choice is not None:
        A = choice
    if A.shape[0] <= SPECTRAL_DIRECT_MAX:          # Lanczos, else the dense solver
        kernel = GraphKernel(A, n_threads=n_threads)
        try:
            starts = default_starts(kernel, k, rng)
        except EigenvectorsFailed:                 # (only with DENSE_FALLBACK_MAX lowered)
            return [], 0
        if choice is None:
            return starts, 0
        best = lowest_refined(kernel, starts, k, max_iter)
        return ([] if best is None else [best]), 0
    levels, coarsest = coarsen(A, rng, SPECTRAL_DIRECT_MAX)
    kernel = GraphKernel(coarsest, n_threads=n_threads)
    try:
        starts = default_starts(kernel, k, rng)
    except EigenvectorsFailed:
        return [], len(levels)
    best = lowest_refined(kernel, starts, k, max_iter)
    if best is None:
        return [], len(levels)
    kind, labels = best
    for level_A, coarse_of in reversed(levels[1:]):
        labels = labels[coarse_of]
        labels = refine(GraphKernel(level_A, n_threads=n_threads), labels, k, max_iter).labels
    if levels:
        labels = labels[levels[0][1]]
    return [(kind, np.ascontiguousarray(labels, dtype=np.int32))], len(levels)


def lowest_refined(kernel, starts, k, max_iter=300):
    """(kind, labels) of the start whose refinement cuts ``kernel``'s graph least (the first
    on ties), its refined labels; None for no start."""
    best = None
    for kind, labels in starts:
        run = refine(kernel, labels, k, max_iter)
        ncut = run.sums.ncut()
        if best is None or ncut < best[0]:
            best = (ncut, kind, run.labels)
    return None if best is None else best[1:]


def laplacian_eigenvalues(kernel, r, rng):
    """The r smallest eigenvalues of the normalized Laplacian L = I − D^{-½}AD^{-½},
    ascending: 1 − the r largest of D^{-½}AD^{-½} (``top_eigenvectors``: Lanczos on the
    sparse matrix above ``SPECTRAL_DENSE_MAX`` nodes, a dense ``eigh`` below and, up to
    ``DENSE_FALLBACK_MAX`` nodes, when Lanczos does not converge). Above that a Lanczos that
    does not converge is :class:`EigenvectorsFailed`, naming the eigengap (the sweep says
    what then: ``measures.graph_sweep.sweep_graph``)."""
    try:
        lam, _ = top_eigenvectors(kernel, r, rng)
    except EigenvectorsFailed as exc:
        raise EigenvectorsFailed(f"the eigengap: {exc}") from None
    return np.sort(1.0 - lam)


def eigengaps(eigenvalues, ks):
    """gap_k = λ_{k+1} − λ_k of ascending Laplacian eigenvalues λ_1 ≤ λ_2 ≤ … (von Luxburg,
    "A tutorial on spectral clustering", 2007: k clusters show as k eigenvalues near 0 and a
    gap after them), for each k of ``ks``; None where λ_{k+1} is not among them, 0 where
    the gap is below the eigensolver's tolerance ``EIGEN_TOL`` (within one graph component
    the eigenvalue 0 repeats: its differences are rounding, 10⁻¹⁶, not a gap)."""
    lam = np.asarray(eigenvalues)
    gaps = [float(lam[k] - lam[k - 1]) if 1 <= k < lam.size else None for k in ks]
    return [g if g is None or g >= EIGEN_TOL else 0.0 for g in gaps]
