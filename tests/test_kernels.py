"""Kernel matrices against scikit-learn's pairwise_kernels and the brute-force formulas."""
import numpy as np
import pytest
from sklearn.metrics.pairwise import pairwise_kernels

import reference as ref
from helpers import gaussian
from kkmeans_cli import memory as memory_module
from kkmeans_cli.kernels import functions as kernels
from kkmeans_cli.kernels.functions import Kernel

CASES = {
    "rbf": dict(gamma=0.3),
    "linear": dict(),
    "poly": dict(gamma=0.2, degree=3, coef0=1.0),
    "sigmoid": dict(gamma=0.05, coef0=0.5),
    "laplacian": dict(gamma=0.4),
    "chi2": dict(gamma=0.7),
    "cosine": dict(),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matrix_matches_sklearn_and_is_symmetric(name, dtype, monkeypatch):
    # Tiny blocks so several row blocks and the mirroring between them are exercised.
    monkeypatch.setattr(memory_module, "BLOCK_BYTES", 8 * 120 * 7)
    X = gaussian(120, 4, positive=name == "chi2")
    params = CASES[name]
    kern = Kernel(name, params.get("gamma"), params.get("degree", 3), params.get("coef0", 1.0))
    K = kern.matrix(X, dtype=dtype, n_threads=2)
    assert K.dtype == dtype and K.flags.c_contiguous
    want = pairwise_kernels(X, metric=name, **params)
    tol = 1e-12 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(K, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(K, ref.kernel_matrix(X, X, name, **params), rtol=tol, atol=tol)
    np.testing.assert_array_equal(K, K.T)
    np.testing.assert_allclose(np.diagonal(K), kern.diag(X), rtol=tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cross_rows_are_the_matrix_rows(name):
    # Same arithmetic as the matrix; only BLAS's tail kernels may differ, by an ulp or so.
    X = gaussian(300, 4, positive=name == "chi2")
    params = CASES[name]
    kern = Kernel(name, params.get("gamma"), params.get("degree", 3), params.get("coef0", 1.0))
    K = kern.matrix(X, n_threads=2)
    rows = kern.cross(X[37:90], X, n_threads=1)
    np.testing.assert_allclose(rows, K[37:90], rtol=1e-14, atol=1e-15)
    if name in ("laplacian", "chi2"):  # no BLAS: computed by one loop in one order
        np.testing.assert_array_equal(rows, K[37:90])


def test_rbf_diagonal_is_exactly_one_even_for_large_norms():
    X = gaussian(120, 4) * 1e4
    K = Kernel("rbf", 1e-9).matrix(X)
    assert np.all(np.diagonal(K) == 1.0)


def test_cosine_zero_rows_give_zero():
    X = gaussian(10, 4)
    X[3] = 0
    K = Kernel("cosine").matrix(X)
    assert np.all(K[3] == 0) and np.all(K[:, 3] == 0)


def test_params_and_describe():
    assert Kernel("rbf", 0.5).params() == {"kernel": "rbf", "gamma": 0.5}
    assert Kernel("poly", 1.0, 2, 0.0).params() == {"kernel": "poly", "gamma": 1.0,
                                                     "degree": 2, "coef0": 0.0}
    assert Kernel("linear").describe() == "linear"
    assert Kernel("rbf", 0.25).describe() == "rbf(gamma=0.25)"


def test_median_gamma_for_laplacian_and_chi2():
    X = gaussian(50, 4, positive=True)
    rng = np.random.default_rng(0)
    i, j = np.triu_indices(50, 1)
    l1 = np.abs(X[i] - X[j]).sum(1)
    assert kernels.resolve_gamma("laplacian", "median", X, rng) == pytest.approx(
        1 / (2 * np.median(l1)))
    chi = ((X[i] - X[j]) ** 2 / (X[i] + X[j])).sum(1)
    assert kernels.resolve_gamma("chi2", "median", X, rng) == pytest.approx(
        1 / (2 * np.median(chi)))
    assert kernels.resolve_gamma("linear", "median", X, rng) is None
    assert kernels.resolve_gamma("rbf", 2.5, X, rng) == 2.5


def test_median_gamma_on_a_sample_is_seeded():
    X = gaussian(1000, 4)
    a = kernels.resolve_gamma("rbf", "median", X, np.random.default_rng(3))
    b = kernels.resolve_gamma("rbf", "median", X, np.random.default_rng(3))
    assert a == b
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)[np.triu_indices(1000, 1)]
    assert a == pytest.approx(1 / (2 * np.median(d2)), rel=0.05)
