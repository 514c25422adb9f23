"""The graph route's defaults (kernels/graph.py ``default_neighbors``, engine/graph_starts.py
``default_starts``, ``merge_to_k``) and the sweep over k with the eigengap
(measures/graph_sweep.py), each against a brute-force dense reference: the normalized cut
and the weighted kernel k-means objective of the n×n kernel (Dhillon, Guan & Kulis, KDD
2004), NumPy's dense ``eigh`` of the normalized Laplacian (von Luxburg 2007), and
``fit_graph`` itself."""
import warnings
from dataclasses import replace

import numpy as np
import pytest
from scipy import sparse

from helpers import three_rings
from kkmeans_cli.engine import graph_starts
from kkmeans_cli.engine.graph import GraphKernel, cluster_sums
from kkmeans_cli.kernels import graph as kgraph
from kkmeans_cli.errors import KKMeansWarning
from kkmeans_cli.kernels.graph_fit import fit_graph, predict_graph
from kkmeans_cli.measures.graph_silhouette import graph_silhouette
from kkmeans_cli.measures.graph_sweep import sweep_graph


def _moons(n, noise, seed):
    from sklearn.datasets import make_moons

    return make_moons(n, noise=noise, random_state=seed)


def _circles(n, noise, seed):
    from sklearn.datasets import make_circles

    return make_circles(n, factor=0.5, noise=noise, random_state=seed)


def _dense_ncut(A, labels):
    """Σ_c cut(c, V∖c)/vol(c) by the definition, on the dense matrix."""
    A = A.toarray() if sparse.issparse(A) else A
    return sum(A[np.ix_(labels == c, labels != c)].sum() / A[labels == c].sum()
               for c in np.unique(labels))


def _dense_objective(A, sigma, labels):
    """Weighted kernel k-means objective Σ_i d_i ‖φ(x_i) − m_c(i)‖² of K = σD⁻¹ + D⁻¹AD⁻¹,
    weights d, from the dense n×n kernel."""
    A = A.toarray()
    d = A.sum(1)
    K = sigma * np.diag(1.0 / d) + A / np.outer(d, d)
    J = 0.0
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        w = d[idx]
        Kc = K[np.ix_(idx, idx)]
        J += float(w @ np.diag(Kc) - (w @ Kc @ w) / w.sum())
    return J


# -- the default number of neighbours ---------------------------------------------------------
@pytest.mark.parametrize("n_nodes, k, expected", [
    (1500, 2, 21), (1500, 50, 21), (100, 2, 21), (60, 3, 20), (42, 2, 21), (21, 2, 10),
    (9, 3, 3), (6, 3, 2), (3, 3, 2), (2, 1, 2), (1, 1, 2), (5, 5, 2)])
def test_the_default_neighbours_rule(n_nodes, k, expected):
    # m = min(20, ⌊n_d/k⌋ − 1, n_d − 1), at least 1; n_neighbors counts the point: m + 1
    m = max(1, min(20, n_nodes // k - 1, n_nodes - 1))
    assert kgraph.default_neighbors(n_nodes, k) == m + 1 == expected


def test_the_default_rule_counts_distinct_rows():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(30, 2))
    X = np.repeat(base, 40, axis=0)          # 1200 rows, 30 distinct
    res = fit_graph(X, 3, random_state=0, whiten=False)     # the graph of X itself
    info = res.graph.info
    assert info.n_points == 1200 and info.n_nodes == 30
    assert info.n_neighbors == kgraph.default_neighbors(30, 3) == 10
    # every row of the graph lists the 10 nearest distinct points (itself included)
    ref = kgraph.knn_graph(base, 10)
    assert sorted(np.diff(ref.affinity.indptr)) == sorted(np.diff(res.graph.affinity.indptr))
    # copies share a label
    labels = res.labels.reshape(30, 40)
    assert np.all(labels == labels[:, :1])


def test_a_given_n_neighbors_is_used_as_given_and_checked():
    X, _ = _moons(200, 0.05, 0)
    assert fit_graph(X, 2, n_neighbors=7, random_state=0).graph.info.n_neighbors == 7
    assert fit_graph(X, 2, random_state=0).graph.info.n_neighbors == 21
    for bad in (0, -3, 2.5, True, "10"):
        with pytest.raises(ValueError, match="n_neighbors must be"):
            fit_graph(X, 2, n_neighbors=bad)


def test_the_default_graph_has_20_other_neighbours_and_is_scikit_learns():
    from sklearn.neighbors import kneighbors_graph

    X, _ = _moons(300, 0.05, 1)
    G = kgraph.knn_graph(X, None, n_clusters=2)
    C = kneighbors_graph(X, 21, include_self=True)
    ref = (0.5 * (C + C.T)).toarray()
    A = G.affinity.toarray()[np.ix_(G.node_of, G.node_of)]
    np.testing.assert_array_equal(A, ref)


# -- the objective, the sums and the merge -----------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_ncut_equals_the_kernel_objective_up_to_the_constant(seed):
    X, _ = _moons(160, 0.1, seed)
    res = fit_graph(X, 3, random_state=seed)
    A = res.graph.affinity
    labels = res.node_labels
    n, k = A.shape[0], 3
    ncut = _dense_ncut(A, labels)
    J = _dense_objective(A, res.kernel.sigma, labels)
    const = res.kernel.sigma * (n - k) + np.sum(A.diagonal() / res.kernel.degrees) - k
    assert res.ncut == pytest.approx(ncut, rel=1e-12, abs=1e-12)
    assert res.objective == pytest.approx(J, rel=1e-10)
    assert J - ncut == pytest.approx(const, rel=1e-10)


def test_sparse_cluster_links_equal_dense_outer_sums():
    X, _ = _circles(200, 0.08, 3)
    G = kgraph.knn_graph(X, None, n_clusters=2)
    kernel = GraphKernel(G.affinity)
    labels = np.random.default_rng(0).integers(0, 7, kernel.n).astype(np.int32)
    M, vol = graph_starts.cluster_links(kernel, labels, 7)
    A = G.affinity.toarray()
    dense = np.array([[A[np.ix_(labels == a, labels == b)].sum() for b in range(7)]
                      for a in range(7)])
    np.testing.assert_allclose(M, dense, rtol=1e-13)
    np.testing.assert_allclose(vol, [A[labels == a].sum() for a in range(7)], rtol=1e-13)
    sums = cluster_sums(kernel, labels, 7)
    np.testing.assert_allclose(sums.links, np.diag(dense), rtol=1e-13)


def test_every_merge_raises_ncut_by_the_computed_increase():
    X, _ = _circles(240, 0.08, 4)
    G = kgraph.knn_graph(X, None, n_clusters=2)
    kernel = GraphKernel(G.affinity)
    rng = np.random.default_rng(1)
    _, V = graph_starts.top_eigenvectors(kernel, 12, rng)
    pieces = graph_starts.njw_labels(V, 12, rng)
    assert np.unique(pieces).size == 12
    before = _dense_ncut(G.affinity, pieces)
    for k in range(11, 1, -1):
        merged, increases = graph_starts.merge_to_k(kernel, pieces, k)
        assert len(increases) == 12 - k and np.unique(merged).size == k
        assert _dense_ncut(G.affinity, merged) == pytest.approx(before + sum(increases),
                                                                abs=1e-10)
        # each merge is the cheapest of all pairs at its step (brute force over the pairs)
        if k == 11:
            best = min(_dense_ncut(G.affinity, np.where(pieces == b, a, pieces)) - before
                       for a in range(12) for b in range(a + 1, 12))
            assert increases[0] == pytest.approx(best, abs=1e-10)


def test_components_merged_are_unions_of_pieces():
    X, _ = _moons(200, 0.1, 5)
    G = kgraph.knn_graph(X, None, n_clusters=2)
    kernel = GraphKernel(G.affinity)
    pieces = np.arange(kernel.n) % 9
    merged, _ = graph_starts.merge_to_k(kernel, pieces, 3)
    for p in range(9):                       # a piece is never split
        assert np.unique(merged[pieces == p]).size == 1


def test_kmeans_rows_ends_at_a_lloyd_fixed_point_with_k_clusters():
    rng = np.random.default_rng(2)
    Y = np.vstack([rng.normal(size=(50, 3)) + 6 * c for c in range(4)])
    labels = graph_starts.kmeans_rows(Y, 4, np.random.default_rng(0))
    assert np.unique(labels).size == 4
    C = np.array([Y[labels == c].mean(0) for c in range(4)])
    D = ((Y[:, None, :] - C[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(np.argmin(D, 1), labels)


# -- the default starts -----------------------------------------------------------------------
def test_default_starts_are_njw_and_the_merges_each_with_k_clusters():
    X, _ = _circles(600, 0.1, 0)
    G = kgraph.knn_graph(X, None, n_clusters=2, choice_k=2)
    assert G.info.n_components == 1
    starts = graph_starts.default_starts(GraphKernel(G.affinity), 2, np.random.default_rng(0))
    kinds = [kind for kind, _ in starts]
    assert kinds[0] == "spectral" and set(kinds) <= {"spectral", "merge-2k", "merge-3k",
                                                     "merge-4k", "merge-6k", "merge-10k"}
    for _, labels in starts:
        assert labels.dtype == np.int32 and np.unique(labels).size == 2
    # the fit tries them on its choice graph and refines the one that cuts it least
    choice = GraphKernel(G.choice)
    starts = graph_starts.default_starts(choice, 2, np.random.default_rng(0))
    cuts = [graph_starts.refine(choice, labels, 2).sums.ncut() for _, labels in starts]
    res = fit_graph(X, 2, random_state=0, whiten=False)
    assert res.start_kinds == (starts[int(np.argmin(cuts))][0],)      # the first on ties
    assert res.start == res.start_kinds[0] and res.start_ncuts == (res.ncut,)


def test_the_finer_merge_starts_are_taken_up_to_their_most_pieces():
    """The merge starts split into 2k pieces, and into 3k, 4k, 6k and 10k while that is at
    most ``PIECES_MAX`` (100): all five up to k = 10, 2k alone from k = 34, and never more
    pieces than the graph has nodes but two (the starts of a 25-node graph stop at 23
    eigenvectors); the eigenvectors asked for are those of the finest start made."""
    assert graph_starts.PIECES_MAX == 100
    assert graph_starts.oversegment_multiples(2) == (2, 3, 4, 6, 10)
    assert graph_starts.oversegment_multiples(3) == (2, 3, 4, 6, 10)
    assert graph_starts.oversegment_multiples(10) == (2, 3, 4, 6, 10)
    assert graph_starts.oversegment_multiples(11) == (2, 3, 4, 6)
    assert graph_starts.oversegment_multiples(16) == (2, 3, 4, 6)
    assert graph_starts.oversegment_multiples(17) == (2, 3, 4)
    assert graph_starts.oversegment_multiples(25) == (2, 3, 4)
    assert graph_starts.oversegment_multiples(26) == (2, 3)
    assert graph_starts.oversegment_multiples(33) == (2, 3)
    assert graph_starts.oversegment_multiples(34) == (2,)
    assert graph_starts.oversegment_multiples(100) == (2,)
    X, _ = _circles(600, 0.1, 0)
    G = kgraph.knn_graph(X, None, n_clusters=3, choice_k=3)
    kernel = GraphKernel(G.affinity)
    asked = []
    real = graph_starts.top_eigenvectors

    def spy(kernel, r, rng):
        asked.append(r)
        return real(kernel, r, rng)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(graph_starts, "top_eigenvectors", spy)
        for k in (3, 11, 40):
            graph_starts.default_starts(kernel, k, np.random.default_rng(0))
        sub = kgraph.knn_graph(X[:25], 4, n_clusters=3)
        graph_starts.default_starts(GraphKernel(sub.affinity), 3, np.random.default_rng(0))
    assert asked == [30, 66, 80, 23]


def test_three_rings_whose_coarser_starts_all_miss_the_lower_cut_are_found():
    """Three rings (.05, 1,500 points, draw 107 of ``benchmarks/bench_graph.py``): every
    start up to 6k pieces, refined, cut the choice graph above the rings' own cut (the fit
    scored ARI 0.67); the start of 10k pieces finds the rings, so the fit cuts its graph no
    more than the true labels do."""
    from sklearn.metrics import adjusted_rand_score

    X, y = three_rings(1500, 0.05, 107)
    res = fit_graph(X, 3, random_state=107)
    truth = _dense_ncut(res.graph.affinity.toarray(), y)
    assert res.ncut <= truth + 1e-9
    assert adjusted_rand_score(y, res.labels) > 0.95


def test_exactly_k_components_are_the_answer():
    X, y = _moons(400, 0.03, 0)
    res = fit_graph(X, 2, random_state=0)
    assert res.graph.info.n_components == 2
    assert res.start == "components" and res.ncut == 0.0 and res.start_kinds == ("components",)


@pytest.mark.parametrize("data, noise", [("circles", 0.1), ("moons", 0.1)])
def test_defaults_separate_noisy_shapes(data, noise):
    from sklearn.metrics import adjusted_rand_score
    from sklearn.preprocessing import StandardScaler

    X, y = (_circles if data == "circles" else _moons)(1500, noise, 0)
    res = fit_graph(StandardScaler().fit_transform(X), 2, random_state=0)
    assert adjusted_rand_score(y, res.labels) > 0.95


def test_large_graphs_start_on_their_coarsening(monkeypatch):
    X, _ = _circles(1200, 0.1, 2)
    monkeypatch.setattr(graph_starts, "SPECTRAL_DIRECT_MAX", 300)
    res = fit_graph(X, 2, random_state=0, whiten=False)    # the starts alone
    assert res.levels >= 2 and len(res.start_kinds) == 1
    direct = fit_graph(X, 2, random_state=0, start="multilevel", n_init=1)
    assert np.unique(res.labels).size == 2 and direct.ncut > 0


def test_default_fits_do_not_depend_on_the_thread_count(monkeypatch):
    from kkmeans_cli.engine import graph as egraph

    monkeypatch.setattr(egraph, "SERIAL_MAX_N", 100)     # the passes run in parallel
    X, _ = _circles(1500, 0.1, 1)
    runs = [fit_graph(X, 2, random_state=3, n_threads=t) for t in (1, 2)]
    np.testing.assert_array_equal(runs[0].labels, runs[1].labels)
    assert runs[0].objective == runs[1].objective
    assert runs[0].start_ncuts == runs[1].start_ncuts


# -- the sweep and the eigengap ---------------------------------------------------------------
def _dense_laplacian_eigenvalues(A):
    A = A.toarray()
    s = 1.0 / np.sqrt(A.sum(1))
    return np.linalg.eigvalsh(np.eye(A.shape[0]) - s[:, None] * A * s[None, :])


@pytest.mark.parametrize("n", [300, 900])             # dense eigh, then Lanczos
def test_laplacian_eigenvalues_against_dense_eigh(n):
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(n, centers=4, random_state=0)
    G = kgraph.knn_graph(X, None, n_clusters=4)
    lam = graph_starts.laplacian_eigenvalues(GraphKernel(G.affinity), 7,
                                             np.random.default_rng(0))
    ref = _dense_laplacian_eigenvalues(G.affinity)[:7]
    np.testing.assert_allclose(lam, ref, atol=1e-8)
    gaps = graph_starts.eigengaps(lam, [1, 2, 3, 4, 5, 6, 7])
    np.testing.assert_allclose(gaps[:6], np.diff(ref)[:6], atol=1e-8)
    assert gaps[6] is None


@pytest.mark.parametrize("r", [2, 3, 7])                # fewer, as many, more than components
def test_top_eigenvectors_of_a_disconnected_graph_against_dense_eigh(r):
    # Lanczos (above SPECTRAL_DENSE_MAX nodes) finds one vector of a repeated eigenvalue; the
    # eigenvalue 1 of N = D^-½AD^-½ is repeated once per component
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(1200, centers=[[0, 0], [30, 0], [0, 30]], random_state=0)
    G = kgraph.knn_graph(X, None, n_clusters=3)
    assert G.info.n_components == 3 and G.info.n_nodes > graph_starts.SPECTRAL_DENSE_MAX
    kernel = GraphKernel(G.affinity)
    lam, V = graph_starts.top_eigenvectors(kernel, r, np.random.default_rng(0))
    A = G.affinity.toarray()
    s = 1.0 / np.sqrt(A.sum(1))
    N = s[:, None] * A * s[None, :]
    ref = np.linalg.eigvalsh(N)[::-1][:r]
    np.testing.assert_allclose(lam, ref, atol=1e-8)
    np.testing.assert_allclose(V.T @ V, np.eye(r), atol=1e-8)
    np.testing.assert_allclose(N @ V, V * lam[None, :], atol=1e-6)
    lap = graph_starts.laplacian_eigenvalues(kernel, 6, np.random.default_rng(0))
    np.testing.assert_allclose(lap, _dense_laplacian_eigenvalues(G.affinity)[:6], atol=1e-8)


def test_spectral_starts_find_the_components_of_a_large_graph():
    from sklearn.metrics import adjusted_rand_score

    X, y = _moons(1000, 0.05, 1)
    fit = fit_graph(X, 2, start="spectral", random_state=0, n_threads=1)
    assert fit.graph.info.n_components == 2
    assert fit.graph.info.n_nodes > graph_starts.SPECTRAL_DENSE_MAX
    assert fit.ncut == 0.0
    assert adjusted_rand_score(y, fit.labels) == 1.0


def test_sweep_equals_fit_graph_for_each_k():
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(900, centers=4, cluster_std=1.5, random_state=1)
    ks = [2, 3, 4, 5, 6]
    records = sweep_graph(X, ks, random_state=7)
    assert [r.k for r in records] == ks
    lam = _dense_laplacian_eigenvalues(records[0].fit.graph.affinity)
    for r in records:
        # 900 > 21·6: the same graph; a sweep makes no whitened refit
        ref = fit_graph(X, r.k, random_state=7, n_threads=1, whiten=False)
        np.testing.assert_array_equal(r.labels, ref.labels)
        assert r.ncut == ref.ncut and r.objective == ref.objective
        assert r.silhouette == pytest.approx(graph_silhouette(ref.kernel, ref.node_labels,
                                                              r.k), rel=1e-12)
        assert r.eigengap == pytest.approx(lam[r.k] - lam[r.k - 1], abs=1e-8)
    gaps = [r.eigengap for r in records]
    assert [r.eigengap_choice for r in records] == [i == int(np.argmax(gaps))
                                                    for i in range(len(ks))]
    assert records[int(np.argmax(gaps))].k == 4
    # the cut ratios: the next k's ncut, and for the last k the ncut of a fit of k + 1
    ncut = {r.k: r.ncut for r in records} | {7: fit_graph(X, 7, random_state=7, n_threads=1,
                                                           whiten=False).ncut}
    for r in records:
        assert r.next_ncut == ncut[r.k + 1]
        assert r.cut_ratio == (ncut[r.k + 1] + 1e-6) / (ncut[r.k] + 1e-6)


def test_a_k_whose_next_k_is_not_swept_gets_its_cut_ratio_from_a_fit_of_its_own():
    X, _ = _moons(400, 0.05, 3)
    A = kgraph.knn_graph(X, 12).affinity
    calls = []
    records = sweep_graph(affinity=A, ks=[2, 5, 6], random_state=1,
                          progress=lambda *args: calls.append(args))
    # the fits of 3 and 7 (for the ratios of 2 and 6) are counted by the progress too
    assert [(done, total, None if r is None else r.k) for done, total, r in calls] == [
        (1, 5, 2), (2, 5, 5), (3, 5, 6), (4, 5, None), (5, 5, None)]
    refs = {k: fit_graph(affinity=A, n_clusters=k, random_state=1).ncut for k in (2, 3, 6, 7)}
    assert [r.next_ncut for r in records] == [refs[3], records[2].ncut, refs[7]]
    assert records[0].cut_ratio == (refs[3] + 1e-6) / (refs[2] + 1e-6)
    # a graph of k nodes has no k + 1 to cut: no ratio
    tiny = sweep_graph(affinity=A[:4, :4] + sparse.eye(4), ks=[3, 4], random_state=0)
    assert tiny[0].cut_ratio is not None and tiny[1].cut_ratio is None


@pytest.mark.parametrize("ks, ratios, chosen", [
    ([2, 3, 4, 5], [10.0, 1.5, 4.0, 1.2], 4),      # the largest k whose next cut triples
    ([2, 3, 4, 5], [2.0, 2.9, 1.1, 2.9], 3),       # none does: the largest ratio, ties smaller
    ([2, 3, 4], [None, float("nan"), 1.5], 4),      # None and NaN never win
    ([2, 3], [None, None], None),
    ([3, 4], [3.0, 2.999], 3),                     # 3 itself is a jump
])
def test_choose_by_cut_ratio(ks, ratios, chosen):
    from kkmeans_cli.measures.graph_sweep import choose_by_cut_ratio

    assert choose_by_cut_ratio(ks, ratios) == chosen


def test_sweep_on_a_given_affinity_and_k_one():
    X, _ = _moons(300, 0.05, 2)
    A = kgraph.knn_graph(X, 10).affinity
    assert kgraph.components(A)[0] == 2
    records = sweep_graph(affinity=A, ks=[1, 2, 3], random_state=0)
    assert records[0].silhouette is None and records[0].ncut == 0.0
    ref = fit_graph(affinity=A, n_clusters=3, random_state=0)
    np.testing.assert_array_equal(records[2].labels, ref.labels)
    assert sweep_graph(affinity=A, ks=[2], eigengap=False)[0].eigengap is None
    with pytest.raises(ValueError, match="affinity has 300 points, fewer than the 301"):
        sweep_graph(affinity=A, ks=[2, 301])


# -- more components than clusters ------------------------------------------------------------
def test_two_components_are_joined_by_their_closest_pair():
    rng = np.random.default_rng(4)
    X = np.vstack([rng.normal(size=(60, 2)), rng.normal(size=(50, 2)) + [30.0, 5.0]])
    G = kgraph.knn_graph(X, 8)
    assert G.info.n_components == 2 and kgraph.can_join(G)
    J = kgraph.join_components(G)
    assert J.info.bridges == 1 and J.info.n_components == 2
    added = (J.affinity - G.affinity).tocoo()
    i, j = sorted(zip(added.row, added.col))[0]
    D = np.linalg.norm(G.nodes[:, None, :] - G.nodes[None, :, :], axis=-1)
    across = G.components[:, None] != G.components[None, :]
    assert D[i, j] == D[across].min()
    # its weight ρ_i ρ_j / ‖x_i − x_j‖², ρ the longest edge at each end (brute force)
    A = G.affinity
    rho = [D[e, A.indices[A.indptr[e]:A.indptr[e + 1]]].max() for e in (i, j)]
    assert rho[0] < D[i, j] and rho[1] < D[i, j]
    np.testing.assert_allclose(added.data, rho[0] * rho[1] / D[i, j] ** 2, rtol=1e-12)
    from scipy.sparse.csgraph import connected_components

    assert connected_components(J.affinity, directed=False)[0] == 1


def test_bridges_of_nodes_without_other_neighbours_weigh_one():
    """With n_neighbors=1 a node's only neighbour is itself (no radius): its bridges take
    their own length for it, weight 1 (they weighed 0 and joined nothing: three blobs came
    out as 178, 1 and 1 points with ncut 0)."""
    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(20.0 * c, 1.0, (60, 2)) for c in range(3)])
    G = kgraph.knn_graph(X, 1)
    J = kgraph.join_components(G)
    added = (J.affinity - G.affinity).tocoo()
    assert J.info.bridges == G.info.n_components - 1 == 179
    assert added.nnz == 2 * 179 and np.all(added.data > 0.0) and np.all(added.data <= 1.0)
    assert connected_components(J.affinity, directed=False)[0] == 1
    fit = fit_graph(X, 3, n_neighbors=1, random_state=0, whiten=False)
    assert fit.ncut > 0.0 and min(np.bincount(fit.labels)) > 1


def test_far_groups_of_components_stay_together():
    """Three groups 1000 apart, each of 8 sub-blobs 60 from its centre (24 components):
    bridges of weight 1 made cutting a group's inner bridge as dear as the bridge between
    groups (ARI 0.70–0.88 on 8 of 16 such sets); weighted by ρ_i ρ_j/L² the long bridges are
    the cheap cuts, and each group is one cluster, in 2 and in 64 dimensions."""
    from sklearn.metrics import adjusted_rand_score

    for d in (2, 64):
        for seed in (0, 2):
            rng = np.random.default_rng(seed)
            centres = np.zeros((3, d))
            centres[:, :2] = 1000 * np.array([[0, 0], [1, 0], [0.5, 0.87]])
            parts = []
            for g in range(3):
                for _ in range(8):
                    off = rng.standard_normal(d)
                    parts.append(centres[g] + off * 60 / np.linalg.norm(off)
                                 + rng.standard_normal((40, d)))
            X, y = np.vstack(parts), np.repeat(np.arange(3), 320)
            fit = fit_graph(X, 3, random_state=0)
            assert fit.graph.info.bridges >= 2
            assert adjusted_rand_score(y, fit.labels) == 1.0


@pytest.mark.parametrize("n", [[60] * 5, [1100, 100, 100, 100, 100]])
def test_components_in_high_dimensions_are_joined_by_their_closest_pairs(n):
    """Above ``TREE_MAX_DIM`` the closest pairs come from scikit-learn's chunked search
    (``exact_nearest``: components of 60 and of 1,100 points): the bridges a brute-force
    Borůvka round finds, the same with 1 and 2 threads; merged by least ncut, each blob
    stays whole."""
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial.distance import cdist
    from sklearn.datasets import make_blobs

    dims = kgraph.TREE_MAX_DIM + 5
    centres = np.random.default_rng(n[0]).uniform(-30, 30, (5, dims))
    X, y = make_blobs(n, centers=centres, cluster_std=0.5, random_state=n[0])
    G = kgraph.knn_graph(X, 8)
    assert G.info.n_components == 5 and kgraph.can_join(G)
    joined = [kgraph.join_components(G, t) for t in (1, 2)]
    assert (joined[0].affinity != joined[1].affinity).nnz == 0
    J = joined[0]
    assert connected_components(J.affinity, directed=False)[0] == 1
    added = (J.affinity - G.affinity).tocoo()
    bridges = {(min(i, j), max(i, j)) for i, j in zip(added.row, added.col)}
    # brute force: every component's nearest pair to another (Borůvka's first round)
    D = cdist(G.nodes, G.nodes)
    first = set()
    for c in range(5):
        inside, outside = G.components == c, G.components != c
        sub = np.where(inside[:, None] & outside[None, :], D, np.inf)
        i, j = np.unravel_index(np.argmin(sub), sub.shape)
        first.add((min(i, j), max(i, j)))
    assert first <= bridges and len(bridges) == J.info.bridges == 4
    res = fit_graph(X, 3, random_state=0, whiten=False)
    assert res.graph.info.bridges == 4
    for blob in range(5):
        assert np.unique(res.labels[y == blob]).size == 1


def test_five_blobs_in_three_clusters_keep_every_blob_whole():
    from sklearn.datasets import make_blobs

    for seed in range(3):
        X, y = make_blobs(500, centers=5, cluster_std=0.3, random_state=seed)
        res = fit_graph(X, 3, random_state=seed, whiten=False)
        assert res.graph.info.n_components == 5 and res.graph.info.bridges >= 4
        for fit in (res, fit_graph(X, 3, random_state=seed)):     # and the default's
            assert np.unique(fit.labels).size == 3
            for c in range(5):
                assert np.unique(fit.labels[y == c]).size == 1
            np.testing.assert_array_equal(predict_graph(fit.model(), X), fit.labels)


def _three_rows_of_twelve_blobs(seed=0):
    """36 tight blobs (well apart: 36 components of a 10-neighbour graph) in three rows of
    12; the rows are the three clusters."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal([ox + 3.0 * b, oy], 0.2, size=(50, 2))
                   for ox, oy in [(0, 0), (0, 60), (60, 0)] for b in range(12)])
    return X, np.repeat([0, 1, 2], 12 * 50)


def test_many_components_are_joined_while_the_rounds_stay_cheap():
    """More than 32 components are joined as long as components × nodes stays within
    ``JOIN_MAX_WORK``: the default finds 36 blobs' three rows (grouped by volume they were
    mixed: ARI about 0)."""
    from sklearn.metrics import adjusted_rand_score

    X, y = _three_rows_of_twelve_blobs()
    G = kgraph.knn_graph(X, 10)
    assert G.info.n_components == 36 and kgraph.can_join(G)
    res = fit_graph(X, 3, n_neighbors=10, random_state=0, whiten=False)
    assert res.graph.info.bridges == 35 and res.ncut > 0.0
    # every component whole, the rows (3 apart) kept together: their bridges are the short
    # ones (with bridges of weight 1 the graph did not say which rows to cut: ARI 0.70-0.85)
    for blob in range(36):
        assert np.unique(res.labels[blob * 50:(blob + 1) * 50]).size == 1
    assert adjusted_rand_score(y, res.labels) == 1.0
    np.testing.assert_array_equal(predict_graph(res.model(), X), res.labels)
    for seed in range(3):       # the default (its own neighbour count, the Gaussian step)
        X, y = _three_rows_of_twelve_blobs(seed)
        assert adjusted_rand_score(y, fit_graph(X, 3, random_state=0).labels) == 1.0


def test_a_sweep_joins_the_components_once(monkeypatch):
    """A sweep over k below the components joins the graph once (it joined it again for
    every k and every k + 1: 110 s for 9 ks of 320 components in 64 dimensions, now 17 s),
    and every k's labels and cut are still those of ``fit_graph`` of that k; k at or above
    the components fits the graph unjoined, as ``fit_graph`` does."""
    X, _ = _three_rows_of_twelve_blobs()
    calls = []
    real_join = kgraph.join_components

    def counted(graph, n_threads=1):
        calls.append(graph.info.n_components)
        return real_join(graph, n_threads)

    monkeypatch.setattr(kgraph, "join_components", counted)
    import kkmeans_cli.measures.graph_sweep as graph_sweep_module

    monkeypatch.setattr(graph_sweep_module, "join_components", counted)
    records = sweep_graph(X, [2, 3, 4, 36, 37], n_neighbors=10, random_state=3)
    assert calls == [36]
    for r in records:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ref = fit_graph(X, r.k, n_neighbors=10, random_state=3, whiten=False)
        np.testing.assert_array_equal(r.labels, ref.labels)
        assert r.ncut == ref.ncut
        assert r.fit.graph.info.bridges == (35 if r.k < 36 else 0)


def test_a_cut_of_rounding_is_a_cut_of_nothing():
    """k − Σ links/vol of labels that cut no edge is 0 only to rounding (links and volumes
    summed in other orders: 4.4e-16 for self-tuning weights of the same points × 1e-250):
    ``cuts_nothing`` checks such a cut edge by edge, so ``whiten='auto'`` returns the
    components' answer at every scale; a true cut as small is not nothing."""
    from kkmeans_cli.kernels.graph_fit import NCUT_ROUNDING, cuts_nothing

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(60, 20)) + 40.0 * c for c in range(3)])
    fits = []
    for s in (1.0, 1e-5, 1e-250):      # three components in two clusters (and said)
        with pytest.warns(KKMeansWarning, match="grouped by volume"):
            fits.append(fit_graph(X * s, 2, n_neighbors=8, weighting="self-tuning",
                                  random_state=0))
    for fit in fits:
        assert fit.ncut <= NCUT_ROUNDING and cuts_nothing(fit)
        assert fit.whitening is None and fit.gaussian is None
        np.testing.assert_array_equal(fit.labels, fits[0].labels)
    # (× 1e-5 gave 4.4e-16 here; the rounding itself may differ elsewhere:) a cut of
    # nothing with an ncut of rounding is nothing
    assert cuts_nothing(replace(fits[0], ncut=4.4e-16))
    assert not cuts_nothing(replace(fits[0], ncut=2 * NCUT_ROUNDING))
    # one edge across two components, of weight 1e-12 of the degrees: ncut about 1e-12,
    # below NCUT_ROUNDING, and not nothing
    G = kgraph.knn_graph(X, 8)
    A = G.affinity.tolil()
    i, j = int(np.flatnonzero(G.components == 0)[0]), int(np.flatnonzero(G.components == 1)[0])
    A[i, j] = A[j, i] = 1e-12
    fit = fit_graph(affinity=A.tocsr(), n_clusters=3, random_state=0)
    assert 0.0 < fit.ncut <= NCUT_ROUNDING and not cuts_nothing(fit)


def test_a_refit_turned_down_says_nothing_of_its_graph(monkeypatch):
    """The warning of components grouped by volume is said of the first fit and of the
    whitened refit only where that refit is kept (or asked for: whiten=True): a refit
    turned down does not warn of a graph that made no labels. (Every fit pretends here
    to have grouped its components.)"""
    from kkmeans_cli.kernels import graph_fit

    monkeypatch.setattr(graph_fit, "grouped", lambda fit, k: True)

    def said(X, k, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit = fit_graph(X, k, random_state=0, **kwargs)
        assert all("grouped by volume" in str(w.message) for w in caught)
        return fit, len(caught)

    X, _ = _moons(600, 0.1, 0)
    fit, count = said(X, 2)
    assert fit.whitening["kept"] is False and count == 1        # the first fit's only
    assert said(X, 2, whiten=True)[1] == 2
    assert said(X, 2, whiten=False)[1] == 1
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(600, centers=3, cluster_std=2.0, random_state=12)
    fit, count = said(X, 3)
    assert fit.whitening["kept"] is True and count == 2         # and the refit kept


def test_components_beyond_the_join_work_are_grouped_and_said(monkeypatch):
    X, y = _three_rows_of_twelve_blobs()
    monkeypatch.setattr(kgraph, "JOIN_MAX_WORK", 35 * 1800)
    with pytest.warns(KKMeansWarning) as caught:
        res = fit_graph(X, 3, n_neighbors=10, random_state=0, whiten=False)
    assert [str(w.message) for w in caught] == [
        "the graph has 36 connected components, more than the clusters asked for: any "
        "grouping of them cuts nothing, and they are grouped by volume (too many to join by "
        "bridges: 36 × 1,800 nodes > 63,000; more neighbours (n_neighbors) join them)"]
    assert res.start == "components" and res.ncut == 0.0 and res.graph.info.bridges == 0
    for blob in range(36):      # every component whole, 12 in each cluster
        assert np.unique(res.labels[blob * 50:(blob + 1) * 50]).size == 1
    assert sorted(np.bincount(res.labels)) == [600, 600, 600]
    # above JOIN_MAX_NODES the bound named is the nodes'
    monkeypatch.setattr(kgraph, "JOIN_MAX_NODES", 1000)
    with pytest.warns(KKMeansWarning, match=r"\(bridges join the components of at most "
                      r"1,000 nodes; more neighbours \(n_neighbors\) join them\)$"):
        fit_graph(X, 3, n_neighbors=10, random_state=0, whiten=False)
    # one cluster, or as many as the components: nothing to say
    for k in (1, 36):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fit_graph(X, k, n_neighbors=10, random_state=0, whiten=False)


def test_self_tuning_graphs_are_not_joined():
    X = np.vstack([np.random.default_rng(s).normal(size=(40, 2)) + 20 * s for s in range(4)])
    with pytest.warns(KKMeansWarning, match=r"^the graph has 4 connected components, more "
                      r"than the clusters asked for: .* \(only a connectivity graph's "
                      r"components are joined by bridges\)$"):
        res = fit_graph(X, 2, n_neighbors=8, weighting="self-tuning", random_state=0)
    assert res.graph.info.bridges == 0 and res.start == "components" and res.ncut == 0.0


def test_lanczos_failing_on_a_large_coarse_graph_falls_back_to_multilevel(monkeypatch):
    from scipy.sparse.linalg import ArpackNoConvergence

    def fails(*args, **kwargs):
        raise ArpackNoConvergence("no convergence", np.empty(0), np.empty((0, 0)))

    import scipy.sparse.linalg

    X, _ = _circles(1200, 0.1, 2)
    # the coarse graph (300 … 600 nodes) goes to Lanczos, which fails, and is too large for
    # the dense solver; the multilevel start's coarsest graph (≤ 200 nodes) is solved densely
    monkeypatch.setattr(graph_starts, "SPECTRAL_DIRECT_MAX", 600)
    monkeypatch.setattr(graph_starts, "SPECTRAL_DENSE_MAX", 250)
    monkeypatch.setattr(graph_starts, "DENSE_FALLBACK_MAX", 100)
    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", fails)
    res = fit_graph(X, 2, random_state=0, whiten=False)    # the starts alone
    assert res.start_kinds == ("multilevel",) and np.unique(res.labels).size == 2
