"""Quality measures against scikit-learn and brute-force references."""
import numpy as np
import pytest
from sklearn.metrics import (calinski_harabasz_score, davies_bouldin_score,
                             silhouette_samples as sk_silhouette_samples, silhouette_score)

from kkmeans_cli.measures import metrics
from kkmeans_cli.kernels.functions import Kernel

from helpers import sklearn_blobs
from reference import kernel_matrix as ref_kernel


def feature_distances(K):
    """δ_ij = sqrt(max(K_ii + K_jj − 2 K_ij, 0)), the matrix scikit-learn is given."""
    K = np.asarray(K, dtype=np.float64)
    d = np.diag(K)
    D = np.sqrt(np.maximum(d[:, None] + d[None, :] - 2 * K, 0.0))
    np.fill_diagonal(D, 0.0)
    return D


KERNELS = [("rbf", 0.1), ("linear", None), ("poly", 0.05), ("laplacian", 0.1)]


def labels_with_singletons(y):
    lab = y.copy()
    lab[0] = lab.max() + 1  # two singleton clusters
    lab[1] = lab.max() + 1
    return lab


@pytest.mark.parametrize("name,gamma", KERNELS)
@pytest.mark.parametrize("case", ["blobs", "singletons", "k2", "gaps"])
def test_exact_silhouette_matches_sklearn(name, gamma, case):
    X, y = sklearn_blobs(240, k=4)
    if case == "singletons":
        y = labels_with_singletons(y)
    elif case == "k2":
        y = (y % 2)
    elif case == "gaps":  # arbitrary label values
        y = y * 7 - 3
    K = ref_kernel(X, X, name, gamma=gamma)
    D = feature_distances(K)
    mean, s = metrics.silhouette(K, y, n_threads=2, return_samples=True)
    ref = sk_silhouette_samples(D, y, metric="precomputed")
    np.testing.assert_allclose(s, ref, rtol=0, atol=1e-9)
    assert mean == pytest.approx(silhouette_score(D, y, metric="precomputed"), abs=1e-9)
    if case == "singletons":
        assert s[0] == 0.0 and s[1] == 0.0


def test_exact_silhouette_float32():
    # K stored in float32 carries ~6e-8 relative rounding per entry; for well-separated points
    # δ² = K_ii + K_jj − 2K_ij loses little, so the mean silhouette agrees to ~1e-5 (the sums
    # themselves are accumulated in double).
    X, y = sklearn_blobs(240, k=4)
    K = ref_kernel(X, X, "rbf", gamma=0.1)
    K32 = K.astype(np.float32)
    ref = silhouette_score(feature_distances(K), y, metric="precomputed")
    ref32 = silhouette_score(feature_distances(K32), y, metric="precomputed")
    got = metrics.silhouette(K32, y)
    assert got == pytest.approx(ref32, abs=1e-9)  # same arithmetic on the same float32 K
    assert got == pytest.approx(ref, abs=1e-4)


def test_exact_silhouette_thread_independent():
    X, y = sklearn_blobs(1001, k=5)
    K = ref_kernel(X, X, "rbf", gamma=0.2)
    s1 = metrics.silhouette_samples(K, y, n_threads=1)
    s2 = metrics.silhouette_samples(K, y, n_threads=2)
    s3 = metrics.silhouette_samples(K, y, n_threads=3)
    assert np.array_equal(s1, s2) and np.array_equal(s1, s3)


def test_silhouette_blocks_equals_in_memory():
    X, y = sklearn_blobs(300, k=4)
    kern = Kernel("rbf", gamma=0.1)
    K = kern.matrix(X)
    np.testing.assert_allclose(metrics.silhouette_blocks(X, y, kern),
                               metrics.silhouette_samples(K, y), rtol=0, atol=1e-12)


def test_silhouette_rejects_one_cluster():
    K = np.eye(5)
    with pytest.raises(ValueError, match="number of clusters"):
        metrics.silhouette(K, np.zeros(5))


def test_calinski_harabasz_davies_bouldin_match_sklearn_linear():
    for seed in range(3):
        X, y = sklearn_blobs(240, k=4, seed=seed)
        K = X @ X.T
        assert metrics.calinski_harabasz(K, y) == pytest.approx(
            calinski_harabasz_score(X, y), rel=1e-9)
        assert metrics.davies_bouldin(K, y) == pytest.approx(
            davies_bouldin_score(X, y), rel=1e-9)


def test_weighted_ch_db_equal_repeated_points():
    # Integer weights are the same as repeating the points.
    X, y = sklearn_blobs(90)
    w = np.arange(90) % 3 + 1.0
    K = X @ X.T
    Xr, yr = np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int))
    Kr = Xr @ Xr.T
    assert metrics.calinski_harabasz(K, y, sample_weight=w) == pytest.approx(
        metrics.calinski_harabasz(Kr, yr), rel=1e-9)
    assert metrics.davies_bouldin(K, y, sample_weight=w) == pytest.approx(
        metrics.davies_bouldin(Kr, yr), rel=1e-9)


def simplified_reference(K, labels, w=None):
    """Brute force: build every centre distance from its definition, then the formula."""
    K = np.asarray(K, float)
    n = len(labels)
    w = np.ones(n) if w is None else w
    clusters = np.unique(labels)
    d = np.empty((n, clusters.size))
    for ci, c in enumerate(clusters):
        m = labels == c
        Wc = w[m].sum()
        for i in range(n):
            d[i, ci] = max(K[i, i] - 2 * (w[m] * K[i, m]).sum() / Wc
                           + (np.outer(w[m], w[m]) * K[np.ix_(m, m)]).sum() / Wc ** 2, 0.0)
    s = np.zeros(n)
    for i in range(n):
        own = np.searchsorted(clusters, labels[i])
        if (labels == labels[i]).sum() == 1:
            continue
        a = np.sqrt(d[i, own])
        b = min(np.sqrt(d[i, c]) for c in range(clusters.size) if c != own)
        if max(a, b) > 0:
            s[i] = (b - a) / max(a, b)
    return s.mean()


@pytest.mark.parametrize("name,gamma", KERNELS)
def test_simplified_silhouette_brute_force(name, gamma):
    X, y = sklearn_blobs(80, k=4)
    y = labels_with_singletons(y)
    K = ref_kernel(X, X, name, gamma=gamma)
    assert metrics.simplified_silhouette(K, y) == pytest.approx(
        simplified_reference(K, y), abs=1e-9)
    w = np.linspace(0.5, 2.0, 80)
    assert metrics.simplified_silhouette(K, y, sample_weight=w) == pytest.approx(
        simplified_reference(K, y, w), abs=1e-9)


def test_simplified_silhouette_linear_equals_sklearn_style_centres():
    # For the linear kernel the centres are the cluster means in input space.
    X, y = sklearn_blobs(120, k=4)
    cents = np.array([X[y == c].mean(0) for c in range(4)])
    d = np.linalg.norm(X[:, None] - cents[None], axis=2)
    a = d[np.arange(120), y]
    d[np.arange(120), y] = np.inf
    b = d.min(1)
    assert metrics.simplified_silhouette(X @ X.T, y) == pytest.approx(
        np.mean((b - a) / np.maximum(a, b)), abs=1e-9)


def test_stratified_sample_every_cluster_seeded():
    rng = np.random.default_rng(0)
    y = np.concatenate([np.zeros(5000), np.ones(3), np.full(1, 2), np.full(2000, 3)])
    y = rng.permutation(y)
    s = metrics.stratified_sample(y, 100, random_state=7)
    assert np.array_equal(s, metrics.stratified_sample(y, 100, random_state=7))
    assert not np.array_equal(s, metrics.stratified_sample(y, 100, random_state=8))
    assert len(s) == 100 and len(np.unique(s)) == 100
    counts = np.bincount(y[s].astype(int), minlength=4)
    assert np.all(counts >= 1) and counts[1] >= 2
    assert counts[0] > counts[3] > counts[1]  # proportional beyond the minimum


def test_sampled_silhouette_is_sklearn_on_the_sample():
    X, y = sklearn_blobs(600, k=4)
    K = ref_kernel(X, X, "rbf", gamma=0.1)
    res = metrics.sampled_silhouette(y, 150, K=K, random_state=3)
    assert res.n_used == 150 and not res.exact
    s = res.indices
    ref = silhouette_score(feature_distances(K)[np.ix_(s, s)], y[s], metric="precomputed")
    assert res.score == pytest.approx(ref, abs=1e-9)
    # From the data, the same sample gives the same value without the n×n matrix.
    res_x = metrics.sampled_silhouette(y, 150, X=X, kernel=Kernel("rbf", gamma=0.1),
                                       random_state=3)
    assert np.array_equal(res_x.indices, s) and res_x.score == pytest.approx(res.score,
                                                                             abs=1e-12)


def test_silhouette_score_rule():
    X, y = sklearn_blobs(300, k=4)
    K = ref_kernel(X, X, "rbf", gamma=0.1)
    exact = metrics.silhouette_score(y, K=K, max_exact=300)
    assert exact.exact and exact.n_used == 300
    assert exact.score == pytest.approx(metrics.silhouette(K, y), abs=0)
    sampled = metrics.silhouette_score(y, K=K, max_exact=299, sample_size=100)
    assert not sampled.exact and sampled.n_used == 100


def test_scores_dict():
    X, y = sklearn_blobs(240, k=4)
    K = X @ X.T
    out = metrics.scores(K, y)
    assert list(out) == ["silhouette", "silhouette_n_used", "simplified_silhouette",
                         "calinski_harabasz", "davies_bouldin"]
    assert out["calinski_harabasz"] == pytest.approx(calinski_harabasz_score(X, y), rel=1e-9)
    with pytest.raises(ValueError, match="unknown metric"):
        metrics.scores(K, y, metrics=("nope",))


def test_fused_pass_equals_separate():
    X, y = sklearn_blobs(257, k=4)
    K = ref_kernel(X, X, "rbf", gamma=0.1)
    w = np.linspace(0.5, 1.5, 257)
    s, fs = metrics.silhouette_and_sums(K, y, sample_weight=w, n_threads=2)
    assert np.array_equal(s, metrics.silhouette_samples(K, y, n_threads=1))
    ref = metrics.feature_sums(K, y, sample_weight=w)
    np.testing.assert_allclose(fs.F, ref.F, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fs.C, ref.C, rtol=1e-12)


@pytest.mark.parametrize("name,gamma", KERNELS)
@pytest.mark.parametrize("block_bytes", [None, 1])
def test_silhouettes_of_many_labellings_in_one_pass(name, gamma, block_bytes, monkeypatch):
    """A sweep's measures: every labelling (k = 2, singletons, labels with gaps, k = 7) gets
    the silhouette scikit-learn gives and the sums a pass of its own gives, also when the
    labellings are taken one group at a time (block_bytes=1: groups of one)."""
    from kkmeans_cli import memory

    if block_bytes is not None:
        monkeypatch.setattr(memory, "BLOCK_BYTES", block_bytes)
    X, y = sklearn_blobs(240, k=4)
    K = Kernel(name, gamma).matrix(X)
    D = feature_distances(K)
    rng = np.random.default_rng(0)
    labelings = [y % 2, labels_with_singletons(y), y * 3 + 1, rng.integers(0, 7, len(y))]
    w = rng.uniform(0.5, 2.0, len(y))
    found = metrics.silhouettes_and_sums(K, labelings, sample_weight=w)
    assert len(found) == len(labelings)
    for labels, (samples, fs) in zip(labelings, found):
        np.testing.assert_allclose(samples, sk_silhouette_samples(D, labels, metric="precomputed"),
                                   rtol=1e-9, atol=1e-12)
        alone = metrics.feature_sums(K, labels, w)
        np.testing.assert_allclose(fs.F, alone.F, rtol=1e-12)
        np.testing.assert_allclose(fs.C, alone.C, rtol=1e-12)
    many = metrics.scores_many(K, labelings, sample_weight=w)
    for labels, m in zip(labelings, many):
        assert m == pytest.approx(metrics.scores(K, labels, sample_weight=w), rel=1e-12)


def _exact_sums(X, labels, w, k):
    """F, C and W of the linear kernel in exact rational arithmetic (small integer data)."""
    from fractions import Fraction

    n = len(X)
    K = [[sum(Fraction(int(a)) * int(b) for a, b in zip(X[i], X[j])) for j in range(n)]
         for i in range(n)]
    wf = [Fraction(x) for x in w]
    F = [[sum(wf[j] * K[i][j] for j in range(n) if labels[j] == c) for i in range(n)]
         for c in range(k)]
    C = [[sum(wf[i] * F[b][i] for i in range(n) if labels[i] == a) for b in range(k)]
         for a in range(k)]
    W = [sum(wf[i] for i in range(n) if labels[i] == c) for c in range(k)]
    return F, C, W


@pytest.mark.parametrize("case", ["one cluster", "n clusters"])
def test_feature_sums_any_number_of_clusters(case):
    """feature_sums is defined for 1 ≤ k ≤ n (one cluster: F = K w, C = wᵀ K w), exactly as
    rational arithmetic gives them; the measures built on it still need 2 ≤ k ≤ n − 1."""
    rng = np.random.default_rng(3)
    X = rng.integers(-20, 21, size=(9, 3)).astype(np.float64)
    w = rng.integers(1, 5, size=9).astype(np.float64)
    labels = np.zeros(9, int) if case == "one cluster" else np.arange(9)[::-1]
    K = X @ X.T  # integers: exact in float64
    fs = metrics.feature_sums(K, labels, sample_weight=w)
    codes = np.unique(labels, return_inverse=True)[1]
    k = int(codes.max()) + 1
    F, C, W = _exact_sums(X, codes, w, k)
    assert fs.k == k and np.array_equal(fs.labels, codes)
    np.testing.assert_array_equal(fs.F, np.array(F, dtype=np.float64))
    np.testing.assert_array_equal(fs.C, np.array(C, dtype=np.float64))
    np.testing.assert_array_equal(fs.W, np.array(W, dtype=np.float64))
    np.testing.assert_array_equal(fs.sizes, np.bincount(codes, minlength=k))
    for measure in (metrics.simplified_silhouette, metrics.calinski_harabasz,
                    metrics.davies_bouldin):
        with pytest.raises(ValueError, match=f"the number of clusters is {k}; valid values "
                                             "are 2 to n_samples - 1"):
            measure(K, labels)
        with pytest.raises(ValueError, match=f"the number of clusters is {k}"):
            measure(sums=fs)


@pytest.mark.parametrize("case", ["one cluster", "every point its own cluster"])
def test_nystroem_feature_sums_any_number_of_clusters(case):
    """The feature-space sums of Nyström features (K = Φ Φᵀ, never formed) equal the exact sums
    of the same Gram matrix for 1 ≤ k ≤ n, as metrics.feature_sums does."""
    from kkmeans_cli.measures import features as feature_measures

    rng = np.random.default_rng(5)
    Phi = rng.integers(-20, 21, size=(9, 3)).astype(np.float64)  # integers: exact products
    w = rng.integers(1, 5, size=9).astype(np.float64)
    labels = np.zeros(9, int) if case == "one cluster" else np.arange(9)[::-1]
    fs = feature_measures.feature_sums(Phi, labels, sample_weight=w)
    codes = np.unique(labels, return_inverse=True)[1]
    k = int(codes.max()) + 1
    F, C, W = _exact_sums(Phi, codes, w, k)
    assert fs.k == k and np.array_equal(fs.labels, codes)
    np.testing.assert_array_equal(fs.F, np.array(F, dtype=np.float64))
    np.testing.assert_array_equal(fs.C, np.array(C, dtype=np.float64))
    np.testing.assert_array_equal(fs.W, np.array(W, dtype=np.float64))
