"""Graph kernels: the k-nearest-neighbour graph, the normalized-cut engine in O(nnz) a pass,
its starts, the out-of-sample extension and the sparse silhouette — each against a brute-force
dense reference (the graph kernel K = σD⁻¹ + D⁻¹AD⁻¹ built as an n×n array), scikit-learn's
``kneighbors_graph``/``silhouette_score``, or the estimator's exact precomputed-kernel code."""
import contextlib
import warnings

import numpy as np
import pytest
from scipy import sparse

from reference import distances as dense_distances
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine import _graph, graph_starts
from kkmeans_cli.kernels import _knn_graph
from kkmeans_cli.engine.graph import (GraphKernel, cluster_sums, distances, hartigan, lloyd,
                                      normalized_cut, refine, update_sums)
from kkmeans_cli.kernels.graph_fit import (build_graph, fit_graph, fit_on_graph,
                                          new_point_distances, new_point_rows, predict_graph)
from kkmeans_cli.errors import DataError, KKMeansWarning, ValueRangeError
from kkmeans_cli.kernels import graph as kgraph
from kkmeans_cli.measures.graph_silhouette import graph_silhouette


def _points(n, seed, d=2):
    return np.random.default_rng(seed).normal(size=(n, d))


def _random_affinity(n, seed, density=0.15, loops=True):
    """A random symmetric non-negative sparse affinity with positive degrees."""
    rng = np.random.default_rng(seed)
    M = sparse.random(n, n, density=density, random_state=seed, format="csr")
    M.data = rng.uniform(0.1, 2.0, M.nnz)
    A = (M + M.T).tolil()
    A.setdiag(rng.uniform(0.0, 1.0, n) if loops else 0.0)
    A = A.tocsr()
    A.eliminate_zeros()
    A = A + sparse.diags(np.where(np.asarray(A.sum(1)).ravel() > 0, 0.0, 1.0))
    return kgraph.check_affinity(A)


def _dense_kernel(kernel):
    A = kernel.matrix().toarray()
    d = A.sum(1)
    return kernel.sigma * np.diag(1.0 / d) + A / np.outer(d, d), d


def _point_affinity(G):
    """The graph between the points (nodes are numbered in the tree's order)."""
    A = G.affinity.toarray()
    return A if G.node_of is None else A[np.ix_(G.node_of, G.node_of)]


def _dense_ncut(A, labels):
    A = A.toarray()
    return sum(A[np.ix_(labels == c, labels != c)].sum() / A[labels == c].sum()
               for c in np.unique(labels))


# -- the graph -------------------------------------------------------------------------------
def test_connectivity_graph_is_scikit_learns():
    from sklearn.neighbors import kneighbors_graph

    X = _points(300, 0)
    G = kgraph.knn_graph(X, 10, "connectivity")
    B = kneighbors_graph(X, 10, include_self=True)
    np.testing.assert_array_equal(_point_affinity(G), (0.5 * (B + B.T)).toarray())
    assert G.info.n_nodes == 300 and G.info.nnz == G.affinity.nnz
    np.testing.assert_array_equal(G.nodes[G.node_of], X)


def _dense_choice(G):
    """The choice graph of G between the points, as a dense array."""
    return G.choice[G.node_of][:, G.node_of].toarray()


def test_the_choice_graph_is_the_mutual_graph_with_a_backbone():
    """The graph the default starts are chosen on, against scikit-learn's neighbour lists:
    i ~ j where each is among the other's 1 + ⌈1.5·(k − 1)⌉ nearest (itself counted), or
    one among the other's BACKBONE + 1; weight 1. The fit's own graph stays the k-list one."""
    from sklearn.neighbors import kneighbors_graph

    X = _points(300, 0)
    G = kgraph.knn_graph(X, 11, "connectivity", choice_k=2)
    L = kneighbors_graph(X, 16, include_self=True).toarray()
    S = kneighbors_graph(X, kgraph.BACKBONE + 1, include_self=True).toarray()
    np.testing.assert_array_equal(_dense_choice(G),
                                  np.maximum(np.minimum(L, L.T), np.maximum(S, S.T)))
    B = kneighbors_graph(X, 11, include_self=True)
    np.testing.assert_array_equal(_point_affinity(G), (0.5 * (B + B.T)).toarray())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_choice_graph_is_the_thresholded_sum_of_its_lists(seed):
    """Entry for entry against its definition as a sum, on random lists (each node first, its
    others distinct) and a random partition: (B + Bᵀ)/2 ≥ 1 for B_ij = 4 at the first
    BACKBONE + 1 places of i's list and 1 beyond, kept within a part, weight 1; on 1, 2 and 3
    threads: edges of each kind (each lists the other beyond the backbone, one has the other
    in its backbone and is not listed back, one lists the other alone: left out) occur.
    The lists reach any node, so rows read others' anywhere."""
    from scipy import sparse

    rng = np.random.default_rng(seed)
    m, width = 4000, (3, 9, 15)[seed]

    def row(i):     # others from the 16 nodes around (often mutual) and 6 anywhere
        pool = np.setdiff1d(np.r_[(i + np.arange(-8, 9)) % m, rng.choice(m, 6)], [i])
        return np.r_[i, rng.choice(pool, width - 1, replace=False)]

    idx = np.array([row(i) for i in range(m)], dtype=np.int64)
    parts = rng.integers(0, 3, m).astype(np.int32)
    B = sparse.csr_matrix((np.where(np.arange(width) <= kgraph.BACKBONE, 4.0, 1.0)[None, :]
                           .repeat(m, axis=0).ravel(), idx.ravel(),
                           np.arange(0, m * width + 1, width)), shape=(m, m))
    want = ((B + B.T) * 0.5 >= 1.0).toarray() & (parts[:, None] == parts[None, :])
    for threads in (1, 2, 3):
        C = kgraph.choice_graph(idx.copy(), parts, m, threads)
        assert C.has_sorted_indices and C.indices.dtype == np.int32
        np.testing.assert_array_equal(C.toarray(), want.astype(np.float64))
        assert C.nnz == np.count_nonzero(want)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_component_count_of_a_pattern_is_scipys(seed):
    """Union-find over a CSR pattern (read as undirected, one way suffices) against SciPy's
    ``connected_components``: sparse random graphs of many components, isolated nodes, a
    self-loop, an empty graph."""
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(seed)
    m = [1, 50, 700, 3000][seed]
    e = int(rng.integers(0, m + 1))
    A = sparse.csr_matrix((np.ones(e), (rng.integers(0, m, e), rng.integers(0, m, e))),
                          shape=(m, m))
    A.sum_duplicates()
    want = connected_components(A, directed=False)[0]
    assert _knn_graph.csr_component_count(A.indptr, A.indices) == want
    assert _knn_graph.csr_component_count(A.indptr.astype(np.int64),
                                          A.indices.astype(np.int64)) == want


def test_the_choice_graph_of_copies_carries_their_counts():
    """As the fit's graph does: u_i u_j times the choice graph of the distinct points."""
    X = _points(150, 4)
    G = kgraph.knn_graph(np.vstack([X, X[:20], X[:3]]), 9, choice_k=2)
    C0 = _dense_choice(kgraph.knn_graph(X, 9, choice_k=2))
    nodes = G.node_of[:150]
    uu = G.counts[nodes]
    np.testing.assert_array_equal(G.choice[nodes][:, nodes].toarray(),
                                  uu[:, None] * C0 * uu[None, :])


def test_the_choice_graph_is_left_out_where_it_does_not_apply():
    """Not asked for, self-tuning weights, more columns than the k-d tree takes, one
    neighbour, a given affinity, starts other than the default: no choice graph (the starts
    are chosen on the fit's own graph)."""
    X = _points(200, 1)
    assert kgraph.knn_graph(X, 11).choice is None
    assert kgraph.knn_graph(X, 11, "self-tuning", choice_k=2).choice is None
    assert kgraph.knn_graph(_points(200, 1, d=kgraph.TREE_MAX_DIM + 1), 11,
                            choice_k=2).choice is None
    assert kgraph.knn_graph(X, 1, choice_k=2).choice is None
    assert kgraph.given_graph(kgraph.knn_graph(X, 5).affinity).choice is None
    assert build_graph(X, 2, start="multilevel").choice is None
    assert build_graph(X, 2).choice is not None
    assert fit_graph(X, 2, whiten=False).graph.choice is None     # used, then let go


def test_no_choice_graph_where_the_components_are_the_starts():
    """k components or more are the default starts themselves (exactly k, joined by bridges or
    grouped): a fit of two clusters builds no choice graph of two far blobs, a sweep to three
    does (its k = 3 splits a component), and the fit's graph is the same either way."""
    from kkmeans_cli.measures.graph_sweep import sweep_graph

    X = np.vstack([_points(150, 2), 50 + _points(150, 3)])
    two = kgraph.knn_graph(X, 11, choice_k=2)
    three = kgraph.knn_graph(X, 11, choice_k=3)
    assert two.info.n_components == 2 and two.choice is None and three.choice is not None
    assert (two.affinity != three.affinity).nnz == 0
    assert build_graph(X, 2).choice is None and build_graph(X, 2, largest=3).choice is not None
    res = fit_graph(X, 2, random_state=0, whiten=False)
    assert res.start == "components" and res.ncut == 0.0
    # a sweep of k = 2 fits k = 3 for its cut ratio: that start is chosen on the choice graph
    # (one start kept, where the fit's own graph would refine all six)
    swept = sweep_graph(X, [2], random_state=0)
    assert swept[0].fit.start == "components" and swept[0].next_ncut > 0.0
    three = fit_on_graph(build_graph(X, 2, largest=3), 3, rng=np.random.default_rng(0))
    alone = fit_on_graph(build_graph(X, 2), 3, rng=np.random.default_rng(0))
    assert len(three.start_kinds) == 1 and len(alone.start_kinds) == 6
    assert swept[0].next_ncut == three.ncut


def test_no_choice_graph_where_it_would_split_a_component():
    """Six tight points far from the rest: each lists the others of its six first, and none of
    the rest lists them among its sixteen, so only the fit's graph joins them."""
    rng = np.random.default_rng(5)
    X = np.vstack([rng.normal(size=(100, 2)), 20 + 0.01 * rng.normal(size=(6, 2))])
    G = kgraph.knn_graph(X, 11, choice_k=2)
    assert G.info.n_components == 1 and G.choice is None


@pytest.mark.parametrize("n_neighbors", [3, None])
def test_the_choice_graph_keeps_within_the_graphs_components(n_neighbors):
    """Its backbone and longer lists can reach past the fit's lists, across a cut of nothing:
    such edges are left out, so its components are the fit's graph's, node for node."""
    from scipy.sparse.csgraph import connected_components

    if n_neighbors is None:     # blobs of 25 points, two pairs near: their longer lists meet
        rng = np.random.default_rng(17)
        X = np.vstack([c + 0.1 * rng.normal(size=(25, 2))
                       for c in [(0, 0), (1, 0), (5, 5), (6, 5), (10, 0)]])
    else:
        X = np.random.default_rng(0).uniform(size=(500, 2))
    G = kgraph.knn_graph(X, n_neighbors, n_clusters=6, choice_k=28 if n_neighbors else 6)
    assert G.info.n_components > 1 and G.choice is not None
    C = G.choice.tocoo()
    assert np.all(G.components[C.row] == G.components[C.col])
    count, labels = connected_components(G.choice, directed=False)
    assert count == G.info.n_components
    assert len(set(zip(labels, G.components))) == count      # the same partition


def test_the_graph_of_tied_points_does_not_depend_on_the_start():
    """A grid ties many distances at the last places of a list: the fit's graph is the first
    n_neighbors of the same longer lists whether or not the choice graph is built."""
    X = np.stack(np.meshgrid(np.arange(20.0), np.arange(20.0)), -1).reshape(-1, 2)
    for m in (5, 21):
        a = kgraph.knn_graph(X, m, choice_k=2).affinity
        b = kgraph.knn_graph(X, m).affinity
        assert (a != b).nnz == 0
    auto = fit_graph(X, 2, random_state=0, whiten=False).graph.affinity
    multilevel = fit_graph(X, 2, start="multilevel", random_state=0, whiten=False)
    assert (auto != multilevel.graph.affinity).nnz == 0


@pytest.mark.parametrize("coarsened", [False, True])
def test_the_default_start_is_the_lowest_cut_of_the_choice_graph(monkeypatch, coarsened):
    """With a choice graph one start is returned: of the default starts refined on the choice
    graph, the one that cuts it least (on a small graph; above SPECTRAL_DIRECT_MAX nodes, the
    winner carried up the choice graph's coarsening), and the fit starts from it."""
    from sklearn.datasets import make_circles

    X, _ = make_circles(600, factor=0.5, noise=0.08, random_state=0)
    G = kgraph.knn_graph(X, 21, choice_k=2)
    if coarsened:
        monkeypatch.setattr(graph_starts, "SPECTRAL_DIRECT_MAX", 200)
    runs, levels = graph_starts.best_default_start(G.affinity, 2, np.random.default_rng(7),
                                                   choice=G.choice)
    assert len(runs) == 1 and (levels > 0) == coarsened
    kind, labels = runs[0]
    if not coarsened:
        kernel = GraphKernel(G.choice)
        starts = graph_starts.default_starts(kernel, 2, np.random.default_rng(7))
        refined = [refine(kernel, start, 2) for _, start in starts]
        cuts = [run.sums.ncut() for run in refined]
        assert kind == starts[int(np.argmin(cuts))][0]
        np.testing.assert_array_equal(labels, refined[int(np.argmin(cuts))].labels)
    res = fit_graph(X, 2, random_state=7, n_threads=1, whiten=False)
    if not coarsened:
        assert res.start == kind and res.start_kinds == (kind,)
        np.testing.assert_array_equal(res.node_labels,
                                      refine(GraphKernel(G.affinity), labels, 2).labels)


@pytest.mark.parametrize("d", [2, 20])
def test_self_tuning_graph_against_brute_force(d):
    """σ_i = distance to the 7th nearest other point, A = (B + Bᵀ)/2 with
    B_ij = exp(−d²/(σ_iσ_j)); in 20-D through the exact blocked search."""
    X = _points(200, 1, d)
    G = kgraph.knn_graph(X, 9, "self-tuning")
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    order = np.argsort(D, axis=1, kind="stable")[:, :9]
    sigma = D[np.arange(200), order[:, 7]]
    B = np.zeros((200, 200))
    for i in range(200):
        B[i, order[i]] = np.exp(-D[i, order[i]] ** 2 / (sigma[i] * sigma[order[i]]))
    np.testing.assert_allclose(_point_affinity(G), 0.5 * (B + B.T), rtol=1e-12, atol=0)
    scales = G.scales if G.node_of is None else G.scales[G.node_of]
    np.testing.assert_allclose(scales, sigma, rtol=1e-12)
    assert np.array_equal(G.affinity.toarray(), G.affinity.toarray().T)


def test_exact_search_matches_the_tree():
    X = _points(500, 2, 6)
    d1, i1 = kgraph.exact_nearest(X, X, 8, self_first=True)
    from scipy.spatial import cKDTree

    d2, i2 = cKDTree(X).query(X, 8)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_allclose(d1, d2, rtol=1e-12)


def test_high_dimensional_graphs_do_not_depend_on_the_thread_count():
    """Above ``TREE_MAX_DIM`` the search is exact by BLAS blocks; 1 and 2 threads (BLAS and
    the passes) give the same neighbours, the same graph and the same fit."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(2500, n_features=kgraph.TREE_MAX_DIM + 5, centers=4, random_state=0)
    fits = [fit_graph(X, 4, random_state=0, n_threads=t) for t in (1, 2)]
    A1, A2 = (f.graph.affinity for f in fits)
    assert (A1 != A2).nnz == 0
    np.testing.assert_array_equal(fits[0].labels, fits[1].labels)
    assert fits[0].objective == fits[1].objective
    d1, i1 = kgraph.exact_nearest(X, X, 21, 1, self_first=True)
    d2, i2 = kgraph.exact_nearest(X, X, 21, 2, self_first=True)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_array_equal(d1, d2)


@pytest.mark.parametrize("n", [1500, 3000])
def test_exact_search_keeps_the_same_of_equally_distant_points_on_any_threads(n):
    """Points on an integer grid are at many equal distances (squared distances are whole
    numbers, computed exactly): which of the equally distant points fill the last places
    of a list must not depend on the threads asked for, nor on the OpenMP threads the
    process allows. Above ``ARGKMIN_MIN_QUERIES`` queries scikit-learn's search runs on
    whole chunks of queries per thread (one thread up to 2,048 queries, where with more it
    would split the points among them); the lists are exact."""
    from scipy.spatial.distance import cdist
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(n)
    X = np.unique(rng.integers(0, 3, size=(n + 200, kgraph.TREE_MAX_DIM + 3)), axis=0)
    X = rng.permutation(X)[:n].astype(np.float64)
    runs = []
    for allowed in (1, 4):
        with threadpool_limits(limits=allowed, user_api="openmp"):
            runs += [kgraph.exact_nearest(X, X, 21, t, self_first=True) for t in (1, 2, 4)]
    for dist, idx in runs[1:]:
        np.testing.assert_array_equal(idx, runs[0][1])
        np.testing.assert_array_equal(dist, runs[0][0])
    D = cdist(X, X)
    np.testing.assert_allclose(runs[0][0], np.sort(D, axis=1)[:, :21], rtol=1e-12, atol=0)
    assert (runs[0][1][:, 0] == np.arange(n)).all()
    ties = np.sort(D, axis=1)[:, 21] == np.sort(D, axis=1)[:, 20]
    assert ties.mean() > 0.5            # the last place is a choice among equals


def test_a_query_gets_the_same_neighbours_whatever_the_other_queries():
    """On an integer grid (many equal distances) the exact search keeps, for each query, the
    same of equally distant points whether it is asked alone, among 500 or among 2,500
    queries (one thread, or two on whole chunks of queries): ``predict`` labels a row the
    same whatever rows come with it."""
    rng = np.random.default_rng(7)
    P = np.unique(rng.integers(0, 3, size=(1600, kgraph.TREE_MAX_DIM + 2)), axis=0)
    P = rng.permutation(P)[:1400].astype(np.float64)
    Q = rng.integers(0, 3, size=(2500, kgraph.TREE_MAX_DIM + 2)).astype(np.float64)
    whole = kgraph.exact_nearest(P, Q, 12, 2)
    for rows in (slice(0, 500), slice(1000, 1001), slice(2000, 2500)):
        part = kgraph.exact_nearest(P, Q[rows], 12, 2)
        np.testing.assert_array_equal(part[1], whole[1][rows])
        np.testing.assert_array_equal(part[0], whole[0][rows])


def test_exact_search_puts_back_a_point_that_rounding_left_out_of_its_own_list(monkeypatch):
    """‖x‖² + ‖x‖² − 2x·x can round above a very near point's distance: where the chunked
    search's list of point i lacks i, the row is searched again and i comes first."""
    from scipy.spatial.distance import cdist

    X = _points(1500, kgraph.TREE_MAX_DIM + 1, 3)
    found = kgraph.argkmin

    def losing(points, queries, k, n_threads=1):
        idx = found(points, queries, k + 1, n_threads)
        out = idx[:, :k].copy()
        for i in range(7):                       # the first 7 rows without the point
            out[i] = idx[i][idx[i] != i][:k]
        return out

    monkeypatch.setattr(kgraph, "argkmin", losing)
    dist, idx = kgraph.exact_nearest(X, X, 9, 2, self_first=True)
    np.testing.assert_array_equal(idx[:, 0], np.arange(1500))
    D = cdist(X, X)
    np.testing.assert_allclose(dist, np.sort(D, axis=1)[:, :9], rtol=1e-12, atol=0)


@pytest.mark.parametrize("n", [500, 1500])
def test_exact_search_of_points_far_from_the_origin(n):
    """‖x‖² + ‖y‖² − 2x·y at 10⁸ ± 10⁻³ would lose every digit that tells the points apart:
    the search runs on the coordinates less their rounded mean, and finds the brute-force
    neighbours (on one thread below 1,025 points, on two above)."""
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(n)
    local = rng.normal(scale=1e-3, size=(n, kgraph.TREE_MAX_DIM + 5))
    X = 1e8 + local
    dist, idx = kgraph.exact_nearest(X, X, 9, 2, self_first=True)
    D = cdist(X, X)                         # differences first: exact to rounding
    np.testing.assert_allclose(dist, np.sort(D, axis=1)[:, :9], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(idx[:, 0], np.arange(n))
    np.testing.assert_allclose(D[np.arange(n)[:, None], idx], dist, rtol=1e-12, atol=0)


def _far_tight_groups(d=kgraph.TREE_MAX_DIM + 5):
    """Four sub-blobs (5e-3 apart, spread 1e-3) in two groups at ±1e8: the mean is about 0,
    so no shift helps, and ‖x‖² + ‖y‖² − 2x·y at 1e16 keeps no digit of the 1e-6 that tell
    neighbours apart."""
    rng = np.random.default_rng(0)
    sub = rng.normal(size=(4, d)) * 5e-3
    X = np.vstack([off + sub[2 * g + s] + rng.normal(scale=1e-3, size=(300, d))
                   for g, off in enumerate((1e8, -1e8)) for s in range(2)])
    return X, np.repeat(np.arange(4), 300)


def test_far_tight_groups_are_searched_again_by_differences():
    """Every row of the far, tight groups is named by ``imprecise_rows`` and searched again
    by the coordinates' differences: the brute-force neighbours (cdist), the same on 1 and
    2 threads; a fit's predict(X_fit) is its labels (before: 555 of 2,200 rows differed)."""
    from scipy.spatial.distance import cdist

    X, y = _far_tight_groups()
    D = cdist(X, X)
    ref = np.sort(D, axis=1)[:, :9]
    runs = [kgraph.exact_nearest(X, X, 9, t, self_first=True) for t in (1, 2)]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    dist, idx = runs[0]
    np.testing.assert_allclose(dist, ref, rtol=1e-9, atol=0)
    np.testing.assert_array_equal(idx[:, 0], np.arange(X.shape[0]))
    np.testing.assert_allclose(D[np.arange(X.shape[0])[:, None], idx], dist, rtol=1e-9)
    fit = fit_graph(X, 4, random_state=0)
    np.testing.assert_array_equal(predict_graph(fit.model(), X), fit.labels)
    np.testing.assert_array_equal(predict_graph(fit.model(), X[::5]), fit.labels[::5])


def test_a_rows_neighbours_do_not_depend_on_the_rows_beside_it():
    """Whether a row is searched again, and at which scale, is decided by the row and the
    points alone: far tight rows and tiny rows get the same neighbours alone as among
    others (a row at 1.0 beside tiny ones, far rows among 300). (Where the points are too
    many to search again, the warning's case, the rounding of the products may differ with
    the rows searched together.)"""
    X, _ = _far_tight_groups()
    batch = kgraph.exact_nearest(X, X[::4] + 1e-4, 9, 1)
    for r in (0, 7, 150):
        alone = kgraph.exact_nearest(X, X[4 * r:4 * r + 1] + 1e-4, 9, 1)
        np.testing.assert_array_equal(alone[1][0], batch[1][r])
    T = np.ldexp(_points(400, 20), -900)
    for search in (kgraph.exact_nearest, kgraph.tree_nearest):
        P = T if search is kgraph.exact_nearest else T[:, :2].copy()
        Q = P[:5] * 0.75
        mixed = np.vstack([Q, np.ones((1, P.shape[1]))])
        np.testing.assert_array_equal(search(P, mixed, 7, 1)[1][:5], search(P, Q, 7, 1)[1])
        d, i = search(P, mixed[5:], 7, 1)      # the row at 1.0: all points about 1 away
        assert np.all(np.isfinite(d)) and i.shape == (1, 7)


def test_ordinary_data_is_not_searched_again(monkeypatch):
    """Standardized, integer (digits' 0–16) and offset (10⁸ + N(0, 1), shifted by its mean)
    data keep the chunked search's lists: no row is named; nor beside one point at 10⁶ (the
    bound is each row's own: a global one named all 1,500 rows)."""
    def refuse(*args):
        raise AssertionError("searched again")

    monkeypatch.setattr(kgraph, "nearest_by_differences", refuse)
    rng = np.random.default_rng(1)
    outlier = np.vstack([rng.normal(size=(1500, 20)), np.full((1, 20), 1e6)])
    for X in (rng.normal(size=(1500, 20)), rng.integers(0, 17, (1500, 64)).astype(float),
              1e8 + rng.normal(size=(1500, 20)), outlier):
        kgraph.exact_nearest(X, X, 10, 2, self_first=True)
        kgraph.exact_nearest(X, X[:100] + 0.5, 9, 1)


def test_too_many_rows_to_search_again_are_warned_about(monkeypatch):
    X, _ = _far_tight_groups()
    monkeypatch.setattr(kgraph, "DIFFERENCES_MAX", X.size - 1)
    with pytest.warns(KKMeansWarning) as caught:
        kgraph.exact_nearest(X, X, 9, 1, self_first=True)
    assert [str(w.message) for w in caught] == [
        "the neighbour search may have missed near neighbours of 1,200 points: their "
        "coordinates are large against the distances between them (groups far apart, each "
        "tight; centring each group keeps the search exact)"]


@pytest.mark.parametrize("dims", [2, kgraph.TREE_MAX_DIM + 5])
@pytest.mark.parametrize("weighting", ["connectivity", "self-tuning"])
def test_tiny_coordinates_give_the_graph_and_labels_of_ordinary_ones(dims, weighting):
    """At 2⁻⁸⁰⁰ (about 10⁻²⁴¹) the squared distances of a search underflow to 0 (every point
    equally near: ARI 0.33 in 2-D, 0 in 20); the searches run at a power of two's scale
    (``search_scale``), which changes no comparison, so the graph, its σ_i (the same times
    2⁻⁸⁰⁰, exactly), the labels and predict are those of the data at scale 1 — the k-d tree
    (2-D), the chunked search (20-D) and the components' join alike."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(600, n_features=dims, centers=3, random_state=dims)
    X = np.vstack([X, X[:40] + 60.0])       # a far group: components to join at k = 3
    tiny = np.ldexp(X, -800)
    assert np.all(np.ldexp(tiny, 800) == X)
    G, Gt = (kgraph.knn_graph(Z, 10, weighting) for Z in (X, tiny))
    n_comp = G.info.n_components
    assert n_comp >= 2 and Gt.info.n_components == n_comp
    assert (G.affinity != Gt.affinity).nnz == 0
    if weighting == "self-tuning":
        np.testing.assert_array_equal(np.ldexp(Gt.scales, 800), G.scales)
    else:
        J, Jt = kgraph.join_components(G), kgraph.join_components(Gt)
        assert (J.affinity != Jt.affinity).nnz == 0 and J.info.bridges == n_comp - 1
    for whiten in (False, True):
        fits = []
        for Z in (X, tiny):     # (self-tuning graphs' components are grouped, and said)
            with (pytest.warns(KKMeansWarning, match="grouped by volume")
                  if weighting == "self-tuning" and n_comp > 3 else contextlib.nullcontext()):
                fits.append(fit_graph(Z, 3, n_neighbors=10, weighting=weighting,
                                      whiten=whiten, random_state=0))
        np.testing.assert_array_equal(fits[0].labels, fits[1].labels)
        np.testing.assert_array_equal(predict_graph(fits[1].model(), tiny), fits[1].labels)
        np.testing.assert_array_equal(predict_graph(fits[1].model(), tiny[::7]),
                                      predict_graph(fits[0].model(), X[::7]))


def _tight_beside_ordinary(seed=0, spread=1e-200):
    """Ten points spread ``spread`` about 0 beside ten spread 1 about (5, 5)."""
    rng = np.random.default_rng(seed)
    return np.r_[rng.normal(0.0, spread, (10, 2)), rng.normal(5.0, 1.0, (10, 2))]


def test_self_tuned_scales_of_points_packed_far_below_the_data_are_not_zero():
    """Beside points spread over 1, points 10⁻²⁰⁰ apart lie at distance 0 of each other in a
    search (squares underflow), so their σ_i was 0 and their weights 0/0: NaN in the graph,
    "Eigenvalues did not converge" or an inertia of NaN. Their distances are recomputed from
    the differences; σ_i is then the one NumPy gives, the weights finite, and predict
    places new points by them."""
    X = _tight_beside_ordinary()
    G = kgraph.knn_graph(X, 5, "self-tuning")
    assert np.all(np.isfinite(G.affinity.data)) and np.all(G.scales > 0)
    # σ_i of a tight point: its 7th nearest other point among the ten, as NumPy has it
    # (the search listed its neighbours among ties: σ_i is one of the distances in its group)
    group = X[G.node_of[:10]] if G.node_of is not None else X[:10]
    unit = group * 1e200
    within = np.sqrt(((unit[:, None, :] - unit[None, :, :]) ** 2).sum(-1))
    for i in range(10):
        node = G.node_of[i] if G.node_of is not None else i
        assert np.any(np.isclose(G.scales[node] / 1e-200, within[i][within[i] > 0],
                                 rtol=1e-12))
    fit = fit_graph(X, 2, weighting="self-tuning", random_state=0, n_threads=1)
    assert np.isfinite(fit.objective) and np.isfinite(fit.ncut)
    np.testing.assert_array_equal(graph_starts.canonical_labels(fit.labels),
                                  np.repeat([0, 1], 10))
    model = fit.model()
    np.testing.assert_array_equal(predict_graph(model, X), fit.labels)
    new = np.array([[3e-200, -2e-200], [5.0, 5.5], [1e-100, 0.0]])
    np.testing.assert_array_equal(predict_graph(model, new),
                                  fit.labels[[0, 10, 0]])


def test_the_command_fits_and_saves_points_packed_far_below_the_data(tmp_path):
    """The same data through the command line: it ended "unexpected ValueError: Out of range
    float values are not JSON compliant", no model written."""
    from helpers import labels_of, run, write_csv

    write_csv(tmp_path / "x.csv", _tight_beside_ordinary(), fmt="%.17g")
    result = run(["fit", tmp_path / "x.csv", "-k", "2", "--weighting", "self-tuning",
                  "-o", tmp_path / "m.npz", "-q"])
    assert result.exit_code == 0 and result.stderr == ""
    labels = labels_of(result.stdout)
    np.testing.assert_array_equal(graph_starts.canonical_labels(labels), np.repeat([0, 1], 10))
    again = run(["predict", tmp_path / "m.npz", tmp_path / "x.csv", "-q"])
    assert again.exit_code == 0
    np.testing.assert_array_equal(labels_of(again.stdout), labels)


@pytest.mark.parametrize("max_iter", [1, 2, 3])
def test_max_iter_bounds_the_lloyd_passes_of_a_refinement(max_iter):
    """Each round of Lloyd and Hartigan took at least one more Lloyd pass: max_iter = 1 ran
    2 and said it converged."""
    from helpers import ROOT

    X = np.loadtxt(f"{ROOT}/examples/moons.csv", delimiter=",", skiprows=1)
    fit = fit_graph(X, 5, whiten=False, max_iter=max_iter, random_state=0, n_threads=1)
    full = fit_graph(X, 5, whiten=False, random_state=0, n_threads=1)
    assert fit.n_iter <= max_iter
    assert fit.converged == (full.n_iter <= max_iter)
    kernel = fit.kernel
    for _, start in graph_starts.default_starts(kernel, 5, np.random.default_rng(0))[:3]:
        run = refine(kernel, start, 5, max_iter)
        assert 1 <= run.n_iter <= max_iter


def test_a_packed_point_lists_itself_first_and_its_neighbours_by_exact_distance():
    """The search breaks ties at distance 0 its own way, and may leave a packed point out of
    its own list; the rows recomputed are sorted by exact distance, the point itself first."""
    rng = np.random.default_rng(1)
    X = np.r_[rng.normal(0.0, 1e-200, (10, 2)), rng.normal(1e-199, 1e-200, (30, 2)),
              rng.normal(5.0, 1.0, (40, 2))]
    dist, idx = kgraph.nearest(X, X, 10)
    got_dist, got_idx = kgraph.exact_tiny_distances(X, X, dist, idx, self_first=True)
    np.testing.assert_array_equal(got_idx[:, 0], np.arange(X.shape[0]))
    assert np.all(got_dist[:, 0] == 0) and np.all(np.diff(got_dist, axis=1) >= 0)
    assert np.all(got_idx[:40] < 40)            # the packed points' neighbours are packed
    unit = X[:40] * 1e199
    exact = np.sqrt(((unit[:, None, :] - unit[got_idx[:40]]) ** 2).sum(-1)) / 1e199
    np.testing.assert_allclose(got_dist[:40], exact, rtol=1e-12)


def test_exact_tiny_distances_leave_a_search_of_ordinary_data_as_it_was():
    X = _tight_beside_ordinary(spread=1.0)
    dist, idx = kgraph.nearest(X, X, 6)
    got = kgraph.exact_tiny_distances(X, X, dist, idx)
    assert got[0] is dist and got[1] is idx
    tiny = np.ldexp(X, -800)        # all tiny: the search's own scale keeps its digits
    dist, idx = kgraph.nearest(tiny, tiny, 6)
    got = kgraph.exact_tiny_distances(tiny, tiny, dist, idx)
    assert got[0] is dist and got[1] is idx


def test_duplicates_are_one_node_with_their_edges():
    """Copies merge into one node carrying u_i u_j A_ij; the fit gives every copy its node's
    label and predict(X_fit) returns the labels."""
    X = _points(120, 3)
    Xd = np.vstack([X, X[:30], X[:5], -0.0 * X[:1] + X[:1]])
    G = kgraph.knn_graph(Xd, 8, "self-tuning")
    assert G.info.n_nodes == 120 and G.info.n_duplicates == Xd.shape[0] - 120
    np.testing.assert_array_equal(G.nodes[G.node_of], Xd)
    assert len(np.unique(G.node_of[:120])) == 120
    u = np.bincount(G.node_of).astype(float)
    np.testing.assert_array_equal(G.counts, u)
    # between the first 120 points (one copy each): u_i u_j times the graph of the distinct X
    A = _point_affinity(kgraph.knn_graph(X, 8, "self-tuning"))
    E = _point_affinity(G)[:120, :120]
    uu = u[G.node_of[:120]]
    np.testing.assert_allclose(E, uu[:, None] * A * uu[None, :], rtol=1e-15)
    res = fit_graph(Xd, 3, n_neighbors=8, weighting="self-tuning", random_state=0)
    np.testing.assert_array_equal(res.labels, res.node_labels[G.node_of])
    np.testing.assert_array_equal(predict_graph(res.model(), Xd), res.labels)


@pytest.mark.parametrize("seed", range(4))
def test_with_one_neighbour_copies_are_one_node_too(seed):
    """With n_neighbors=1 (each point's neighbour is itself) a search cannot show a copy at
    distance 0, and copies were left apart: one of ten copies took another label, which
    predict did not give it. They are one node, and predict(X_fit) returns the labels."""
    rng = np.random.default_rng(seed)
    X = np.repeat(np.array([[0.0, 0.0], [5.0, 5.0], [10.0, 0.0]]), 10, axis=0)
    X = X[rng.permutation(X.shape[0])]
    G = kgraph.knn_graph(X, 1)
    assert G.info.n_nodes == 3 and G.info.n_duplicates == 27
    for whiten in (False, "auto"):
        res = fit_graph(X, 2, n_neighbors=1, whiten=whiten, random_state=seed)
        for point in X[:3]:
            assert len(np.unique(res.labels[(X == point).all(axis=1)])) == 1
        np.testing.assert_array_equal(predict_graph(res.model(), X), res.labels)


def test_components_and_their_sizes():
    X = np.vstack([_points(100, 4), _points(60, 5) + 50.0, _points(40, 6) - 50.0])
    G = kgraph.knn_graph(X, 10)
    assert G.info.n_components == 3 and G.info.component_sizes == (100, 60, 40)
    assert len(np.unique(G.components[G.node_of[:100]])) == 1
    from scipy.sparse.csgraph import connected_components

    count, comp = connected_components(G.affinity, directed=False)
    assert count == 3
    np.testing.assert_array_equal(comp, G.components)


@pytest.mark.parametrize("bad, message", [
    (np.ones((3, 4)), "must be square"),
    (np.array([[1.0, np.nan], [np.nan, 1.0]]), "row 0, column 1: nan is not a finite"),
    (np.array([[1.0, -1.0], [-1.0, 1.0]]), "row 0, column 1: negative weight"),
    (np.array([[1.0, 2.0], [1.0, 1.0]]), "not symmetric: row 0, column 1 holds 2"),
    (np.array([[1.0, 0.0], [0.0, 0.0]]), "row 1 has no positive weight"),
])
def test_a_given_affinity_is_checked(bad, message):
    with pytest.raises(DataError, match=message) as err:
        kgraph.check_affinity(sparse.csr_matrix(bad))
    assert "\n" not in str(err.value)


def test_a_given_affinity_is_symmetrized_within_tolerance():
    A = np.array([[1.0, 0.5], [0.5 + 1e-14, 1.0]])
    S = kgraph.check_affinity(A)
    assert S.format == "csr" and S.dtype == np.float64
    assert S[0, 1] == S[1, 0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_neighbour_lists_symmetrize_to_the_dense_sum(seed):
    """(B + Bᵀ)/2 from the lists against the dense sum written entry by entry: the same
    values bit for bit (B_ij + B_ji, halved), indices sorted and int32, the edges of weight
    zero both ways left out (node z's), and an edge of the smallest subnormal weight one way
    kept as SciPy's sum keeps it (stored; halved, it rounds to zero)."""
    rng = np.random.default_rng(seed)
    m, k = 40, 6
    idx = np.array([np.r_[i, rng.permutation(np.delete(np.arange(m), i))[:k - 1]]
                    for i in range(m)], dtype=np.int64)
    j = int(idx[5, 1])
    if 5 in idx[j]:                                 # j does not list 5
        idx[j, idx[j] == 5] = min(set(range(m)) - set(idx[j]) - {5})
    z = min(set(range(m)) - {5, j})
    B = rng.uniform(0.1, 2.0, (m, k))
    B[z] = 0.0
    B[idx == z] = 0.0                               # node z: every edge of weight zero
    B[5, 1] = 5e-324
    D = np.zeros((m, m))
    for i in range(m):
        for t in range(k):
            D[i, idx[i, t]] += B[i, t]
    stored = (D + D.T) != 0.0
    A = kgraph.symmetrize(B.copy(), idx.copy(), m)
    assert A.format == "csr" and A.has_sorted_indices and A.indices.dtype == np.int32
    for i in range(m):
        row = A.indices[A.indptr[i]:A.indptr[i + 1]]
        np.testing.assert_array_equal(row, np.flatnonzero(stored[i]))
        np.testing.assert_array_equal(A.data[A.indptr[i]:A.indptr[i + 1]],
                                      (D[i, row] + D[row, i]) * 0.5)
    assert not stored[z].any() and A.indptr[z + 1] == A.indptr[z]
    assert stored[5, j] and A[5, j] == 0.0


def test_the_symmetrized_sum_is_the_same_on_any_threads():
    """The sort and the merge split the rows among threads: 1, 2 and 3 threads give the same
    arrays, and the same as SciPy's (B + Bᵀ)/2, on 5,000 nodes (rows of a thread's share
    taking other threads' columns)."""
    from scipy import sparse

    rng = np.random.default_rng(4)
    m, k = 5000, 9
    idx = np.array([np.r_[i, rng.choice(np.delete(np.arange(m), i), k - 1, replace=False)]
                    for i in range(m)], dtype=np.int64)
    B = rng.uniform(0.1, 2.0, (m, k))
    rows = np.repeat(np.arange(m), k)
    D = sparse.csr_matrix((B.ravel(), (rows, idx.ravel())), shape=(m, m))
    S = ((D + D.T) * 0.5).tocsr()
    S.sort_indices()
    graphs = [kgraph.symmetrize(B.copy(), idx.copy(), m, n_threads=t) for t in (1, 2, 3)]
    for A in graphs:
        np.testing.assert_array_equal(A.indptr, S.indptr)
        np.testing.assert_array_equal(A.indices, S.indices)
        np.testing.assert_array_equal(A.data, graphs[0].data)
        np.testing.assert_allclose(A.data, S.data, rtol=1e-15)


# -- the engine against the dense kernel -----------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distances_and_objective_against_the_dense_kernel(seed):
    A = _random_affinity(50, seed)
    kernel = GraphKernel(A)
    K, d = _dense_kernel(kernel)
    assert np.linalg.eigvalsh(K).min() > -1e-12          # the shift makes K PSD
    labels = np.random.default_rng(seed).integers(0, 4, 50).astype(np.int32)
    sums = cluster_sums(kernel, labels, 4)
    np.testing.assert_allclose(np.maximum(distances(kernel, labels, sums), 0.0),
                               dense_distances(K, labels, d, 4), rtol=1e-10, atol=1e-14)
    J = sum(d[i] * dense_distances(K, labels, d, 4)[i, labels[i]] for i in range(50))
    assert sums.objective(kernel) == pytest.approx(J, rel=1e-10)
    # J = ncut + σ(n − k) + Σ A_ii/d_i − k, and ncut is Σ cut/vol
    ncut = _dense_ncut(A, labels)
    assert sums.ncut() == pytest.approx(ncut, rel=1e-10)
    const = kernel.sigma * (50 - 4) + np.sum(A.diagonal() / d) - 4
    assert sums.objective(kernel) == pytest.approx(ncut + const, rel=1e-10)
    assert normalized_cut(A, labels + 7) == pytest.approx(ncut, rel=1e-10)


def test_lloyd_is_the_precomputed_kernel_k_means():
    """Lloyd on the graph equals the estimator's exact Lloyd on the dense K with weights d."""
    A = _random_affinity(80, 3, density=0.1)
    kernel = GraphKernel(A, sigma=0.05)       # small shift: Lloyd moves points
    K, d = _dense_kernel(kernel)
    start = np.random.default_rng(4).integers(0, 3, 80).astype(np.int32)
    labels, sums, n_iter, ok = lloyd(kernel, start, 3)
    with pytest.warns(KKMeansWarning, match="not positive semidefinite"):  # σ below the bound
        est = KernelKMeans(3, kernel="precomputed", init=start, n_init=1, refine="none",
                           algorithm="lloyd").fit(K, sample_weight=d)
    assert ok
    np.testing.assert_array_equal(labels, est.labels_)
    assert sums.objective(kernel) == pytest.approx(est.inertia_, rel=1e-9)


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_lloyd_never_raises_the_objective_with_the_shift(seed):
    A = _random_affinity(120, seed, density=0.05, loops=False)
    kernel = GraphKernel(A)
    start = np.random.default_rng(seed).integers(0, 5, 120).astype(np.int32)
    trace = [cluster_sums(kernel, start, 5).objective(kernel)]
    lloyd(kernel, start, 5, trace=trace)
    assert np.all(np.diff(trace) <= 1e-12 * abs(trace[0]))


def test_incremental_sums_equal_a_full_pass():
    A = _random_affinity(200, 8)
    kernel = GraphKernel(A)
    rng = np.random.default_rng(8)
    old = rng.integers(0, 4, 200).astype(np.int32)
    new = old.copy()
    moved = rng.choice(200, 30, replace=False)
    new[moved] = rng.integers(0, 4, 30)
    sums, exact = update_sums(kernel, old, new, cluster_sums(kernel, old, 4), 4)
    full = cluster_sums(kernel, new, 4)
    assert not exact
    np.testing.assert_allclose(sums.links, full.links, rtol=1e-12)
    np.testing.assert_allclose(sums.vol, full.vol, rtol=1e-12)


def test_hartigan_reaches_a_single_move_optimum_that_is_a_lloyd_fixed_point():
    A = _random_affinity(60, 9, density=0.12)
    kernel = GraphKernel(A)
    K, d = _dense_kernel(kernel)
    start = np.random.default_rng(9).integers(0, 3, 60).astype(np.int32)
    run = refine(kernel, start, 3)
    assert run.converged and run.sums.ncut() < _dense_ncut(A, start)
    best = _dense_ncut(A, run.labels)
    for i in range(60):
        for b in range(3):
            trial = run.labels.copy()
            trial[i] = b
            if b != run.labels[i] and np.any(trial == run.labels[i]):
                assert _dense_ncut(A, trial) >= best - 1e-12
    D = dense_distances(K, run.labels, d, 3)
    assert np.all(D[np.arange(60), run.labels] <= D.min(axis=1) + 1e-12)


def test_hartigan_gain_is_the_exact_change_of_ncut():
    A = _random_affinity(70, 10)
    kernel = GraphKernel(A, sigma=0.0)
    labels = np.random.default_rng(10).integers(0, 4, 70).astype(np.int32)
    sums = cluster_sums(kernel, labels, 4)
    new, new_sums, moves, gain = hartigan(kernel, labels, sums, 4)
    assert moves > 0
    assert sums.ncut() - new_sums.ncut() == pytest.approx(gain, rel=1e-9)
    assert new_sums.ncut() == pytest.approx(_dense_ncut(A, new), rel=1e-10)


def test_results_do_not_depend_on_the_thread_count():
    X = np.vstack([_points(1500, 11), _points(1500, 12) + 3.0])
    runs = [fit_graph(X, 4, start="multilevel", n_init=1, random_state=3, n_threads=t)
            for t in (1, 2)]
    np.testing.assert_array_equal(runs[0].labels, runs[1].labels)
    assert runs[0].objective == runs[1].objective
    np.testing.assert_array_equal(runs[0].sums.links, runs[1].sums.links)


# -- starts ----------------------------------------------------------------------------------
def test_components_are_the_start_when_there_are_enough():
    X = np.vstack([_points(100, 13), _points(80, 14) + 40.0, _points(20, 15) - 40.0,
                   _points(12, 16) + [40.0, -40.0]])
    res = fit_graph(X, 4, n_neighbors=10, random_state=0)
    assert res.start == "components" and res.ncut == 0.0 and res.graph.info.bridges == 0
    assert len(np.unique(res.labels)) == 4
    # fewer clusters than components, on a given affinity (no coordinates to join them by):
    # the components grouped by volume, ncut 0; the two small ones join the lightest cluster
    # (said by a warning: the graph does not say which components belong together)
    A = kgraph.knn_graph(X, 10).affinity
    for k in (3, 2):
        with pytest.warns(KKMeansWarning, match=r"^the graph has 4 connected components, "
                          r"more than the clusters asked for: .* grouped by volume \(a given "
                          r"graph has no points to join them by\)$"):
            res = fit_graph(affinity=A, n_clusters=k, random_state=0)
        assert res.start == "components" and res.ncut == 0.0
        assert len(np.unique(res.labels)) == k
    # (the graph's nodes are in tree order: compare through the points' own graph)
    G = kgraph.knn_graph(X, 10)
    with pytest.warns(KKMeansWarning, match="grouped by volume"):
        res = fit_graph(affinity=G.affinity, n_clusters=3, random_state=0)
    labels = res.labels[G.node_of]
    assert len(np.unique(labels[:100])) == 1 and len(np.unique(labels[100:180])) == 1
    # of points: the components joined by bridges, every component kept whole
    for k in (3, 2):
        res = fit_graph(X, k, n_neighbors=10, random_state=0)
        assert res.graph.info.bridges == 3 and res.graph.info.n_components == 4
        assert res.start_kinds[0] == "components" and len(np.unique(res.labels)) == k
        for part in (slice(0, 100), slice(100, 180), slice(180, 200), slice(200, 212)):
            assert len(np.unique(res.labels[part])) == 1


def test_contraction_keeps_the_normalized_cut():
    A = _random_affinity(150, 17, density=0.05)
    levels, coarse = graph_starts.coarsen(A, np.random.default_rng(0), 20)
    assert levels and coarse.shape[0] < 150
    labels = np.random.default_rng(1).integers(0, 3, coarse.shape[0]).astype(np.int32)
    fine = labels
    for _, coarse_of in reversed(levels):
        fine = fine[coarse_of]
    assert normalized_cut(coarse, labels) == pytest.approx(normalized_cut(A, fine), rel=1e-12)
    np.testing.assert_array_equal(coarse.toarray(), coarse.toarray().T)


@pytest.mark.parametrize("idx, why", [
    ([[0, 1, 1], [1, 0, 2], [2, 1, 0]], "listed twice"),
    ([[0, 3], [1, 0], [2, 1]], "outside 0..2"),
    ([[0, -1], [1, 0], [2, 1]], "outside 0..2"),
])
@pytest.mark.parametrize("threads", [1, 2])
def test_lists_the_merge_cannot_take_are_an_internal_error(idx, why, threads):
    """The merge needs every row's numbers distinct and within the nodes (every neighbour
    search gives them so): anything else is the program's error, not the data's, on any
    threads."""
    idx = np.array(idx, dtype=np.int64)
    with pytest.raises(RuntimeError, match=why):
        kgraph.symmetrize(np.ones(idx.shape), idx, 3, n_threads=threads)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_contraction_is_the_dense_product(seed):
    """PᵀAP against the dense product, for a matching and for any map of the nodes (groups
    of up to 9): indices sorted, exactly symmetric, no stored zeros; a graph of connectivity
    weights (sums of halves: exact in any order) bit for bit; an asymmetric pattern refused."""
    A = _random_affinity(120, 30 + seed, density=0.08)
    rng = np.random.default_rng(seed)
    for coarse_of in (rng.integers(0, 40, 120), np.repeat(rng.permutation(60), 2)):
        m = int(coarse_of.max()) + 1
        P = np.zeros((120, m))
        P[np.arange(120), coarse_of] = 1.0
        want = P.T @ A.toarray() @ P
        for B, exact in ((A, False), (A.astype(bool).astype(np.float64) * 0.5, True)):
            got = graph_starts.contract(sparse.csr_matrix(B), coarse_of, m)
            assert got.has_sorted_indices and np.all(got.data != 0.0)
            for i in range(m):
                assert np.all(np.diff(got.indices[got.indptr[i]:got.indptr[i + 1]]) > 0)
            dense = got.toarray()
            np.testing.assert_array_equal(dense, dense.T)
            wanted = P.T @ B.toarray() @ P if exact else want
            if exact:
                np.testing.assert_array_equal(dense, wanted)
            else:
                np.testing.assert_allclose(dense, wanted, rtol=1e-13, atol=0)
    one_way = sparse.csr_matrix(np.triu(A.toarray()))
    with pytest.raises(RuntimeError, match="not symmetric"):
        graph_starts.contract(one_way, np.arange(120) // 2, 60)


@pytest.mark.parametrize("shuffled", [False, True])
def test_heavy_edge_matching_pairs_at_most_two_neighbours(shuffled):
    """Pairs of linked nodes or single nodes, numbered by their first member whatever the
    order of the visits (the coarse graph keeps the fine one's order)."""
    A = _random_affinity(100, 18, density=0.05)
    kernel = GraphKernel(A)
    coarse_of = np.empty(100, dtype=np.int64)
    order = np.random.default_rng(3).permutation(100) if shuffled else np.arange(100)
    m = _graph.heavy_edge_matching(kernel.indptr, kernel.indices, kernel.data, kernel.degrees,
                                   order.astype(np.int64), coarse_of)
    sizes = np.bincount(coarse_of)
    assert sizes.size == m and sizes.max() <= 2 and sizes.sum() == 100
    for c in np.flatnonzero(sizes == 2):
        i, j = np.flatnonzero(coarse_of == c)
        assert A[i, j] > 0
    _, first = np.unique(coarse_of, return_index=True)
    assert np.all(np.diff(first) > 0)


@pytest.mark.parametrize("start", ["multilevel", "spectral"])
def test_starts_reach_the_normalized_cut_of_spectral_clustering(start):
    """On three touching blobs (one component) the fit's ncut is at most that of
    scikit-learn's SpectralClustering on the same graph, up to a hair. The graph fit alone
    (``whiten=False``): the default's Gaussian steps after it trade cut for likelihood on
    overlapping blobs (its mixture may cut up to 10 times as much)."""
    from sklearn.cluster import SpectralClustering
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(600, centers=[[0, 0], [3, 0], [0, 3]], random_state=0)
    res = fit_graph(X, 3, start=start, random_state=0, whiten=False)
    sc = SpectralClustering(3, affinity="precomputed", random_state=0).fit(
        res.graph.affinity)
    assert res.ncut <= normalized_cut(res.graph.affinity, sc.labels_) + 1e-9


@pytest.mark.parametrize("data", ["moons", "digits"])
def test_the_default_start_reaches_the_normalized_cut_of_spectral_clustering(data):
    """The default fit (only k) against SpectralClustering(affinity='precomputed') on the same
    default graph, one component each (the start must split it): a cut no higher."""
    from sklearn import datasets
    from sklearn.cluster import SpectralClustering

    if data == "moons":
        X, _ = datasets.make_moons(1500, noise=0.1, random_state=0)
        k = 2
    else:
        X, k = datasets.load_digits().data, 10
    res = fit_graph(X, k, random_state=0, n_threads=1)
    assert res.graph.info.n_components == 1 and res.start != "components"
    sc = SpectralClustering(k, affinity="precomputed", random_state=0).fit(
        res.graph.affinity)
    assert res.ncut <= normalized_cut(res.graph.affinity, sc.labels_) + 1e-9


# -- prediction ------------------------------------------------------------------------------
@pytest.mark.parametrize("weighting", ["connectivity", "self-tuning"])
def test_predict_of_the_training_points_is_labels(weighting):
    from sklearn.datasets import make_moons

    X, _ = make_moons(400, noise=0.12, random_state=1)
    res = fit_graph(X, 3, weighting=weighting, random_state=0)
    np.testing.assert_array_equal(predict_graph(res.model(), X), res.labels)


def test_a_training_row_gives_the_training_distances():
    """With its own training row, a training point's out-of-sample distances are its fit
    distances, whose argmin is its label (the extension is consistent with the fit)."""
    X = _points(300, 19)
    res = fit_graph(X, 3, random_state=0)
    model, kernel = res.model(), res.kernel
    D = new_point_distances(model, res.graph.affinity, np.arange(300))
    np.testing.assert_allclose(D, distances(kernel, res.node_labels, res.sums), rtol=1e-12)
    np.testing.assert_array_equal(np.argmin(D, axis=1), res.node_labels)


@pytest.mark.parametrize("weighting", ["connectivity", "self-tuning"])
def test_a_training_point_is_given_its_own_neighbour_list_for_its_distances(weighting):
    """transform's row of a training point J is J's list in the fit's graph, B_J: J (its
    self-loop) and its n_neighbors − 1 nearest other points (scikit-learn's
    ``NearestNeighbors``), with the training weights (it listed n_neighbors − 2 others, so
    every training point's degree fell short); a new point lists n_neighbors − 1 nodes, as
    before. The model keeps no reverse lists, so the row is not A_J = (B_J + B_Jᵀ)/2, but
    where both are the same (two points, each the other's neighbour) the distances are the
    fit's to the bit."""
    from sklearn.datasets import make_blobs
    from sklearn.neighbors import NearestNeighbors

    X, _ = make_blobs(300, centers=3, random_state=1)
    res = fit_graph(X, 3, weighting=weighting, random_state=0, whiten=False)
    model, nn = res.model(), res.graph.info.n_neighbors
    rows, match = new_point_rows(model, X, node_rows=True)
    np.testing.assert_array_equal(match, res.graph.node_of)
    want = NearestNeighbors(n_neighbors=nn).fit(model.nodes).kneighbors(X)[1]
    for i in range(300):
        assert set(rows[i].indices) == set(want[i]), i
    np.testing.assert_array_equal(rows.getnnz(axis=1), nn)
    if weighting == "connectivity":
        np.testing.assert_array_equal(rows.data, 1.0)
    else:   # the training weights of J's own list: exp(−‖x_J − x_j‖²/(σ_J σ_j))
        J = np.repeat(match, nn)
        d2 = ((model.nodes[J] - model.nodes[rows.indices]) ** 2).sum(axis=1)
        np.testing.assert_allclose(
            rows.data, np.exp(-d2 / (model.scales[J] * model.scales[rows.indices])),
            rtol=1e-12)
    new = X[:50] + 0.01
    assert np.all(new_point_rows(model, new, node_rows=True)[0].getnnz(axis=1) == nn - 1)
    # one neighbour, the point itself: its list is the point alone (a row of two tied each
    # point with its neighbour's cluster, and the least distance was not the label)
    six = np.array([[0, 0], [1, 0], [5, 5], [6, 5], [20, 20], [21, 20]], dtype=float)
    one = fit_graph(six, 6, n_neighbors=1, weighting=weighting, random_state=0, whiten=False)
    rows, match = new_point_rows(one.model(), six, node_rows=True)
    np.testing.assert_array_equal(rows.getnnz(axis=1), 1)
    np.testing.assert_array_equal(rows.indices, match)
    got = new_point_distances(one.model(), rows, match)
    np.testing.assert_allclose(got, distances(one.kernel, one.node_labels, one.sums)
                               [one.graph.node_of], rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(np.argmin(got, axis=1), one.labels)
    # two points, each the other's neighbour: B = A, and the distances are the fit's
    for two in (np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[0.0, 0.0], [1.0, 3.0]])):
        fit = fit_graph(two, 2, weighting=weighting, random_state=0)
        model = fit.model()
        got = new_point_distances(model, *new_point_rows(model, two, node_rows=True))
        want = distances(fit.kernel, fit.node_labels, fit.sums)[fit.graph.node_of]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
        est = KernelKMeans(2, weighting=weighting, random_state=0).fit(two)
        np.testing.assert_allclose(est.transform(two), want, rtol=1e-12, atol=1e-15)
        assert est.inertia_ == pytest.approx(want[np.arange(2), fit.labels].sum(), abs=1e-15)


def test_new_points_get_the_cluster_of_their_neighbourhood():
    from sklearn.datasets import make_moons

    X, y = make_moons(600, noise=0.05, random_state=2)
    res = fit_graph(X, 2, random_state=0)
    Xn, yn = make_moons(200, noise=0.05, random_state=3)
    pred = predict_graph(res.model(), Xn)
    mapping = {c: np.bincount(y[res.labels == c]).argmax() for c in range(2)}
    assert np.mean(np.vectorize(mapping.get)(pred) == yn) > 0.99
    rows, match = new_point_rows(res.model(), Xn)
    # the default graph: 20 other neighbours (n_neighbors 21), so 20 training nodes a row
    assert res.graph.info.n_neighbors == 21
    assert np.all(match == -1) and rows.shape == (200, 600) and rows.nnz == 200 * 20


# -- silhouette ------------------------------------------------------------------------------
def _dense_silhouette(kernel, labels):
    """scikit-learn's silhouette on the dense feature-space distances √(K_ii + K_jj − 2K_ij)."""
    from sklearn.metrics import silhouette_score

    K, _ = _dense_kernel(kernel)
    v = np.diag(K)
    D = np.sqrt(np.maximum(v[:, None] + v[None, :] - 2.0 * K, 0.0))
    np.fill_diagonal(D, 0.0)
    return silhouette_score(D, labels, metric="precomputed")


@pytest.mark.parametrize("weighting", ["connectivity", "self-tuning"])
@pytest.mark.parametrize("exact", [512, 0])
def test_graph_silhouette_against_dense(monkeypatch, weighting, exact):
    from kkmeans_cli.measures import graph_silhouette as module

    monkeypatch.setattr(module, "EXACT_DISTINCT", exact)   # 0: Chebyshev interpolation
    X = _points(250, 20)
    kernel = GraphKernel(kgraph.knn_graph(X, 8, weighting).affinity)
    labels = np.random.default_rng(20).integers(0, 3, 250)
    labels[:1] = 3                                    # a singleton cluster
    assert graph_silhouette(kernel, labels, 4) == pytest.approx(
        _dense_silhouette(kernel, labels), rel=1e-9, abs=1e-12)


def test_lloyd_passes_do_not_depend_on_the_thread_count():
    """Lloyd with a small shift (points move) on 4000 points: one thread and two threads give
    the same labels, sums and objective trace, bit for bit."""
    A = kgraph.knn_graph(np.vstack([_points(2000, 21), _points(2000, 22) + 2.0]), 10).affinity
    start = np.random.default_rng(21).integers(0, 3, 4000).astype(np.int32)
    out = []
    for threads in (1, 2):
        kernel = GraphKernel(A, sigma=0.02, n_threads=threads)
        assert kernel.n_threads == threads
        trace = []
        labels, sums, n_iter, _ = lloyd(kernel, start, 3, trace=trace)
        out.append((labels, sums.links, sums.vol, trace, n_iter))
    assert out[0][4] > 1
    for a, b in zip(out[0], out[1]):
        np.testing.assert_array_equal(a, b)


def test_refining_spectral_clusterings_labels_never_raises_their_cut():
    """Guaranteed whatever the optimum: from scikit-learn's labels the iterations only lower
    the normalized cut (every Lloyd pass with the PSD shift and every Hartigan move)."""
    from sklearn.cluster import SpectralClustering
    from sklearn.datasets import make_moons

    X, _ = make_moons(500, noise=0.12, random_state=4)
    A = kgraph.knn_graph(X, 10).affinity
    sc = SpectralClustering(2, affinity="precomputed", random_state=0).fit(A)
    run = refine(GraphKernel(A), sc.labels_.astype(np.int32), 2)
    assert run.sums.ncut() <= normalized_cut(A, sc.labels_) + 1e-12
    assert np.all(np.diff(run.objective_trace) <= 1e-12)


def test_the_model_round_trips_through_a_file(tmp_path):
    X = _points(300, 23)
    res = fit_graph(X, 3, weighting="self-tuning", random_state=0)
    model = res.model()
    path = tmp_path / "graph.npz"
    np.savez(path, **model.arrays())
    with np.load(path, allow_pickle=False) as f:
        arrays = {name: f[name] for name in f.files}

    def fail(problem):
        raise ValueError(problem)

    back = type(model).from_file(model.meta(), arrays, fail)
    Xn = _points(50, 24)
    np.testing.assert_array_equal(predict_graph(back, Xn), predict_graph(model, Xn))
    np.testing.assert_array_equal(predict_graph(back, X), res.labels)
    bad = dict(arrays, graph_node_labels=arrays["graph_node_labels"] + 3)
    with pytest.raises(ValueError, match="must lie in 0 … 2"):
        type(model).from_file(model.meta(), bad, fail)
    with pytest.raises(ValueError, match="'graph_scales' .* is missing"):
        type(model).from_file(model.meta(), {k: v for k, v in arrays.items()
                                             if k != "graph_scales"}, fail)
    attrs = res.fitted_attributes()
    assert attrs["inertia_"] == pytest.approx(
        attrs["ncut_"] + res.kernel.sigma * (300 - 3) + np.sum(1.0 / res.kernel.degrees) - 3,
        rel=1e-12)


def test_graph_silhouette_without_shift_or_self_loops(monkeypatch):
    """K_ii = 0 for a node without self-loop when σ = 0: the roots at x = 0 are summed
    directly (Chebyshev path), as the dense reference gives."""
    from kkmeans_cli.measures import graph_silhouette as module

    monkeypatch.setattr(module, "EXACT_DISTINCT", 0)
    A = _random_affinity(80, 25, loops=True).tolil()
    A[0, 0] = 0.0
    A = kgraph.check_affinity(A.tocsr())
    kernel = GraphKernel(A, sigma=0.0)
    assert kernel.diag[0] == 0.0
    labels = np.random.default_rng(25).integers(0, 3, 80)
    assert graph_silhouette(kernel, labels, 3) == pytest.approx(
        _dense_silhouette(kernel, labels), rel=1e-9, abs=1e-12)


def test_points_must_be_finite():
    X = _points(20, 26)
    X[3, 1] = np.nan
    with pytest.raises(DataError, match="X row 3, column 1: nan is not a finite number"):
        kgraph.knn_graph(X, 5)


def test_points_whose_distances_overflow_are_refused_by_the_graph_itself():
    """One finite point at 10¹⁶⁰ squares past float64: the k-d tree found no neighbour for
    it (an IndexError); the graph refuses it as the estimator does, naming the row."""
    X = np.r_[_points(60, 29), [[1e160, 1e160]]]
    for call in (lambda: kgraph.knn_graph(X, 5), lambda: fit_graph(X, 3, random_state=0)):
        with pytest.raises(ValueRangeError, match=r"X row 60, column 0: the value 1e\+160 is "
                                                  r"too large for floating point: 4·‖x‖² must"):
            call()
    fit_graph(np.r_[_points(60, 29), [[1e150, 1e150]]], 3, random_state=0)   # within range
    # the value as given, with its sign
    with pytest.raises(ValueRangeError, match=r"X row 60, column 1: the value -3e\+155 is"):
        kgraph.knn_graph(np.r_[_points(60, 29), [[0.0, -3e155]]], 5)


def test_new_points_are_checked():
    res = fit_graph(_points(50, 27), 2, random_state=0)
    with pytest.raises(DataError, match="X has 3 columns, the model was fitted on 2"):
        predict_graph(res.model(), _points(4, 28, 3))
    with pytest.raises(DataError, match="X row 0, column 0: inf"):
        predict_graph(res.model(), np.array([[np.inf, 0.0]]))


# -- Lanczos that does not converge ------------------------------------------------------------
def _no_convergence(monkeypatch):
    """SciPy's eigsh raising ArpackNoConvergence, as it may on a large neighbour graph."""
    import scipy.sparse.linalg
    from scipy.sparse.linalg import ArpackNoConvergence

    def fails(*args, **kwargs):
        raise ArpackNoConvergence("No convergence (3001 iterations, 0/4 eigenvectors "
                                  "converged)", np.empty(0), np.empty((0, 0)))

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", fails)


def test_lanczos_failing_up_to_the_dense_limit_gives_the_dense_answer(monkeypatch):
    """Up to DENSE_FALLBACK_MAX nodes a Lanczos that fails is replaced by a dense eigh: the
    eigengaps are those of the normalized Laplacian built densely, the spectral start runs."""
    from kkmeans_cli.measures.graph_sweep import sweep_graph

    X = _points(700, 3)
    A = kgraph.knn_graph(X, 10).affinity
    d = np.asarray(A.sum(axis=1)).ravel()
    L = np.eye(700) - A.toarray() / np.sqrt(d[:, None] * d[None, :])
    lam = np.linalg.eigvalsh(L)
    _no_convergence(monkeypatch)
    records = sweep_graph(affinity=A, ks=[2, 3, 4], eigengap=True, random_state=0)
    np.testing.assert_allclose([r.eigengap for r in records],
                               [lam[k] - lam[k - 1] for k in (2, 3, 4)], atol=1e-9)
    est = KernelKMeans(3, n_neighbors=10, init="spectral", random_state=0).fit(X)
    assert np.unique(est.labels_).size == 3


def test_lanczos_failing_above_the_dense_limit_is_one_clear_error(monkeypatch):
    """Above DENSE_FALLBACK_MAX nodes (made 600 here; the real limit through the command line
    in test_graph_api.py) every path that needs eigenvectors ends in a DataError of one line
    naming what needed them and the way out, or does without them: the eigengap asked for is
    refused, 'auto' warns and records None, the spectral start is refused, the default starts
    of a coarse graph fall back to the multilevel start."""
    from kkmeans_cli.measures.graph_sweep import sweep_graph
    from kkmeans_cli.model.sweep import graph_sweep

    X = _points(700, 3)
    _no_convergence(monkeypatch)
    monkeypatch.setattr(graph_starts, "DENSE_FALLBACK_MAX", 600)
    with pytest.raises(graph_starts.EigenvectorsFailed) as caught:
        graph_sweep(X, [2, 3], metric="eigengap", n_neighbors=10, random_state=0)
    message = str(caught.value)
    assert isinstance(caught.value, DataError) and "\n" not in message
    assert message.startswith("the eigengap: Lanczos did not converge to the 4 largest "
                              "eigenvalues of the graph's normalized affinity")
    assert "(700 nodes, more than the 600 the dense solver takes; ARPACK error -1: No " \
           "convergence" in message
    assert message.endswith("; choose k by another metric than the eigengap")
    A = kgraph.knn_graph(X, 10).affinity
    with pytest.warns(KKMeansWarning, match="the eigengap is not computed$"):
        records = sweep_graph(affinity=A, ks=[2, 3], eigengap="auto", random_state=0)
    assert [r.eigengap for r in records] == [None, None]
    assert not any(r.eigengap_choice for r in records)
    ref = sweep_graph(affinity=A, ks=[2, 3], eigengap=False, random_state=0)
    assert [r.ncut for r in records] == [r.ncut for r in ref]
    with pytest.raises(graph_starts.EigenvectorsFailed,
                       match=r"^the spectral start: Lanczos did not converge .*; the default "
                             r"starts \(init='k-means\+\+'\) need no eigenvectors of a graph "
                             r"this large$"):
        KernelKMeans(2, n_neighbors=10, init="spectral", random_state=0).fit(X)
    # the default starts need the eigenvectors of a graph above the dense limit: they give
    # way to the multilevel start, whose coarsest graph (≤ 200 nodes) is solved densely
    est = KernelKMeans(2, n_neighbors=10, random_state=0).fit(X)
    kinds = est.fit_stats_["start_kinds"]       # then the default's steps, where kept
    assert kinds[0] == "multilevel" and set(kinds[1:]) <= {"gaussian", "mixture"}
    assert np.unique(est.labels_).size == 2
