"""The k-nearest-neighbour graph of a point set, and checks of an affinity matrix given as is.

Graph kernels cluster the points by a sparse affinity A (n×n, symmetric, non-negative) instead
of a dense kernel; the normalized cut of A is then minimised by weighted kernel k-means
(``engine/graph.py``). This module builds A.

Neighbours
    N(i) are the ``n_neighbors`` nearest points of x_i *including i itself* (the convention of
    scikit-learn's ``SpectralClustering(affinity='nearest_neighbors')``, whose graph is
    ``kneighbors_graph(X, n_neighbors, include_self=True)``): so every point has a self-loop
    and a positive degree, and no point is isolated. Low dimensions (d ≤ ``TREE_MAX_DIM``) use
    SciPy's k-d tree (``cKDTree``, queries on ``n_threads`` workers, asked in the tree's leaf
    order); higher dimensions an exact search, the neighbours chosen by ‖x‖² + ‖y‖² − 2x·y
    (scikit-learn's chunked search), their distances then recomputed as ‖x − y‖, or
    pynndescent's approximate one (benchmarks/bench_graph.py, ``knn`` and ``ann``, compares
    them with the blocked search it replaced).

Weightings of an edge i → j ∈ N(i)
    connectivity   B_ij = 1
    self-tuning    B_ij = exp(−‖x_i − x_j‖² / (σ_i σ_j)), σ_i the distance of x_i to its
                   7th nearest other point (Zelnik-Manor & Perona, "Self-tuning spectral
                   clustering", NIPS 2004; the last neighbour when fewer are asked for).
    A = (B + Bᵀ)/2, CSR float64, exactly symmetric (b_ij + b_ji is commutative); A_ii = 1.

Duplicates
    Points at distance 0 are one *node*: the search runs on the distinct points (so copies
    do not fill each other's neighbour lists, and σ_i > 0), and a node of u_i copies carries
    all their edges: the graph is E = U A U, E_ij = u_i u_j A_ij (U = diag(u)). Its degrees
    are u_i d_i and the normalized cut of any labelling that keeps copies together is the
    same as on the n×n graph of the copies; every copy gets its node's label.

Components
    Counted by union-find over the neighbour lists (``_knn_graph.pyx``; for a given affinity
    by ``scipy.sparse.csgraph.connected_components``): the normalized-cut engine starts from
    them (a labelling whose clusters are unions of components cuts nothing: ncut 0).

The choice graph
    A connectivity graph of at most ``TREE_MAX_DIM`` columns is built from longer neighbour
    lists (``listed``), its first n_neighbors of each, whatever else is asked: so the graph of
    tied points is the same for every start. With ``choice_k`` (the default starts of fits of
    up to that many clusters) it also carries ``Graph.choice`` (``choice_graph``): the mutual
    edges of the longer lists and each node's ``BACKBONE`` nearest, weight 1 (scaled by the
    copies as E is), within E's components. The default starts are chosen on it and refined on
    E. Built only where E has fewer components than ``choice_k``: k components or more are the
    starts themselves (joined by bridges, or grouped), and the choice graph would go unused.
"""
import warnings
from dataclasses import dataclass, replace

import numpy as np

from ..errors import DataError, KKMeansWarning, UsageError
from . import _knn_graph
from .functions import check_range

WEIGHTINGS = ("connectivity", "self-tuning")
DEFAULT_NEIGHBORS = 20      # other points in a neighbourhood by default (``default_neighbors``)
SCALE_NEIGHBOR = 7          # Zelnik-Manor & Perona's σ_i: the 7th nearest other point
BACKBONE = 5                # the choice graph keeps each node's 5 nearest (``choice_graph``)
CHOICE_FACTOR = 1.5         # … and the mutual edges among 1.5 × n_neighbors other points
TREE_MAX_DIM = 15           # k-d tree up to this dimension, exact search above
SEARCH_BLOCK_BYTES = 64 << 20   # distance block of the exact search
# scikit-learn's chunked search (``argkmin``): its chunks, and one thread per 4 of them
ARGKMIN_CHUNK = 256
ARGKMIN_MIN_QUERIES = 4 * ARGKMIN_CHUNK
# the neighbour search above TREE_MAX_DIM ('auto': approximate from APPROX_MIN_POINTS rows
# when pynndescent is installed and imports; benchmarks/bench_graph.py knn)
NEIGHBOR_SEARCHES = ("auto", "exact", "approximate")
APPROX_MIN_POINTS = 100_000
APPROX_MIN_NODES = 4        # the approximate search needs more than this × k distinct points
ANN_MISSING = ("the approximate neighbour search needs pynndescent, which is not installed: "
               "pip install 'kkmeans-cli[ann]' (or choose the exact search)")
QUERY_SORT_MIN = 10_000      # more queries than this are asked in spatial order
TINY_COORDINATES = 2.0 ** -256  # searched at a power of two's scale below this (``search_scale``)
EXPANSION_RTOL = 1e-3       # a row is searched again by differences where ‖x‖² + ‖y‖² − 2x·y
#                             may be off by this share of its k-th squared distance
DIFFERENCES_MAX = 1_000_000  # and so where the points have at most this many coordinates
#                              (each row O(m·d) without BLAS; else a warning)
SYMMETRY_RTOL = 1e-10       # a given affinity is symmetric within this × max |A_ij|
# a given affinity's degrees, once its largest weight is 1, are at least this: d² is then a
# normal float (≥ 2.2e-308), so K_ii = σ/d + A_ii/d² and the sums of the fit are finite
MIN_RELATIVE_DEGREE = float(np.sqrt(np.finfo(np.float64).tiny))


@dataclass(frozen=True)
class GraphInfo:
    """What the graph is: its parameters and shape, for reports and the model file.

    ``n_points`` rows of X made ``n_nodes`` distinct nodes (``n_duplicates`` = the difference);
    ``nnz`` stored entries of E (self-loops included); ``component_sizes`` the points (not
    nodes) per connected component, largest first; ``search`` the neighbour search that built
    it ('kd-tree', 'exact' or 'approximate'; 'none' for a given affinity).
    """

    n_points: int
    n_nodes: int
    n_neighbors: int
    weighting: str
    nnz: int
    n_components: int
    component_sizes: tuple
    n_duplicates: int = 0
    self_loops: bool = True
    scale_neighbor: int = SCALE_NEIGHBOR
    bridges: int = 0
    search: str = "exact"


@dataclass(frozen=True)
class Graph:
    """The affinity graph of a fit and what a prediction needs to place new points in it.

    affinity : CSR float64 (m×m), E = U A U, symmetric, non-negative, positive row sums
    node_of : int64 (n,) node of each point (nodes are numbered in the k-d tree's leaf order,
        duplicates share one), or None when node i is point i
    nodes : float64 (m×d) coordinates of the nodes (None for a given affinity)
    counts : float64 (m,) copies per node u_i
    scales : float64 (m,) σ_i of the nodes (self-tuning only, else None)
    components : int32 (m,) connected component of each node
    info : GraphInfo
    choice : CSR float64 (m×m) or None, the graph the default starts are chosen on
        (``choice_graph``; a connectivity neighbour graph only)
    """

    affinity: object
    node_of: np.ndarray
    nodes: np.ndarray
    counts: np.ndarray
    scales: np.ndarray
    components: np.ndarray
    info: GraphInfo
    choice: object = None

    def point_labels(self, node_labels):
        """Labels of the n points from the labels of the m nodes."""
        return node_labels if self.node_of is None else node_labels[self.node_of]


# -- neighbours ------------------------------------------------------------------------------
def nearest(points, queries, k, n_threads=1, self_first=False):
    """The k nearest of ``points`` to each query: (distances, indices), each (q, k), sorted
    by distance (k-d tree order on ties). With ``self_first`` the queries are the points
    themselves and query i lists i first (the exact search forces it; the tree finds it at
    distance 0 when the points are distinct)."""
    k = int(min(k, points.shape[0]))
    if points.shape[1] <= TREE_MAX_DIM:
        return tree_nearest(points, queries, k, n_threads)
    return exact_nearest(points, queries, k, n_threads, self_first)


def tree_nearest(points, queries, k, n_threads=1, scale=None):
    """k nearest by SciPy's k-d tree (sliding-midpoint splits: a quicker build). Queries are
    asked in the tree's leaf order (neighbouring queries visit the same nodes: 4-5× faster at
    10⁶ points than in input order) and the answers put back in input order; at the
    points' ``search_scale`` (queries too large for it at scale 1: ``split_huge``)."""
    from scipy.spatial import cKDTree

    scale = search_scale(points) if scale is None else scale
    huge = split_huge(queries, scale)
    if huge is not None:
        return _combine(huge, queries, k, lambda Q, s: tree_nearest(points, Q, k, n_threads, s),
                        scale)
    if scale != 1.0:
        points, queries = points * scale, queries * scale
    tree = cKDTree(points, balanced_tree=False, compact_nodes=False)
    q = queries.shape[0]
    if q >= QUERY_SORT_MIN:
        order = cKDTree(queries, balanced_tree=False, compact_nodes=False).indices
    else:
        order = None
    asked = queries if order is None else queries[order]
    dist, idx = tree.query(asked, k=k, workers=int(n_threads))
    dist = np.asarray(dist, dtype=np.float64).reshape(-1, k) / scale
    idx = np.asarray(idx, dtype=np.int64).reshape(-1, k)
    if order is None:
        return dist, idx
    out_d, out_i = np.empty_like(dist), np.empty_like(idx)
    out_d[order], out_i[order] = dist, idx
    return out_d, out_i


def split_huge(queries, scale):
    """Rows of ``queries`` too large to be searched at ``scale`` (their coordinates times it
    above 2⁵⁰⁰: queries far from tiny training points), or None when there are none: each
    is searched at scale 1 instead (a row's answer depends on the row alone)."""
    if scale == 1.0 or not queries.size:
        return None
    top = np.maximum(queries.max(axis=1), -queries.min(axis=1)) * scale
    huge = top > 2.0 ** 500
    return huge if huge.any() else None


def _combine(huge, queries, k, search, scale):
    """The rows of ``search(queries, scale)``, the ``huge`` ones from ``search(.., 1.0)``."""
    dist, idx = np.empty((queries.shape[0], k)), np.empty((queries.shape[0], k), np.int64)
    for rows, s in ((~huge, scale), (huge, 1.0)):
        if rows.any():
            dist[rows], idx[rows] = search(queries[rows], s)
    return dist, idx


def exact_nearest(points, queries, k, n_threads=1, self_first=False, check=True,
                  scale=None):
    """Exact k nearest neighbours: (distances, indices), each (q, k), the k chosen by
    ‖x‖² + ‖y‖² − 2x·y of the coordinates less their rounded mean (``shifted``), their
    distances recomputed as ‖x − y‖ and sorted by (distance, index) (which of several
    equally distant points fill the last places is the search's choice, the same for a
    query whatever the other queries: a row's label from ``predict`` does not depend on the
    rows beside it). By scikit-learn's chunked search (``argkmin``), at the points'
    ``search_scale``; with ``check``, the rows ``imprecise_rows`` names are searched again
    by differences (``nearest_by_differences``) where the points have at most
    ``DIFFERENCES_MAX`` coordinates, else a ``KKMeansWarning`` names them (both decided
    row by row). With ``self_first`` the queries are the points themselves and query i
    lists i first."""
    scale = search_scale(points) if scale is None else scale
    huge = None if self_first else split_huge(queries, scale)
    if huge is not None:
        return _combine(huge, queries, k, lambda Q, s: exact_nearest(
            points, Q, k, n_threads, check=check, scale=s), scale)
    P, Q = shifted(points, queries, scale)
    idx = argkmin(P, Q, k, n_threads)
    exact = _row_distances(points, idx, queries, scale)
    order = _order(exact, idx)
    dist, idx = np.take_along_axis(exact, order, 1), np.take_along_axis(idx, order, 1)
    again = imprecise_rows(Q, dist[:, -1] * scale) if check else np.empty(0, np.int64)
    warned = again.size > 0 and points.size > DIFFERENCES_MAX
    if warned:
        warnings.warn(f"the neighbour search may have missed near neighbours of "
                      f"{again.size:,} points: their coordinates are large against the "
                      f"distances between them (groups far apart, each tight; centring "
                      f"each group keeps the search exact)", KKMeansWarning, stacklevel=3)
    elif again.size:
        dist[again], idx[again] = nearest_by_differences(points, queries[again], k, scale)
    if self_first:      # distinct points: i is its own nearest, unless rounding lost it
        rows = np.arange(queries.shape[0])[:, None]
        bad = np.flatnonzero((idx != rows).all(axis=1))
        if bad.size:
            dist[bad], idx[bad] = exact_rows(points, bad, k, n_threads, check=not warned)
    return dist, idx


def imprecise_rows(Q, kth):
    """The queries (rows of Q) whose k nearest, chosen by ‖x‖² + ‖y‖² − 2x·y, may be wrong:
    where that sum's rounding for the points that matter, within about ‖q‖ + kth of the
    origin, 8ε(‖q‖² + (‖q‖ + kth)²), exceeds ``EXPANSION_RTOL`` times the k-th squared
    distance ``kth``² (the coordinates as searched: shifted and scaled; a point farther out
    is far from q by about its own norm, its rounding relative). Shifted by the mean, this
    happens only where groups far apart are each tight (±10⁸ with neighbours 10⁻³ apart);
    a k-th distance of 0 (copies) is exact anyway."""
    eps = np.finfo(np.float64).eps
    norm = np.sqrt(np.einsum("ij,ij->i", Q, Q))
    bound = 8.0 * eps * (norm * norm + (norm + kth) ** 2)
    return np.flatnonzero((kth > 0.0) & (bound > EXPANSION_RTOL * kth * kth))


def nearest_by_differences(points, queries, k, scale=1.0):
    """The k nearest of ``points`` to each query by ‖x − q‖ of the differences (no sum of
    squares that cancels), sorted by (distance, index), in blocks of queries: O(q·m·d)
    without BLAS, for the rows ``imprecise_rows`` names."""
    from scipy.spatial.distance import cdist

    P = points * scale if scale != 1.0 else points
    q, m = queries.shape[0], points.shape[0]
    rows = max(1, SEARCH_BLOCK_BYTES // (8 * m))
    dist, idx = np.empty((q, k)), np.empty((q, k), dtype=np.int64)
    for r0 in range(0, q, rows):
        r1 = min(q, r0 + rows)
        Qb = queries[r0:r1] * scale if scale != 1.0 else queries[r0:r1]
        D = cdist(Qb, P)
        order = np.argsort(D, axis=1, kind="stable")[:, :k]
        dist[r0:r1] = np.take_along_axis(D, order, 1) / scale
        idx[r0:r1] = order
    return dist, idx


def search_scale(points):
    """1, or the power of two that brings points whose coordinates are all below
    ``TINY_COORDINATES`` in absolute value to [1, 2): at 10⁻²⁰⁰ the squares of a search's
    distances underflow to 0 (every point equally near); a power of two changes no
    comparison and no tie. From the points alone, so that a query's answer does not depend
    on the queries beside it."""
    top = max(float(points.max()), -float(points.min())) if points.size else 0.0
    if top == 0.0 or top >= TINY_COORDINATES:
        return 1.0
    return float(np.ldexp(1.0, min(1000, 1 - int(np.frexp(top)[1]))))


def shifted(points, queries, scale=1.0):
    """(points, queries) less the points' mean rounded to whole numbers, times ``scale``
    (``search_scale``): far from the origin ‖x‖² + ‖y‖² − 2x·y loses the digits that tell
    near points apart (points at 10⁸ ± 10⁻³), and whole numbers keep integer data exact (its
    equal distances equal); the copies are made only where the mean rounds to something
    other than 0 or the scale is not 1."""
    shift = np.round(points.mean(axis=0))
    if not shift.any() and scale == 1.0:
        return points, queries
    moved = (points - shift) * scale
    return moved, (moved if queries is points else (queries - shift) * scale)


def argkmin(points, queries, k, n_threads=1):
    """Indices (q, k) of the k nearest of ``points`` to each query by scikit-learn's
    pairwise-distance reduction (``NearestNeighbors(algorithm='brute')``: blocks of
    ``ARGKMIN_CHUNK`` queries × ``ARGKMIN_CHUNK`` points, one small BLAS product and a
    heap per query; measured 3× quicker than the blocked search it replaced
    (benchmarks/bench_graph.py ``blocked_nearest``) at 10⁴–10⁵ points of 64
    dimensions: no distance block written to memory and read back, no partition pass).
    Each thread takes whole chunks of queries and visits the points in order, so the heaps,
    and which of equally distant points they keep, depend neither on the threads nor on the
    other queries; it runs on at most one thread per 4 chunks of queries
    (``ARGKMIN_MIN_QUERIES``): with more threads scikit-learn would split the points among
    them and merge their heaps in an order that does (on one thread that split is the
    points in order)."""
    import sklearn
    from sklearn.neighbors import NearestNeighbors

    q = queries.shape[0]
    threads = max(1, min(int(n_threads), (q - 1) // ARGKMIN_MIN_QUERIES))
    with sklearn.config_context(pairwise_dist_chunk_size=ARGKMIN_CHUNK,
                                enable_cython_pairwise_dist=True, assume_finite=True), \
            _openmp_limit(threads):
        search = NearestNeighbors(n_neighbors=k, algorithm="brute", metric="euclidean")
        idx = search.fit(points).kneighbors(queries, return_distance=False)
    return np.ascontiguousarray(idx, dtype=np.int64)


_CONTROLLER = []


def _openmp_limit(threads):
    """threadpoolctl's limit of the OpenMP threads, from one ``ThreadpoolController`` made
    after scikit-learn's search is imported (``threadpool_limits`` scans the loaded
    libraries at every call: 9 of 14 s in a join of 320 components, one search each)."""
    from threadpoolctl import ThreadpoolController

    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=threads, user_api="openmp")


def approximate_nearest(points, k, n_threads=1, random_state=0):
    """The k nearest of every point among ``points``, itself first, by pynndescent's
    nearest-neighbour descent (Dong, Charikar & Li, "Efficient k-nearest neighbor graph
    construction for generic similarity measures", WWW 2011): (dist, idx), each (m, k),
    sorted by (distance, index). The points are centred and divided by their largest
    coordinate before pynndescent's float32 copy (neighbour order does not change; no
    overflow or underflow there); the chosen distances are recomputed in float64 as
    ‖x − y‖ and sorted again. The points are distinct (``knn_graph`` merges copies first),
    so a point is its own nearest at distance 0; a row where the descent missed the point
    itself or came back short (index −1) is searched again exactly (on ``n_threads``).
    ``random_state``: an int (the same int, the same graph, with any ``n_threads``: the
    descent runs on one thread)."""
    problem = ann_import_problem()
    if problem is not None:
        raise UsageError(problem[0])
    from pynndescent import NNDescent

    m = points.shape[0]
    centred = points - points.mean(axis=0)
    top = float(np.abs(centred).max())
    data = np.ascontiguousarray(centred / top if top > 0 else centred, dtype=np.float32)
    # one thread: the descent's parallel updates depend on the number of threads, and a fit
    # gives the same labels with any number (the graph's share of the time is small)
    index = NNDescent(data, n_neighbors=k, random_state=int(random_state), n_jobs=1,
                      compressed=True)
    idx = np.array(index.neighbor_graph[0], dtype=np.int64)
    del index
    bad = np.flatnonzero((idx < 0).any(axis=1) | (idx != np.arange(m)[:, None]).all(axis=1))
    safe = np.where(idx < 0, np.arange(m)[:, None], idx)
    dist = _row_distances(points, safe)
    order = _order(dist, safe)
    dist, idx = np.take_along_axis(dist, order, 1), np.take_along_axis(safe, order, 1)
    if bad.size:
        d_bad, i_bad = exact_rows(points, bad, k, n_threads)
        dist[bad], idx[bad] = d_bad, i_bad
    return dist, idx


def _row_distances(points, idx, queries=None, scale=None):
    """‖q_i − x_idx[i, j]‖ (the queries q: the points themselves by default) in blocks of
    rows (the (m, k, d) differences bounded), the differences squared at ``scale``
    (``search_scale`` when None) and the distances divided by it again."""
    queries = points if queries is None else queries
    scale = search_scale(points) if scale is None else scale
    m, k = idx.shape
    rows = max(1, SEARCH_BLOCK_BYTES // (8 * k * points.shape[1]))
    out = np.empty(idx.shape)
    for r0 in range(0, m, rows):
        r1 = min(m, r0 + rows)
        diff = queries[r0:r1, None, :] - points[idx[r0:r1]]
        if scale != 1.0:
            diff *= scale
        out[r0:r1] = np.sqrt((diff ** 2).sum(-1))
    if scale != 1.0:
        out /= scale
    return out


def exact_rows(points, rows, k, n_threads=1, check=True):
    """The exact k nearest of the points ``rows`` among ``points``, each row itself first
    (``exact_nearest`` of those queries)."""
    m = points.shape[0]
    dist, idx = exact_nearest(points, points[rows], min(k + 1, m), n_threads, check=check)
    out_d, out_i = np.empty((rows.size, k)), np.empty((rows.size, k), dtype=np.int64)
    for r, i in enumerate(rows):
        keep = idx[r] != i
        out_i[r, 0], out_d[r, 0] = i, 0.0
        out_i[r, 1:] = idx[r][keep][:k - 1]
        out_d[r, 1:] = dist[r][keep][:k - 1]
    return out_d, out_i


def _order(exact, part):
    """Row-wise order by (distance, index): by index first, then a stable sort by distance."""
    by_index = np.argsort(part, axis=1, kind="stable")
    by_dist = np.argsort(np.take_along_axis(exact, by_index, 1), axis=1, kind="stable")
    return np.take_along_axis(by_index, by_dist, 1)


def local_scales(dist):
    """σ_i = the distance to the ``SCALE_NEIGHBOR``-th nearest other point (column 7 of a
    list that starts with the point itself), or to the last one found when the lists are
    shorter; 1 when a list holds only the point itself."""
    if dist.shape[1] < 2:
        return np.ones(dist.shape[0])
    return np.array(dist[:, min(SCALE_NEIGHBOR, dist.shape[1] - 1)], dtype=np.float64)


#: Below this distance (at the points' ``search_scale``) a search's distance, the root of a sum
#: of squares, has lost its digits or underflowed to 0: points packed 10⁻²⁰⁰ apart beside
#: others spread over 1 all lie at distance 0 of each other, and their self-tuned σ_i is 0.
UNDERFLOW_DISTANCE = 1e-150


def exact_tiny_distances(points, queries, dist, idx, self_first=False):
    """(dist, idx) of a search of ``queries`` among ``points``, its entries below
    ``UNDERFLOW_DISTANCE`` at the points' ``search_scale`` recomputed from the differences
    without squares (‖v‖ = s ‖v/s‖, s = max |v_i|) and the rows that had any sorted again by
    (distance, index). The neighbours themselves stay those the search listed (among
    points it saw as ties, any of them); their distances, hence a self-tuned σ_i, are no
    longer 0 between distinct points. With ``self_first`` (the queries are the points) a
    row the search gave without its own point (a tie it broke otherwise) lists it first and
    drops its last. Unchanged (the same arrays) where no entry between distinct points is
    that small: whatever the scale of the data, the usual case."""
    small = dist * search_scale(points) < UNDERFLOW_DISTANCE
    if not small.any():
        return dist, idx
    rows, cols = np.nonzero(small)
    diff = queries[rows] - points[idx[rows, cols]]
    top = np.abs(diff).max(axis=1)
    apart = top > 0             # not the point itself (or a copy): at distance 0 indeed
    if not apart.any():
        return dist, idx
    rows, cols, diff, top = rows[apart], cols[apart], diff[apart], top[apart]
    unit = diff / top[:, None]
    dist, idx = dist.copy(), idx.copy()
    dist[rows, cols] = top * np.sqrt(np.einsum("ij,ij->i", unit, unit))
    touched = np.unique(rows)
    order = np.lexsort((idx[touched], dist[touched]), axis=-1)
    dist[touched] = np.take_along_axis(dist[touched], order, axis=1)
    idx[touched] = np.take_along_axis(idx[touched], order, axis=1)
    if self_first:
        lost = touched[idx[touched, 0] != touched]
        dist[lost, 1:], idx[lost, 1:] = dist[lost, :-1], idx[lost, :-1]
        dist[lost, 0], idx[lost, 0] = 0.0, lost
    return dist, idx


def edge_weights(dist, idx, weighting, scales_row, scales_col):
    """B_ij for the listed edges: 1 (connectivity) or exp(−d²/(σ_i σ_j)) (self-tuning), as
    (d/σ_i)(d/σ_j): no underflow of d² and σ_i σ_j at tiny scales."""
    if weighting == "connectivity":
        return np.ones(dist.shape)
    return np.exp(-(dist / scales_row[:, None]) * (dist / scales_col[idx]))


# -- the graph -------------------------------------------------------------------------------
def default_neighbors(n_nodes, n_clusters):
    """The default ``n_neighbors`` (counting the point itself) for ``n_nodes`` distinct
    points and ``n_clusters`` clusters: m = ``DEFAULT_NEIGHBORS`` other points, then
    m ← min(m, ⌊n_nodes/k⌋ − 1, n_nodes − 1), at least 1; n_neighbors = m + 1.

    20 other neighbours is the one value that met every target on the scikit-learn cluster
    gallery at 500, 1500 and 2000 points and on iris, wine, breast cancer and digits (raw and
    standardized) — fewer fail noisy circles and rings, more fail them at 500 points; the cap
    keeps a neighbourhood within one cluster's share of tiny data (benchmarks/bench_graph.py,
    docs/performance.md)."""
    m = min(DEFAULT_NEIGHBORS, int(n_nodes) // max(1, int(n_clusters)) - 1, int(n_nodes) - 1)
    return max(1, m) + 1


def check_n_neighbors(n_neighbors):
    """None (the default rule) or an int ≥ 1 (``ValueError`` otherwise)."""
    if n_neighbors is None:
        return None
    if isinstance(n_neighbors, (bool, np.bool_)) or not isinstance(n_neighbors,
                                                                   (int, np.integer)):
        raise ValueError(f"n_neighbors must be a positive integer or None, got "
                         f"{n_neighbors!r}")
    if int(n_neighbors) < 1:
        raise ValueError(f"n_neighbors must be at least 1, got {n_neighbors}")
    return int(n_neighbors)


def knn_graph(X, n_neighbors=10, weighting="connectivity", n_threads=1, n_clusters=None,
              neighbor_search="auto", random_state=0, choice_k=0):
    """The symmetrized k-nearest-neighbour graph of X (module docstring).

    Parameters
    ----------
    X : array (n, d), finite
    n_neighbors : int ≥ 1, neighbours of each point counting itself, below the distinct
        points (``ValueError``: as many link every point to every other; one distinct point
        is its own neighbour), or None: ``default_neighbors`` of the distinct points and
        ``n_clusters``
    weighting : 'connectivity' or 'self-tuning'
    n_threads : int, workers of the neighbour search and the symmetrized sums
    n_clusters : int, the k of the default rule (needed when n_neighbors is None)
    neighbor_search : 'auto', 'exact' or 'approximate' (``search_route``; the route taken is
        ``GraphInfo.search``)
    random_state : int, the approximate search's (the same int, the same graph)
    choice_k : int, the largest number of clusters whose default starts will be chosen on
        ``Graph.choice`` (``choice_graph``: connectivity weights on at most ``TREE_MAX_DIM``
        columns, from the search's ``listed`` neighbours), built only where the graph has
        fewer connected components than that (0: never)

    Points whose squared distances overflow are refused as ``functions.check_range`` refuses
    them for the knn kernel (``ValueRangeError``: the search would find no neighbour).

    Returns
    -------
    Graph
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    given = check_n_neighbors(n_neighbors)
    if given is None and n_clusters is None:
        raise ValueError("n_neighbors=None (the default rule) needs n_clusters")
    X = np.ascontiguousarray(X, dtype=np.float64) + 0.0     # −0.0 → 0.0: copies compare equal
    check_points(X)
    # finite points whose squared distances overflow: the search would find no neighbour
    check_range("knn", X, X.shape[0])
    n = X.shape[0]
    wanted = given if given is not None else default_neighbors(n, n_clusters)
    k = int(min(wanted, n))
    base_of, points, counts = None, X, np.ones(n)
    route = search_route(neighbor_search, n, X.shape[1])
    if neighbor_search == "approximate" and route == "kd-tree":
        warnings.warn(f"the approximate neighbour search does not apply to data of "
                      f"{TREE_MAX_DIM} columns or fewer (here {X.shape[1]}): the k-d tree's "
                      f"exact search, quicker there, was used", KKMeansWarning, stacklevel=2)
    if route == "approximate" and neighbor_search == "auto":
        problem = ann_import_problem()
        if problem is not None:       # found but broken: 'auto' takes the exact search
            warnings.warn(f"pynndescent could not be imported ({problem[1]}): the exact "
                          f"neighbour search is used; repair it with pip install "
                          f"'kkmeans-cli[ann]', or set neighbor_search='exact'",
                          KKMeansWarning, stacklevel=2)
            route = "exact"
    if route == "approximate":
        # copies merged first: the descent may miss a copy at distance 0, the exact rule
        # below would not; and it needs more distinct points than neighbours
        base_of, points, counts = distinct_nodes(X)
        if points.shape[0] == n:
            base_of, points, counts = None, X, np.ones(n)
        elif given is None:
            wanted = default_neighbors(points.shape[0], n_clusters)
        k = int(min(wanted, points.shape[0]))
        if points.shape[0] <= APPROX_MIN_NODES * k:
            route = "exact"
            if neighbor_search == "approximate":
                copies = "" if points.shape[0] == n else f" (of {n:,} rows)"
                warnings.warn(f"the approximate neighbour search needs more than "
                              f"{APPROX_MIN_NODES} distinct points per neighbour, and there "
                              f"are {points.shape[0]:,} distinct points{copies} for {k:,} "
                              f"neighbours: the exact search was used", KKMeansWarning,
                              stacklevel=2)
    order, dist, idx = self_neighbours(points, listed(k, points.shape, weighting), n_threads,
                                       route, random_state)
    # copies merged where the search found one (a copy at distance 0 comes second at the
    # latest); with one neighbour, the point itself, no copy is looked for, so they are sought
    if route != "approximate" and (np.any(dist[:, 1] == 0.0) if k >= 2 else
                                   np.unique(X, axis=0).shape[0] < n):
        base_of, points, counts = distinct_nodes(X)
        if given is None:
            wanted = default_neighbors(points.shape[0], n_clusters)
        k = int(min(wanted, points.shape[0]))
        order, dist, idx = self_neighbours(points, listed(k, points.shape, weighting),
                                           n_threads)
    if given is not None and 1 < points.shape[0] <= given:
        raise ValueError(f"n_neighbors={given} must be less than the number of distinct "
                         f"points ({points.shape[0]} of {n} rows): each point's neighbours "
                         f"count itself, so {points.shape[0]} or more would link every point "
                         f"to every other")
    n_neighbors = wanted
    node_of, nodes = base_of, points
    if order is not None:
        rank = inverse_permutation(order)
        nodes, counts = points[order], counts[order]
        node_of = rank if base_of is None else rank[base_of]
    m = nodes.shape[0]
    longer = idx if idx.shape[1] > k else None      # the lists of the choice graph
    if longer is not None:
        dist, idx = np.ascontiguousarray(dist[:, :k]), np.ascontiguousarray(idx[:, :k])
    scales = None
    if weighting == "self-tuning":
        dist, idx = exact_tiny_distances(nodes, nodes, dist, idx, self_first=True)
        scales = local_scales(dist)
    B = edge_weights(dist, idx, weighting, scales, scales)
    del dist
    n_comp, comp = _knn_graph.list_components(idx)
    choice = None if longer is None or n_comp >= choice_k else \
        choice_graph(longer, comp, n_comp, n_threads)
    del longer
    E = symmetrize(B, idx, m, n_threads)
    if base_of is not None:
        E = scale_nodes(E, counts)
        choice = None if choice is None else scale_nodes(choice, counts)
    sizes = np.bincount(comp, weights=counts, minlength=n_comp).astype(np.int64)
    info = GraphInfo(n_points=n, n_nodes=m, n_neighbors=int(n_neighbors),
                     weighting=weighting, nnz=int(E.nnz), n_components=int(n_comp),
                     component_sizes=tuple(int(s) for s in np.sort(sizes)[::-1]),
                     n_duplicates=n - m, search=route)
    return Graph(E, node_of, nodes, counts, scales, comp, info, choice)


def listed(k, shape, weighting):
    """Neighbours searched for a graph of k (counting the point itself) on nodes of ``shape``
    (m, d): k, or for a connectivity graph of at most ``TREE_MAX_DIM`` columns the longer
    lists of ``choice_graph``, 1 + ⌈``CHOICE_FACTOR`` · (k − 1)⌉, where they are shorter than
    m (lists of every node would make it the complete graph). Searched whether or not the
    choice graph is built: where distances tie, which of the equally distant points fill a
    list's last places depends on its length, and the graph must not depend on the start.
    In more dimensions the neighbour lists grow lopsided — a few hubs are listed by many
    points, many points by none (Radovanović, Nanopoulos & Ivanović, "Hubs in space", JMLR
    2010) — and a mutual graph leaves those points to the backbone alone: on standardized
    digits (64 columns) the choice lowered the mean ARI from 0.79 to 0.67
    (docs/performance.md)."""
    m, d = shape
    if weighting != "connectivity" or k < 2 or d > TREE_MAX_DIM:
        return k
    longer = 1 + int(np.ceil(CHOICE_FACTOR * (k - 1)))
    return longer if longer < m else k


def choice_graph(idx, components, n_components, n_threads=1):
    """The graph the default starts are chosen on (``engine.graph_starts.best_default_start``)
    from the neighbour lists ``idx`` (m × l, each node first, nearest first): the mutual
    edges of the l-neighbour lists (i and j each list the other) united with the symmetrized
    lists of each node's ``BACKBONE`` nearest, all of weight 1 — the mutual neighbour graph
    (Maier, Hein & von Luxburg, "Optimal construction of k-nearest-neighbor graphs for
    identifying noisy clusters", 2009) with a backbone that leaves no node alone. Between noisy
    rings it keeps the edges that both ends choose, where a sparse ring's points reach into a
    dense one (benchmarks/bench_graph.py audit, docs/performance.md). Its edges between two of
    the fit's graph's ``components`` (the node's component; the backbone and the longer lists
    can reach past the fit's lists) are left out: starts chosen across a cut of nothing would
    miss it. None when it has more connected components than the fit's graph
    (``n_components``). Built row by row on ``n_threads`` (``_knn_graph.choice_lists``, the
    same graph with any), beside the lists only each node's nearest and their transpose."""
    from scipy import sparse

    m, width = idx.shape
    itype = np.int32 if 2 * m * width < 2 ** 31 else np.int64
    # i ~ j where (B + Bᵀ)/2 ≥ 1 for B_ij = 4 within i's backbone (itself and its BACKBONE
    # nearest), 1 beyond it, 0 unlisted: each lists the other, or one has the other among its
    # nearest. Row by row: i's list merged with the nodes that have i among their nearest,
    # each of i's own kept where it is among i's nearest or lists i (a binary search)
    near = np.sort(idx[:, :BACKBONE + 1], axis=1)
    if _knn_graph.sort_lists(idx, None, n_threads):     # sorts idx's rows in place
        raise RuntimeError("choice_graph: a node is listed twice in one row (internal)")
    tptr, tj = np.empty(m + 1, dtype=itype), np.empty(near.size, dtype=itype)
    _knn_graph.transpose_lists(near, None, tptr, tj, None)
    comp = np.ascontiguousarray(components, dtype=np.int32)
    indptr, mutual = np.empty(m + 1, dtype=itype), np.empty((m, width), dtype=np.uint8)
    _knn_graph.choice_lists(idx, near, tptr, tj, comp, mutual, indptr,
                            np.empty(0, dtype=itype), False, n_threads)
    indices = np.empty(int(indptr[-1]), dtype=itype)
    _knn_graph.choice_lists(idx, near, tptr, tj, comp, mutual, indptr, indices, True,
                            n_threads)
    del near, tptr, tj, mutual
    if _knn_graph.csr_component_count(indptr, indices) > n_components:
        return None
    C = sparse.csr_matrix((np.ones(indices.size), indices, indptr), shape=(m, m))
    C.has_sorted_indices = True
    return C


def check_points(X):
    """X must be a non-empty 2-D array of finite numbers (``DataError`` naming the first bad
    row and column)."""
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise DataError(f"X must be a non-empty 2-D array, got shape {X.shape}")
    if not np.isfinite(X).all():
        r, c = np.argwhere(~np.isfinite(X))[0]
        raise DataError(f"X row {r}, column {c}: {X[r, c]} is not a finite number")


def search_route(neighbor_search, n_points, n_dims, n_neighbors=None):
    """The neighbour search a graph of ``n_points`` points in ``n_dims`` dimensions gets:
    'kd-tree' up to ``TREE_MAX_DIM`` dimensions (exact and quick, whatever
    ``neighbor_search``); above, 'approximate' when asked, or for 'auto' from
    ``APPROX_MIN_POINTS`` points when pynndescent can be imported (looked up, not imported),
    and 'exact' otherwise. Given ``n_neighbors``, the points are also too few for the
    approximate search at ``APPROX_MIN_NODES`` per neighbour or fewer: 'exact' (``knn_graph``
    also counts the distinct points, which copies lessen)."""
    if neighbor_search not in NEIGHBOR_SEARCHES:
        raise ValueError(f"neighbor_search must be one of {NEIGHBOR_SEARCHES}, got "
                         f"{neighbor_search!r}")
    if n_dims <= TREE_MAX_DIM:
        return "kd-tree"
    if n_neighbors is not None and n_points <= APPROX_MIN_NODES * min(n_neighbors, n_points):
        return "exact"
    if neighbor_search == "approximate":
        return "approximate"
    if neighbor_search == "auto" and n_points >= APPROX_MIN_POINTS and ann_available():
        return "approximate"
    return "exact"


def ann_import_problem():
    """None when pynndescent imports, else (message, detail): not installed (``ANN_MISSING``,
    None), or installed and failing as it loads (numba behind a new NumPy, …: the error in one
    line)."""
    try:
        import pynndescent  # noqa: F401
    except Exception as exc:          # any error of its imports, not only ImportError
        if isinstance(exc, ModuleNotFoundError) and exc.name in (None, "pynndescent"):
            return ANN_MISSING, None
        detail = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        return (f"the approximate neighbour search needs pynndescent, which could not be "
                f"imported ({detail}); repair it with pip install 'kkmeans-cli[ann]' (or "
                f"choose the exact search)"), detail
    return None


def ann_available():
    """Whether pynndescent can be imported (found, not imported: ``kkmeans --help`` and
    predict never import it)."""
    import importlib.util

    try:
        return importlib.util.find_spec("pynndescent") is not None
    except (ImportError, ValueError):
        return False


def self_neighbours(points, k, n_threads=1, route=None, random_state=0):
    """(order, dist, idx): the k nearest of every point, itself first, with rows and indices
    renumbered by ``order``: the k-d tree's leaf order in low dimensions, so that the rows are
    asked in spatial order (4-5× quicker at 10⁶ points) and neighbours get near numbers (every
    later pass over the graph reads memory nearly in order); None (input order) for the exact
    and the approximate search of higher dimensions (``route``, ``search_route``; None: the
    exact one)."""
    if points.shape[1] > TREE_MAX_DIM:
        if route == "approximate":
            dist, idx = approximate_nearest(points, k, n_threads, random_state)
        else:
            dist, idx = exact_nearest(points, points, k, n_threads, self_first=True)
        return None, dist, idx
    from scipy.spatial import cKDTree

    scale = search_scale(points)
    if scale != 1.0:
        points = points * scale
    tree = cKDTree(points, balanced_tree=False, compact_nodes=False)
    order = np.asarray(tree.indices, dtype=np.int64)
    dist, idx = tree.query(points[order], k=k, workers=int(n_threads))
    rank = inverse_permutation(order)
    return (order, np.asarray(dist, dtype=np.float64).reshape(-1, k) / scale,
            rank[np.asarray(idx, dtype=np.int64).reshape(-1, k)])


def inverse_permutation(order):
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size, dtype=order.dtype)
    return rank


def distinct_nodes(X):
    """(node_of, nodes, counts): the distinct rows of X in order of first appearance."""
    _, first, inverse, counts = np.unique(X, axis=0, return_index=True, return_inverse=True,
                                          return_counts=True)
    order = np.argsort(first, kind="stable")          # node numbers by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return (rank[inverse.reshape(-1)].astype(np.int64), X[first[order]],
            counts[order].astype(np.float64))


def symmetrize(B, idx, m, n_threads=1):
    """A = (B + Bᵀ)/2 as CSR float64 with sorted indices, from the k edges of each of the m
    rows (``_knn_graph.pyx``): A_ij = (B_ij + B_ji)/2 = A_ji exactly (the same two terms,
    added in either order); a sum of zero is left out. The rows of ``idx`` and ``B`` (int64
    and float64 arrays, m × k, numbers 0..m−1 distinct within a row, as every neighbour
    search here gives them; else RuntimeError) are sorted by neighbour number in place:
    beside them only Bᵀ and A are held. Indices int32 while 2·m·k < 2³¹, as SciPy's own sum
    gives them. The sort and the merge take ``n_threads``, row by row: the same A with any."""
    from scipy import sparse

    idx = np.ascontiguousarray(idx, dtype=np.int64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    k = idx.shape[1]
    if idx.shape != (m, k) or B.shape != (m, k) or (idx.size and not (
            0 <= idx.min() and idx.max() < m)):
        raise RuntimeError(f"symmetrize: neighbour lists of shape {idx.shape} with numbers "
                           f"outside 0..{m - 1}, or weights of shape {B.shape} (internal)")
    itype = np.int32 if 2 * m * k < 2 ** 31 else np.int64
    if _knn_graph.sort_lists(idx, B, n_threads):
        raise RuntimeError("symmetrize: a node is listed twice in one row (internal)")
    tptr = np.empty(m + 1, dtype=itype)
    tj = np.empty(m * k, dtype=itype)
    tw = np.empty(m * k)
    _knn_graph.transpose_lists(idx, B, tptr, tj, tw)
    indptr = np.empty(m + 1, dtype=itype)
    none = np.empty(0, dtype=itype)
    _knn_graph.merge_lists(idx, B, tptr, tj, tw, indptr, none, np.empty(0), False, n_threads)
    indices = np.empty(int(indptr[-1]), dtype=itype)
    data = np.empty(int(indptr[-1]))
    _knn_graph.merge_lists(idx, B, tptr, tj, tw, indptr, indices, data, True, n_threads)
    del tptr, tj, tw
    A = sparse.csr_matrix((data, indices, indptr), shape=(m, m))
    A.has_sorted_indices = True
    return A


def scale_nodes(A, counts):
    """E = U A U, E_ij = u_i u_j A_ij (CSR, the same pattern)."""
    E = A.copy()
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    E.data = A.data * counts[rows] * counts[A.indices]
    return E


def components(A):
    """(count, component of each node, int32) of the undirected graph A."""
    from scipy.sparse.csgraph import connected_components

    n_comp, comp = connected_components(A, directed=False)
    return int(n_comp), comp.astype(np.int32)


# -- components joined -----------------------------------------------------------------------
JOIN_MAX_WORK = 32 * 200_000  # components × nodes joined by bridges (else grouped by volume)
JOIN_MAX_NODES = 200_000     # and up to this many nodes (a search of the others each)


def can_join(graph):
    """Whether ``join_components`` applies: a connectivity graph of points, not joined yet,
    with more than one component, at most ``JOIN_MAX_NODES`` nodes, and components × nodes
    at most ``JOIN_MAX_WORK`` (every component of a round searches the others' points: a
    round costs about that many points' worth of k-d tree or search; the rounds at least
    halve the count)."""
    info = graph.info
    return (graph.nodes is not None and info.weighting == "connectivity"
            and not info.bridges and 1 < info.n_components
            and info.n_nodes <= JOIN_MAX_NODES
            and info.n_components * info.n_nodes <= JOIN_MAX_WORK)


def bridge_weights(graph, r, c):
    """ρ_i ρ_j / ‖x_i − x_j‖² of each bridge (i, j), ρ_i the longest edge of node i in the
    neighbour graph (its neighbourhood's radius; the bridge's length where i has no other
    neighbour): about 1 for a bridge as long as the edges beside it, falling with its
    square beyond (a bridge is at least as long as the radius at each end, else the nodes
    would be neighbours), never 0."""
    A, nodes = graph.affinity, graph.nodes
    scale = search_scale(nodes)
    ends = np.unique(np.r_[r, c])
    radius = np.zeros(nodes.shape[0])
    for i in ends:
        nbrs = A.indices[A.indptr[i]:A.indptr[i + 1]]
        diff = (nodes[nbrs] - nodes[i]) * scale
        radius[i] = np.sqrt((diff * diff).sum(axis=1).max())
    diff = (nodes[r] - nodes[c]) * scale
    length = np.sqrt((diff * diff).sum(axis=1))
    # a node whose only neighbour is itself (n_neighbors=1) has no radius: the bridge's
    # length stands in for it (weight 1 at such an end, never 0)
    rho_r = np.where(radius[r] > 0, radius[r], length)
    rho_c = np.where(radius[c] > 0, radius[c], length)
    return np.minimum(1.0, np.divide(rho_r * rho_c, length * length,
                                     out=np.ones_like(length), where=length > 0))


def join_components(graph, n_threads=1):
    """The graph with its components joined into one by bridges (Borůvka's rounds): every
    component (above ``TREE_MAX_DIM`` dimensions all but the largest) gets an edge between its
    point nearest to another component and that point, of weight ``bridge_weights`` (times
    the copies u_i u_j: about 1 for a bridge as long as the edges at its ends, less for a
    longer one, so that the cuts of long bridges are the cheap ones)
    (the first such point of the component; which of several equally near points it links to
    is the search's choice), found by a k-d tree of the other components' points up to
    ``TREE_MAX_DIM`` dimensions and by scikit-learn's chunked search above (``exact_nearest``,
    on ``n_threads``: a k-d tree in 64 dimensions compares nearly every pair one by one, 286 s
    for 100,000 points against 12 s). Each such edge is one of the minimum spanning tree of
    the components, so the rounds end with that tree whichever components a round leaves
    out. The chunked search costs its queries times the other points: leaving out the
    largest component (the most queries) took 60,000 × 64 points in 13 components (one of
    54,000) from 3.05 to 2.39 s, the same bridges; a k-d tree's cost is its build, the same
    for every component, and there the round more that the skip can cost is not saved. Then
    merging components greedily by the least ncut increase
    (``engine.graph_starts.merge_to_k``) keeps near components together rather than grouping
    them by volume alone. The components of ``graph`` stay in ``components``;
    ``GraphInfo.bridges`` counts the edges added, and ``GraphInfo.n_components`` stays the
    neighbour graph's."""
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    m = graph.info.n_nodes
    scale = search_scale(graph.nodes)       # (the distances only compared)
    nodes = graph.nodes if scale == 1.0 else graph.nodes * scale
    group = np.asarray(graph.components, dtype=np.int64)
    rows, cols = [], []
    while True:
        count = int(group.max()) + 1
        if count <= 1:
            break
        found = {}
        largest = (int(np.argmax(np.bincount(group, minlength=count)))
                   if nodes.shape[1] > TREE_MAX_DIM else -1)
        for c in range(count):
            if c == largest:    # its nearest pair is found from the others (docstring)
                continue
            inside = np.flatnonzero(group == c)
            outside = np.flatnonzero(group != c)
            if nodes.shape[1] <= TREE_MAX_DIM:
                dist, j = cKDTree(nodes[outside]).query(nodes[inside], k=1)
            else:
                dist, j = (a[:, 0] for a in exact_nearest(  # (nodes scaled above)
                    nodes[outside], nodes[inside], 1, n_threads, scale=1.0))
            a = int(np.argmin(dist))
            edge = (min(inside[a], outside[j[a]]), max(inside[a], outside[j[a]]))
            found[edge] = None
        for i, j in found:
            rows.append(i)
            cols.append(j)
        links = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(m, m))
        merged = sparse.csr_matrix((np.ones(m), (np.arange(m), group)), shape=(m, count))
        _, group_of = connected_components(merged.T @ (links + links.T) @ merged,
                                           directed=False)
        group = group_of[group]
    r, c = np.array(rows), np.array(cols)
    w = graph.counts[r] * graph.counts[c] * bridge_weights(graph, r, c)
    keep = np.asarray(graph.affinity[r, c]).reshape(-1) == 0
    bridges = sparse.csr_matrix((np.r_[w[keep], w[keep]], (np.r_[r[keep], c[keep]],
                                                           np.r_[c[keep], r[keep]])),
                                shape=(m, m))
    E = (graph.affinity + bridges).tocsr()
    E.sum_duplicates()
    E.sort_indices()
    info = replace(graph.info, nnz=int(E.nnz), bridges=int(keep.sum()))
    return Graph(E, graph.node_of, graph.nodes, graph.counts, graph.scales, graph.components,
                 info)


# -- a given affinity ------------------------------------------------------------------------
def check_affinity(A, what="affinity", n_clusters=None, first_index=0):
    """A user-given affinity as CSR float64 with sorted indices, exactly symmetric.

    Raises ``DataError`` (one line, naming the first bad row and column) unless A is a
    non-empty square matrix of real numbers, finite, non-negative, symmetric within
    ``SYMMETRY_RTOL`` × max A_ij, every row has a positive entry (a row of zeros is a point
    of degree 0, outside every cut) and, when ``n_clusters`` is given, A has at least that many
    points. The stored matrix is (A + Aᵀ)/2, so rounding asymmetry does not reach the engine,
    divided by its largest entry (which becomes 1): the normalized cut, the labels, the
    objective J and the inertia are the same at any scale of A, whereas the degrees, volumes
    and inner sums of a fit (the estimator's ``sample_weight_``, ``cluster_weights_`` and
    ``inner_sums_``, the model's ``graph_degrees``, ``graph_vol`` and ``graph_links``) are
    those of the rescaled matrix. A row whose degree is below ``MIN_RELATIVE_DEGREE`` (about
    1.5e-154) times the largest entry is a ``DataError``: its squared degree, which the
    kernel's diagonal divides by, would leave float range. Rows and columns are named
    counting from ``first_index`` (1 for a Matrix Market file, whose entries count from 1).
    """
    from scipy import sparse

    if not sparse.issparse(A):
        try:
            A = np.asarray(A)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{what} is not a matrix ({exc})") from None
    if A.ndim != 2:
        raise DataError(f"{what} must be a 2-D matrix, got {A.ndim} dimensions")
    if A.shape[0] != A.shape[1]:
        raise DataError(f"{what} must be square, got {A.shape[0]}×{A.shape[1]}")
    if A.shape[0] == 0:
        raise DataError(f"{what} is empty (0×0): there are no points to cluster")
    if n_clusters is not None and int(n_clusters) > A.shape[0]:
        raise DataError(f"{what} has {A.shape[0]} points, fewer than the {int(n_clusters)} "
                        f"clusters asked for")
    if not (np.issubdtype(A.dtype, np.number) and not np.iscomplexobj(A)) \
            and A.dtype != np.bool_:
        raise DataError(f"{what} must hold real numbers, got dtype {A.dtype}")
    A = sparse.csr_matrix(A, dtype=np.float64)
    A.sum_duplicates()
    A.sort_indices()
    bad = np.flatnonzero(~np.isfinite(A.data))
    if bad.size:
        raise DataError(f"{what} {_entry(A, bad[0], first_index)}: "
                        f"{A.data[bad[0]]} is not a finite number")
    bad = np.flatnonzero(A.data < 0)
    if bad.size:
        raise DataError(f"{what} {_entry(A, bad[0], first_index)}: "
                        f"negative weight {A.data[bad[0]]:.6g}")
    _check_symmetric(A, what, first_index)
    largest = float(A.data.max()) if A.nnz else 0.0
    if largest > 0:
        # divided by the largest weight: the normalized cut is the same at any scale, and the
        # sums the fit forms (degrees, volumes, their squares) stay within float range
        scaled = A.data / largest
        lost = np.flatnonzero((scaled == 0) & (A.data > 0))
        if lost.size:
            raise DataError(f"{what} {_entry(A, lost[0], first_index)}: weight "
                            f"{A.data[lost[0]]:.3g} is too small beside the largest weight "
                            f"({largest:.3g}) to be represented in float range (their ratio is "
                            f"below about 4.9e-324)")
        A = sparse.csr_matrix((scaled, A.indices, A.indptr), shape=A.shape)
    S = ((A + A.T) * 0.5).tocsr()
    S.sum_duplicates()
    S.sort_indices()
    top = float(S.data.max()) if S.nnz else 0.0
    if 0 < top != 1.0:          # the mirror of the largest weight a little smaller
        S.data /= top
    degrees = np.asarray(S.sum(axis=1)).reshape(-1)
    empty = np.flatnonzero(degrees <= 0)
    if empty.size:
        raise DataError(f"{what} row {empty[0] + first_index} has no positive weight (a point of degree 0 "
                        f"belongs to no cut); give it an edge or a self-loop")
    tiny = np.flatnonzero(degrees < MIN_RELATIVE_DEGREE)
    if tiny.size:  # the kernel's diagonal divides by d²: d² must be a normal float
        i = int(tiny[0])
        raise DataError(f"{what} row {i + first_index}: its weights sum to {degrees[i] * largest:.3g}, "
                        f"{degrees[i]:.3g} times the largest weight ({largest:.3g}); the "
                        f"graph kernel squares the degrees, and below about "
                        f"{MIN_RELATIVE_DEGREE:.2g} times the largest weight the square "
                        f"leaves float range; give the row larger weights")
    return S


def _entry(A, position, first_index=0):
    """'row r, column c' of the stored entry ``position`` of the CSR matrix A (counted from
    ``first_index``): found when a message needs it, so that the checks hold no row number
    per entry."""
    row = int(np.searchsorted(A.indptr, position, side="right")) - 1
    return f"row {row + first_index}, column {int(A.indices[position]) + first_index}"


def _check_symmetric(A, what, first_index=0):
    diff = (A - A.T).tocsr()
    diff.eliminate_zeros()
    if diff.nnz == 0:
        return
    scale = float(A.data.max()) if A.nnz else 0.0
    worst = int(np.argmax(np.abs(diff.data)))
    if abs(diff.data[worst]) <= SYMMETRY_RTOL * scale:
        return
    r = int(np.repeat(np.arange(diff.shape[0]), np.diff(diff.indptr))[worst])
    c = int(diff.indices[worst])
    # as many digits as tell the two apart (0.1 and 0.1000001 are not "0.1" twice)
    digits = next(p for p in (6, 10, 14, 17)
                  if f"{A[r, c]:.{p}g}" != f"{A[c, r]:.{p}g}" or p == 17)
    r1, c1 = r + first_index, c + first_index
    raise DataError(f"{what} is not symmetric: row {r1}, column {c1} holds "
                    f"{A[r, c]:.{digits}g} but row {c1}, column {r1} holds "
                    f"{A[c, r]:.{digits}g}")


def given_graph(A, n_clusters=None):
    """A checked user affinity as a ``Graph`` (every point its own node, no coordinates)."""
    E = check_affinity(A, n_clusters=n_clusters)
    n = E.shape[0]
    n_comp, comp = components(E)
    sizes = np.bincount(comp, minlength=n_comp)
    info = GraphInfo(n_points=n, n_nodes=n, n_neighbors=0, weighting="precomputed",
                     nnz=int(E.nnz), n_components=n_comp,
                     component_sizes=tuple(int(s) for s in np.sort(sizes)[::-1]),
                     self_loops=bool(np.any(E.diagonal() > 0)), scale_neighbor=0,
                     search="none")
    return Graph(E, None, None, np.ones(n), None, comp, info)
