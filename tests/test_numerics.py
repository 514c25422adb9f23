"""Data far from the origin: results against the unshifted data and against extended precision.

Squared distances from products, ‖x‖² + ‖y‖² − 2x·y, and the linear kernel's objective
Σ w_i K_ii − Σ_c g_c/W_c cancel catastrophically when the points share a large offset (before
the kernel centred the data, a shift of 10⁸ left the linear inertia off by 27%, changed the
labels — ARI 0.44 — and made rbf's K wrong by up to 1). Every kernel k-means quantity of rbf
and of the linear k-means objective is unchanged by a common shift, so the references here
cannot share the defect: the same fit on the unshifted data, or ``np.longdouble`` arithmetic
on the shifted data itself. The only difference left is the rounding the shifted data carry
(≈ 10⁸·2⁻⁵³ ≈ 10⁻⁸ per coordinate), hence the 10⁻⁶ tolerances.
"""
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from kkmeans_cli import KernelKMeans
from kkmeans_cli.kernels.functions import Kernel, data_offset
from kkmeans_cli.measures import metrics

SHIFT = 1e8
LD = np.longdouble


def _data(n=240, seed=0):
    X, _ = make_blobs(n, n_features=3, centers=4, cluster_std=1.0, random_state=seed)
    new = X[:40] + np.random.default_rng(seed).normal(scale=0.7, size=(40, 3))
    return X, new


def _fit(X, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no false "did not converge" far from the origin
        return KernelKMeans(4, random_state=0, n_init=4, **{"kernel": "rbf", **params}).fit(X)


ROUTES = [dict(storage="matrix"), dict(storage="blocked"),
          dict(approx="nystroem", n_landmarks=60)]


@pytest.mark.parametrize("kernel", ["linear", "rbf", "laplacian"])
@pytest.mark.parametrize("route", ROUTES, ids=["matrix", "blocked", "nystroem"])
def test_a_shift_of_1e8_changes_nothing(kernel, route):
    """Fit, predict, transform and the measures of data shifted by 10⁸ equal those of the
    unshifted data: the same labels, inertia and scores within 10⁻⁶ (relative). rbf and
    linear are centred (``Kernel.offset``); laplacian takes the differences a − b directly,
    which lose nothing to the shift, and needs no offset."""
    X, new = _data()
    base = _fit(X, kernel=kernel, **route)
    far = _fit(X + SHIFT, kernel=kernel, **route)
    assert far.converged_ and base.converged_
    np.testing.assert_array_equal(far.labels_, base.labels_)
    assert far.inertia_ == pytest.approx(base.inertia_, rel=1e-6)
    if kernel == "rbf":
        assert far.gamma_ == pytest.approx(base.gamma_, rel=1e-6)
    np.testing.assert_array_equal(far.predict(X + SHIFT), far.labels_)
    np.testing.assert_array_equal(far.predict(new + SHIFT), base.predict(new))
    D_far, D_base = far.transform(new + SHIFT), base.transform(new)
    np.testing.assert_allclose(D_far, D_base, rtol=1e-6, atol=1e-6 * np.abs(D_base).max())
    kw = {"kernel_matrix": far.kernel_matrix(X + SHIFT)} if "approx" in route else {}
    kw_base = {"kernel_matrix": base.kernel_matrix(X)} if "approx" in route else {}
    far_scores, base_scores = far.scores(**kw), base.scores(**kw_base)
    for name in ("silhouette", "simplified_silhouette", "calinski_harabasz", "davies_bouldin"):
        assert far_scores[name] == pytest.approx(base_scores[name], rel=1e-6), name


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_blocked_silhouette_of_shifted_data(kernel):
    """The silhouette computed from kernel rows in blocks (``fit --storage blocked
    --silhouette``) centres as the fit did."""
    X, _ = _data()
    base = _fit(X, kernel=kernel)
    far = _fit(X + SHIFT, kernel=kernel, storage="blocked")
    s_far = metrics.silhouette_blocks(X + SHIFT, far.labels_, far.kernel_)
    s_base = metrics.silhouette_blocks(X, base.labels_, base.kernel_)
    np.testing.assert_allclose(s_far, s_base, rtol=1e-6, atol=1e-7)


def _longdouble_rbf(A, B, gamma):
    A, B = np.asarray(A, dtype=LD), np.asarray(B, dtype=LD)
    return np.exp(-LD(gamma) * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


@pytest.mark.parametrize("shift", [0.0, 1e6, 1e7, 1e8])
def test_rbf_kernel_values_against_extended_precision(shift):
    """K of the shifted data against np.longdouble on the same (shifted, float64) values:
    the error is float64 rounding at every offset (before: 1.4e-4 at 10⁶, 6.5e-2 at 10⁷,
    1.0 at 10⁸). Also the rows of ``cross`` (predict, blocked storage) and of the matrix."""
    X, new = _data(n=80)
    X, new = X + shift, new + shift
    kernel = Kernel("rbf", 0.1, offset=data_offset("rbf", X))
    K = kernel.matrix(X)
    assert np.max(np.abs(K - _longdouble_rbf(X, X, 0.1))) < 1e-13
    assert np.max(np.abs(kernel.cross(new, X) - _longdouble_rbf(new, X, 0.1))) < 1e-13
    np.testing.assert_array_equal(kernel.cross(X[5:9], X), K[5:9])


def _longdouble_linear_objective(X, labels, w):
    X, w = np.asarray(X, dtype=LD), np.asarray(w, dtype=LD)
    total = LD(0)
    for c in np.unique(labels):
        m = labels == c
        mean = (w[m, None] * X[m]).sum(axis=0) / w[m].sum()
        total += (w[m] * ((X[m] - mean) ** 2).sum(axis=1)).sum()
    return total


@pytest.mark.parametrize("shift", [0.0, 1e6, 1e7, 1e8])
def test_linear_inertia_against_extended_precision(shift):
    """The linear kernel's inertia against Σ w ‖x − μ‖² of its own labels in np.longdouble
    on the shifted data (before: relative error 1.0e-4 at 10⁶, 1.7e-2 at 10⁷, 0.27 at 10⁸)."""
    X, _ = _data()
    X = X + shift
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(X))
    est = KernelKMeans(4, kernel="linear", random_state=0, n_init=4).fit(X, sample_weight=w)
    ref = _longdouble_linear_objective(X, est.labels_, w)
    assert abs(LD(est.inertia_) - ref) / ref < 1e-12
    np.testing.assert_allclose(
        est.cluster_weights_, np.bincount(est.labels_, weights=w, minlength=4), rtol=1e-14)


def test_offset_is_the_mean_and_only_where_the_objective_allows():
    X, _ = _data()
    np.testing.assert_array_equal(data_offset("rbf", X), X.mean(axis=0))
    np.testing.assert_array_equal(data_offset("linear", X), X.mean(axis=0))
    # the normalized cut uses K's values, which a shift changes for the linear kernel;
    # the others are not shift-invariant, and the L1 kernels take differences directly
    assert data_offset("linear", X, objective="ncut") is None
    for name in ("poly", "sigmoid", "cosine", "laplacian", "chi2"):
        assert data_offset(name, X) is None
    est = KernelKMeans(3, kernel="linear", n_init=1, random_state=0).fit(X)
    np.testing.assert_array_equal(est.kernel_.offset, X.mean(axis=0))
    K = est.kernel_matrix(X)
    Xc = X - X.mean(axis=0)
    np.testing.assert_allclose(K, Xc @ Xc.T, rtol=1e-12, atol=1e-12 * np.abs(K).max())


def test_a_kernel_matrix_of_uncentred_data_is_refused():
    """fit(kernel_matrix=K) compares K's diagonal with K(x, x): X Xᵀ of the raw data is not
    the linear kernel's matrix any more (that is the Gram matrix of the centred data)."""
    X, _ = _data()
    X = X + 3.0
    est = KernelKMeans(3, kernel="linear", n_init=1, random_state=0)
    with pytest.raises(ValueError, match=r"kernel_matrix is not this estimator's kernel matrix "
                                         r"of X.*Gram matrix of the centred data"):
        est.fit(X, kernel_matrix=X @ X.T)
    same = KernelKMeans(3, kernel="linear", n_init=1, random_state=0)
    same.fit(X, kernel_matrix=same.kernel_matrix(X))
    np.testing.assert_array_equal(same.labels_, est.fit(X).labels_)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("storage", ["matrix", "blocked"])
def test_cli_fit_predict_and_silhouette_of_shifted_data(tmp_path, kernel, storage):
    """End to end (``--scale none``): the CSV shifted by 10⁸ gets the labels, the saved
    model's predictions and the silhouette of the unshifted CSV."""
    import json

    from helpers import FAST, blobs, labels_of, run, write_csv

    X, _ = blobs(n=90, d=3, k=3)
    found = {}
    for name, shift in (("base", 0.0), ("far", SHIFT)):
        path = write_csv(tmp_path / f"{name}.csv", X + shift)
        model, summary = tmp_path / f"{name}.npz", tmp_path / f"{name}.json"
        fitted = run(["fit", path, "-k", "3", "--kernel", kernel, "--storage", storage,
                      "--silhouette", "--summary", summary, "-o", model, *FAST])
        assert fitted.exit_code == 0, fitted.stderr
        assert "did not converge" not in fitted.stderr
        predicted = run(["predict", model, path, "--threads", "1"])
        assert predicted.exit_code == 0, predicted.stderr
        found[name] = (labels_of(fitted.stdout), labels_of(predicted.stdout),
                       json.loads(summary.read_text()))
    (base, base_pred, base_sum), (far, far_pred, far_sum) = found["base"], found["far"]
    np.testing.assert_array_equal(far, base)
    np.testing.assert_array_equal(far_pred, far)
    np.testing.assert_array_equal(base_pred, base)
    assert far_sum["inertia"] == pytest.approx(base_sum["inertia"], rel=1e-6)
    assert far_sum["silhouette"] == pytest.approx(base_sum["silhouette"], rel=1e-6)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_sweep_of_shifted_data(kernel):
    """A sweep (one kernel matrix shared by every k, measures from one pass) of data
    shifted by 10⁸ gives the unshifted sweep's rows and best k."""
    from kkmeans_cli.model.sweep import sweep

    X, _ = _data(n=200)
    base = sweep(X, [2, 3, 4, 5], kernel=kernel, random_state=0, n_init=3)
    far = sweep(X + SHIFT, [2, 3, 4, 5], kernel=kernel, random_state=0, n_init=3)
    assert far.best_k == base.best_k
    np.testing.assert_array_equal(far.best_estimator.labels_, base.best_estimator.labels_)
    for row_far, row_base in zip(far.rows, base.rows):
        for key in ("inertia", "silhouette", "simplified_silhouette", "calinski_harabasz",
                    "davies_bouldin"):
            assert row_far[key] == pytest.approx(row_base[key], rel=1e-6), (row_far["k"], key)
