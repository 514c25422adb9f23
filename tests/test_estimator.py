"""KernelKMeans against brute-force references, scikit-learn and its own invariants."""
import contextlib
import warnings

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs, make_circles, make_moons

import reference as ref
from helpers import sklearn_blobs
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine import lloyd as lloyd_module
from kkmeans_cli.errors import KKMeansWarning
from kkmeans_cli.kernels.functions import Kernel

KERNEL_PARAMS = {
    "rbf": dict(gamma=0.5),
    "linear": dict(),
    "poly": dict(gamma=0.2, degree=2, coef0=1.0),
    "sigmoid": dict(gamma=0.01, coef0=0.5),
    "laplacian": dict(gamma=0.3),
    "chi2": dict(gamma=0.5),
    "cosine": dict(),
}


def _expect_warning(match):
    """``pytest.warns(KKMeansWarning, match=match)``, or nothing expected when match is None."""
    if match is None:
        return contextlib.nullcontext()
    return pytest.warns(KKMeansWarning, match=match)


def _start(n, k, seed=1):
    return np.random.default_rng(seed).integers(0, k, size=n)


@pytest.mark.parametrize("kernel", sorted(KERNEL_PARAMS))
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_bruteforce_from_same_labels(kernel, weighted):
    X = sklearn_blobs(150, positive=kernel == "chi2")[0]
    n, k = len(X), 4
    w = np.random.default_rng(2).uniform(0.2, 3.0, n) if weighted else None
    params = KERNEL_PARAMS[kernel]
    K = ref.kernel_matrix(X, X, kernel, **params)
    start = _start(n, k)
    want_labels, want_inertia, want_iter = ref.kernel_kmeans(K, start, k, w)
    # On these blobs the sigmoid kernel is not PSD, and the poly kernel's iterations from
    # this start empty a cluster (refilled, as the reference does).
    with _expect_warning({"sigmoid": "not positive semidefinite",
                          "poly": "empty cluster"}.get(kernel)):
        est = KernelKMeans(k, kernel=kernel, init=start, tol=0, **params).fit(X, sample_weight=w)
    np.testing.assert_array_equal(est.labels_, want_labels)
    assert est.inertia_ == pytest.approx(want_inertia, rel=1e-9)
    assert est.n_iter_ == want_iter
    if kernel != "sigmoid":
        # Σ w d equals the closed form only when no distance is clamped at 0, i.e. for PSD
        # kernels; sigmoid is not PSD (non-PSD kernels are handled by --psd-repair).
        assert est.inertia_ == pytest.approx(ref.objective(K, want_labels, w), rel=1e-9)


def test_precomputed_matches_bruteforce_and_linear():
    X = sklearn_blobs(150)[0]
    K = X @ X.T
    lin = KernelKMeans(3, kernel="linear", random_state=5).fit(X)
    pre = KernelKMeans(3, kernel="precomputed", random_state=5).fit(K)
    np.testing.assert_array_equal(pre.labels_, lin.labels_)
    assert pre.inertia_ == pytest.approx(lin.inertia_, rel=1e-9)
    np.testing.assert_array_equal(pre.predict(K), pre.labels_)


def test_linear_kernel_equals_sklearn_kmeans_from_same_start():
    X = sklearn_blobs(400, d=5, k=5, seed=3)[0]
    k = 5
    start = _start(len(X), k, seed=4)
    centres = np.stack([X[start == c].mean(axis=0) for c in range(k)])
    km = KMeans(k, init=centres, n_init=1, tol=0, algorithm="lloyd").fit(X)
    est = KernelKMeans(k, kernel="linear", init=start, tol=0).fit(X)
    np.testing.assert_array_equal(est.labels_, km.labels_)
    assert est.inertia_ == pytest.approx(km.inertia_, rel=1e-9)


def test_linear_kernel_default_fit_no_worse_than_sklearn():
    X = sklearn_blobs(600, d=4, k=6, seed=7)[0]
    km = KMeans(6, n_init=10, random_state=0).fit(X)
    est = KernelKMeans(6, kernel="linear", random_state=0).fit(X)
    assert est.inertia_ <= km.inertia_ * (1 + 1e-9)


@pytest.mark.parametrize("name", ["moons", "circles", "blobs"])
def test_default_rbf_fit_reaches_best_of_20_bruteforce_restarts(name):
    if name == "moons":
        X, _ = make_moons(300, noise=0.06, random_state=0)
    elif name == "circles":
        X, _ = make_circles(300, noise=0.05, factor=0.5, random_state=0)
    else:
        X, _ = make_blobs(300, centers=4, random_state=0)
    k = 4 if name == "blobs" else 2
    est = KernelKMeans(k, kernel="rbf", random_state=0).fit(X)
    K = ref.kernel_matrix(X, X, "rbf", gamma=est.gamma_)
    rng = np.random.default_rng(0)
    best = min(ref.kernel_kmeans(K, ref.kmeans_plusplus_labels(K, k, rng), k)[1]
               for _ in range(20))
    assert est.inertia_ <= best * (1 + 1e-9)


def test_integer_weights_equal_repeated_rows():
    X = sklearn_blobs(90)[0]
    w = np.random.default_rng(0).integers(1, 4, size=len(X))
    start = _start(len(X), 3)
    weighted = KernelKMeans(3, kernel="rbf", gamma=0.3, init=start, tol=0).fit(X, sample_weight=w)
    repeated = KernelKMeans(3, kernel="rbf", gamma=0.3, init=np.repeat(start, w), tol=0).fit(np.repeat(X, w, 0))
    np.testing.assert_array_equal(np.repeat(weighted.labels_, w), repeated.labels_)
    assert weighted.inertia_ == pytest.approx(repeated.inertia_, rel=1e-9)
    np.testing.assert_allclose(weighted.inner_sums_, repeated.inner_sums_, rtol=1e-9)
    np.testing.assert_allclose(weighted.cluster_weights_, repeated.cluster_weights_)
    new = sklearn_blobs(40, seed=9)[0]
    np.testing.assert_array_equal(weighted.predict(new), repeated.predict(new))


def test_zero_weights_are_ignored_by_the_objective():
    X = sklearn_blobs(120)[0]
    w = np.ones(len(X))
    w[::5] = 0
    est = KernelKMeans(3, kernel="rbf", gamma=0.3, random_state=0).fit(X, sample_weight=w)
    K = ref.kernel_matrix(X, X, "rbf", gamma=0.3)
    assert est.inertia_ == pytest.approx(ref.objective(K, est.labels_, w), rel=1e-9)


@pytest.mark.parametrize("algorithm", ["lloyd", "elkan"])
def test_zero_weight_points_moving_is_convergence_not_a_stall(algorithm):
    # Points of weight 0 that change cluster move no centre: the objective stays the same
    # and the next pass confirms the fixed point. This fit used to stop as "stalled" with a
    # not-converged warning (the suite turns any warning into a failure).
    X = sklearn_blobs(120)[0]
    w = np.ones(len(X))
    w[::5] = 0
    est = KernelKMeans(3, kernel="rbf", gamma=0.3, random_state=0, algorithm=algorithm,
                       n_init=20).fit(X, sample_weight=w)
    assert est.converged_
    np.testing.assert_array_equal(est.predict(X), est.labels_)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_same_result_with_one_or_two_threads(dtype):
    X = sklearn_blobs(700, d=4, k=5)[0]
    a = KernelKMeans(5, kernel="rbf", random_state=3, dtype=dtype, n_threads=1).fit(X)
    b = KernelKMeans(5, kernel="rbf", random_state=3, dtype=dtype, n_threads=2).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.inertia_ == b.inertia_
    np.testing.assert_array_equal(a.inner_sums_, b.inner_sums_)


def test_same_seed_same_result_and_seed_matters():
    X = sklearn_blobs(300, k=6, seed=2)[0]
    a = KernelKMeans(6, kernel="rbf", random_state=11, n_init=1).fit(X)
    b = KernelKMeans(6, kernel="rbf", random_state=11, n_init=1).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.inertia_ == b.inertia_
    inertias = {KernelKMeans(6, kernel="rbf", random_state=s, n_init=1).fit(X).inertia_ for s in range(6)}
    assert len(inertias) > 1


def test_empty_cluster_is_relocated_with_a_warning():
    X = sklearn_blobs(120)[0]
    k = 4
    start = _start(len(X), 3)  # cluster 3 starts empty
    with pytest.warns(KKMeansWarning, match="empty cluster"):
        est = KernelKMeans(k, kernel="rbf", gamma=0.5, init=start, tol=0).fit(X)
    assert np.all(est.cluster_sizes_ > 0)
    K = ref.kernel_matrix(X, X, "rbf", gamma=0.5)
    want_labels, want_inertia, _ = ref.kernel_kmeans(K, start, k)
    np.testing.assert_array_equal(est.labels_, want_labels)
    assert est.inertia_ == pytest.approx(want_inertia, rel=1e-9)


def test_more_clusters_than_distinct_points_is_refused():
    # Clusters would have to share a point (Lloyd cycled between coinciding centres); as many
    # clusters as distinct points is the exact partition.
    from kkmeans_cli.errors import KKMeansError, TooFewDistinctPointsError

    X = np.repeat(np.array([[0.0, 0.0], [1.0, 1.0]]), 10, axis=0)
    with pytest.raises(TooFewDistinctPointsError, match="2 distinct points.*3 clusters") as e:
        KernelKMeans(3, kernel="rbf", gamma=1.0, random_state=0).fit(X)
    assert isinstance(e.value, ValueError) and isinstance(e.value, KKMeansError)
    assert (e.value.n_distinct, e.value.n_clusters) == (2, 3)
    est = KernelKMeans(2, kernel="rbf", gamma=1.0, random_state=0).fit(X)
    assert np.all(est.cluster_sizes_ == 10) and est.converged_
    assert est.inertia_ == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_array_equal(est.predict(X), est.labels_)


@pytest.mark.parametrize("kernel", sorted(KERNEL_PARAMS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_predict_on_training_data_returns_labels(kernel, dtype):
    X = sklearn_blobs(400, d=5, k=5, seed=4, positive=kernel == "chi2")[0]
    with _expect_warning("not positive semidefinite" if kernel == "sigmoid" else None):
        est = KernelKMeans(5, kernel=kernel, dtype=dtype, random_state=0,
                           **KERNEL_PARAMS[kernel]).fit(X)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    D = est.transform(X)
    np.testing.assert_array_equal(np.argmin(D, axis=1), est.labels_)
    assert est.inertia_ == pytest.approx(D[np.arange(len(X)), est.labels_].sum(), rel=1e-12)


def test_predict_new_points_matches_bruteforce_distances():
    X = sklearn_blobs(200, seed=5)[0]
    new = sklearn_blobs(50, seed=6)[0]
    w = np.random.default_rng(1).uniform(0.5, 2, len(X))
    est = KernelKMeans(3, kernel="rbf", gamma=0.2, random_state=0).fit(X, sample_weight=w)
    Kx = ref.kernel_matrix(new, X, "rbf", gamma=0.2)
    D = np.empty((len(new), 3))
    for c in range(3):
        m = est.labels_ == c
        Wc = w[m].sum()
        g = w[m] @ ref.kernel_matrix(X[m], X[m], "rbf", gamma=0.2) @ w[m]
        D[:, c] = 1.0 - 2 * Kx[:, m] @ w[m] / Wc + g / Wc ** 2
    np.testing.assert_allclose(est.transform(new), D, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(est.predict(new), np.argmin(D, axis=1))


def test_predict_does_not_use_the_training_kernel_matrix(monkeypatch):
    X = sklearn_blobs(200)[0]
    est = KernelKMeans(3, kernel="rbf", random_state=0).fit(X)
    monkeypatch.setattr(Kernel, "matrix", lambda *a, **k: pytest.fail("K(X_fit, X_fit) built"))
    est.predict(X[:10])


def test_float32_matches_float64():
    X, _ = make_moons(400, noise=0.06, random_state=1)
    a = KernelKMeans(2, kernel="rbf", gamma=20.0, random_state=0).fit(X)
    b = KernelKMeans(2, kernel="rbf", gamma=20.0, random_state=0, dtype=np.float32).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert b.inertia_ == pytest.approx(a.inertia_, rel=1e-5)


def test_incremental_and_full_updates_agree(monkeypatch):
    X = sklearn_blobs(500, k=6, seed=8)[0]
    start = _start(len(X), 6)
    monkeypatch.setattr(lloyd_module, "FULL_PASS_FRACTION", 0.0)  # always full passes
    full = KernelKMeans(6, kernel="rbf", gamma=0.3, init=start, tol=0).fit(X)
    monkeypatch.setattr(lloyd_module, "FULL_PASS_FRACTION", 2.0)  # always incremental
    incr = KernelKMeans(6, kernel="rbf", gamma=0.3, init=start, tol=0).fit(X)
    np.testing.assert_array_equal(full.labels_, incr.labels_)
    assert full.inertia_ == pytest.approx(incr.inertia_, rel=1e-12)
    assert full.n_iter_ == incr.n_iter_


def test_tol_stops_early_and_state_stays_consistent():
    X = sklearn_blobs(600, d=2, k=8, seed=1)[0]
    loose = KernelKMeans(8, kernel="rbf", gamma=0.1, random_state=0, n_init=1, tol=1e-1).fit(X)
    exact = KernelKMeans(8, kernel="rbf", gamma=0.1, random_state=0, n_init=1, tol=0).fit(X)
    assert loose.n_iter_ <= exact.n_iter_
    np.testing.assert_array_equal(loose.predict(X), loose.labels_)
    assert exact.converged_


def test_k_equal_one_and_k_equal_n():
    X = sklearn_blobs(30)[0]
    one = KernelKMeans(1, kernel="rbf", gamma=0.5).fit(X)
    K = ref.kernel_matrix(X, X, "rbf", gamma=0.5)
    assert one.inertia_ == pytest.approx(ref.objective(K, np.zeros(30, int)), rel=1e-12)
    every = KernelKMeans(30, kernel="rbf", gamma=0.5, random_state=0).fit(X)
    assert sorted(every.labels_) == list(range(30))
    assert every.inertia_ == pytest.approx(0.0, abs=1e-12)


def test_median_gamma_is_half_inverse_median_squared_distance():
    X = sklearn_blobs(60)[0]
    est = KernelKMeans(2, kernel="rbf").fit(X)
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)[np.triu_indices(60, 1)]
    assert est.gamma_ == pytest.approx(1 / (2 * np.median(d2)), rel=1e-12)
    scale = KernelKMeans(2, kernel="rbf", gamma="scale").fit(X)
    assert scale.gamma_ == pytest.approx(1 / (X.shape[1] * X.var()), rel=1e-12)


def test_identical_points_fall_back_to_gamma_one_with_warning():
    X = np.ones((20, 3))
    with pytest.warns(KKMeansWarning, match="gamma"):
        est = KernelKMeans(1, kernel="rbf", random_state=0).fit(X)
    assert est.gamma_ == 1.0
    assert np.isfinite(est.inertia_)


def test_fit_accepts_a_shared_kernel_matrix():
    X = sklearn_blobs(200)[0]
    base = KernelKMeans(3, kernel="rbf", random_state=0)
    K = base.kernel_matrix(X)
    a = KernelKMeans(3, kernel="rbf", random_state=0).fit(X, kernel_matrix=K)
    b = KernelKMeans(3, kernel="rbf", random_state=0).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.inertia_ == b.inertia_


@pytest.mark.parametrize("params, message", [
    (dict(n_clusters=0), "n_clusters"),
    (dict(n_clusters=2.5), "n_clusters"),
    (dict(kernel="gaussian"), "kernel"),
    (dict(gamma=0.0), "gamma"),
    (dict(gamma=-1.0), "gamma"),
    (dict(gamma="mean"), "gamma"),
    (dict(degree=0), "degree"),
    (dict(init="kmeans"), "init"),
    (dict(n_init=0), "n_init"),
    (dict(max_iter=0), "max_iter"),
    (dict(tol=-1.0), "tol"),
    (dict(algorithm="fast"), "algorithm"),
    (dict(dtype=np.int32), "dtype"),
    (dict(n_threads=0), "n_threads"),
    (dict(random_state="seed"), "random_state"),
])
def test_bad_parameters_raise(params, message):
    params.setdefault("n_clusters", 2)
    with pytest.raises(ValueError, match=message):
        KernelKMeans(**{"kernel": "rbf", **params}).fit(sklearn_blobs(20)[0])


@pytest.mark.parametrize("X, weights, message", [
    (np.ones((5, 2)), None, "larger than the number of samples"),
    (np.array([[0.0, np.nan]] * 10), None, "NaN"),
    (np.ones(10), None, "Expected 2D array"),
    (np.ones((10, 2)), -np.ones(10), "non-negative"),
    (np.ones((10, 2)), np.ones(9), "shape"),
    (-np.ones((10, 2)), None, "non-negative data"),
])
def test_bad_data_raises(X, weights, message):
    kernel = "chi2" if message == "non-negative data" else "rbf"
    with pytest.raises(ValueError, match=message):
        KernelKMeans(6, kernel=kernel, gamma=1.0).fit(X, sample_weight=weights)


def test_predict_checks_feature_count_and_fitted_state():
    X = sklearn_blobs(50)[0]
    with pytest.raises(AttributeError, match="not fitted"):
        KernelKMeans(2, kernel="rbf").predict(X)
    est = KernelKMeans(2, kernel="rbf", random_state=0).fit(X)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :2])


def test_params_roundtrip_and_repr():
    est = KernelKMeans(4, kernel="poly", degree=2)
    assert est.get_params()["degree"] == 2
    est.set_params(n_clusters=5)
    assert est.n_clusters == 5
    assert "poly" in repr(est)
    with pytest.raises(ValueError):
        est.set_params(bogus=1)


def test_scores_method_equals_sklearn_for_linear_kernel():
    from sklearn.metrics import calinski_harabasz_score, davies_bouldin_score, silhouette_score

    X = sklearn_blobs(200, k=4, seed=3)[0]
    est = KernelKMeans(4, kernel="linear", random_state=0).fit(X)
    got = est.scores()
    assert got["silhouette"] == pytest.approx(silhouette_score(X, est.labels_), rel=1e-9)
    assert got["calinski_harabasz"] == pytest.approx(calinski_harabasz_score(X, est.labels_),
                                                     rel=1e-9)
    assert got["davies_bouldin"] == pytest.approx(davies_bouldin_score(X, est.labels_), rel=1e-9)
    assert got["silhouette_n_used"] == 200
    pre = KernelKMeans(4, kernel="precomputed", random_state=0).fit(X @ X.T)
    with pytest.raises(ValueError, match="kernel_matrix"):
        pre.scores()
    assert pre.scores(kernel_matrix=X @ X.T)["silhouette"] == pytest.approx(got["silhouette"],
                                                                            rel=1e-9)


@pytest.mark.parametrize("algorithm", ["lloyd", "elkan"])
@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_zero_weight_points_do_not_decide_convergence(kernel, algorithm):
    """Points of zero weight move without changing any centre: a fit whose positive-weight
    points are settled is converged, without a warning, even when the zero-weight points
    moved last (before, 4 of these 20 linear fits and 1 rbf fit stopped at once with "did not
    converge"). The labels are checked to be a fixed point by brute force: every point,
    of zero weight or not, at a nearest centre of its own cluster's sums."""
    X, _ = make_blobs(200, centers=4, random_state=0)
    w = np.ones(len(X))
    w[np.random.default_rng(1).choice(len(X), 60, replace=False)] = 0
    params = {"gamma": 0.5} if kernel == "rbf" else {}
    K = ref.kernel_matrix(X, X, kernel, **params)
    for seed in range(20):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            est = KernelKMeans(4, kernel=kernel, n_init=1, random_state=seed, refine="none",
                               algorithm=algorithm, **params).fit(X, sample_weight=w)
        assert est.converged_
        D = ref.distances(K, est.labels_, w, 4)
        own = D[np.arange(len(X)), est.labels_]
        assert np.all(own <= D.min(axis=1) + 1e-9 * np.abs(np.diag(K)).max()), seed
        assert est.inertia_ == pytest.approx(ref.objective(K, est.labels_, w), rel=1e-9)
        np.testing.assert_array_equal(est.predict(X), est.labels_)


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_default_fit_with_zero_weights_warns_nothing(kernel):
    """The default fit (20 restarts: spectral starts, k-means++, Hartigan) with a third of
    the weights zero: no warning (before: 25 'did not converge' warnings in one fit), and
    the winner is a brute-force fixed point, zero-weight points included."""
    X, _ = make_blobs(300, centers=5, random_state=2)
    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 2, len(X))
    w[rng.choice(len(X), 100, replace=False)] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = KernelKMeans(8, kernel=kernel, random_state=0).fit(X, sample_weight=w)
    assert est.converged_
    K = ref.kernel_matrix(X, X, kernel, gamma=est.gamma_)
    D = ref.distances(K, est.labels_, w, 8)
    own = D[np.arange(len(X)), est.labels_]
    assert np.all(own <= D.min(axis=1) + 1e-9 * np.abs(np.diag(K)).max())
    assert est.inertia_ == pytest.approx(ref.objective(K, est.labels_, w), rel=1e-9)
