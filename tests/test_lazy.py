"""``storage='auto'`` for a fit with one start (``kernel_source.LazyKernel``): Elkan on kernel
values computed in blocks, the kernel matrix built only past a budget (Hartigan's moves are made
on kernel values in blocks too). Every result here is compared with ``storage='matrix'`` from the same seed: the same
labels, iterations and inertia (rel. 1e-9) — the route changes where kernel values come from,
never the answer.

``LAZY_MIN_N`` is lowered in most tests so that they stay small and quick; one test runs at the
real threshold.
"""
import contextlib

import numpy as np
import pytest

from helpers import labels_of, mixture, run, write_csv
from kkmeans_cli import KernelKMeans
from kkmeans_cli.model import planning as estimator_module
from kkmeans_cli.engine.elkan import elkan
from kkmeans_cli.engine.starts import kmeans_plusplus
from kkmeans_cli.kernels.sources import BlockedKernel, InMemoryKernel
from kkmeans_cli.errors import KKMeansWarning
from kkmeans_cli.kernels.functions import Kernel, resolve_gamma
from kkmeans_cli.engine.hartigan import blocked_hartigan, hartigan


@pytest.fixture
def small_lazy(monkeypatch):
    monkeypatch.setattr(estimator_module, "LAZY_MIN_N", 200)


def _pair(X, weights=None, **params):
    """The same fit with storage 'auto' and 'matrix'."""
    return [KernelKMeans(storage=storage, **{"kernel": "rbf", **params}).fit(X, sample_weight=weights)
            for storage in ("auto", "matrix")]


def _assert_same(auto, matrix):
    np.testing.assert_array_equal(auto.labels_, matrix.labels_)
    assert auto.n_iter_ == matrix.n_iter_
    assert auto.inertia_ == pytest.approx(matrix.inertia_, rel=1e-9)
    np.testing.assert_allclose(auto.inner_sums_, matrix.inner_sums_, rtol=1e-9)
    np.testing.assert_allclose(auto.cluster_weights_, matrix.cluster_weights_, rtol=1e-12)
    assert matrix.fit_stats_["storage"] == "matrix"


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "linear", "cosine"])
@pytest.mark.parametrize("weighted", [False, True])
def test_well_separated_data_never_builds_the_matrix(small_lazy, kernel, weighted):
    X = mixture(1500, 3, 6, seed=1)
    w = np.random.default_rng(2).uniform(0.5, 2.0, X.shape[0]) if weighted else None
    auto, matrix = _pair(X, w, n_clusters=6, kernel=kernel, n_init=1, random_state=4)
    _assert_same(auto, matrix)
    if kernel == "rbf":
        assert auto.fit_stats_["storage"] == "blocked"
        # fewer kernel values than the matrix holds (it also reads n² per full pass)
        assert auto.fit_stats_["kernel_evaluations"] < X.shape[0] ** 2
    np.testing.assert_array_equal(auto.predict(X), auto.labels_)


def test_past_the_budget_the_matrix_is_built_and_lloyd_goes_on(small_lazy, monkeypatch):
    # Structureless data: many iterations with many moves, so the budget runs out.
    X = np.random.default_rng(5).normal(size=(1200, 4))
    monkeypatch.setattr(estimator_module, "LAZY_BUDGET", 0.2)
    auto, matrix = _pair(X, n_clusters=9, n_init=1, refine="none", random_state=3)
    assert auto.fit_stats_["storage"] == "blocked, then matrix"
    _assert_same(auto, matrix)
    assert auto.n_iter_ > 3
    assert auto.converged_ and matrix.converged_


def test_budget_hit_in_the_first_iterations_still_gives_lloyds_result(small_lazy, monkeypatch):
    X = np.random.default_rng(6).normal(size=(900, 3))
    monkeypatch.setattr(estimator_module, "LAZY_BUDGET", 1e-9)   # stop before the first update
    auto, matrix = _pair(X, n_clusters=5, n_init=1, random_state=8)
    assert auto.fit_stats_["storage"] == "blocked, then matrix"
    _assert_same(auto, matrix)


def test_hartigan_moves_build_the_matrix_and_give_the_refined_result(small_lazy):
    # Structureless data: Lloyd's fixed point is usually not a Hartigan optimum.
    moved = 0
    for seed in range(4):
        X = np.random.default_rng(seed).normal(size=(700, 2))
        auto, matrix = _pair(X, n_clusters=8, n_init=1, random_state=seed)
        _assert_same(auto, matrix)
        assert auto.fit_stats_["refine_moves"] == matrix.fit_stats_["refine_moves"]
        if matrix.fit_stats_["refine_moves"]:
            moved += 1
            assert auto.fit_stats_["storage"] == "blocked, then matrix"
    assert moved, "no seed gave Hartigan a move: the test shows nothing"


def test_max_iter_counts_the_blocked_and_the_matrix_iterations(small_lazy, monkeypatch):
    X = np.random.default_rng(9).normal(size=(1000, 3))
    monkeypatch.setattr(estimator_module, "LAZY_BUDGET", 0.1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto, matrix = _pair(X, n_clusters=10, n_init=1, max_iter=6, refine="none",
                             random_state=1)
    assert matrix.n_iter_ == 6 and not matrix.converged_
    _assert_same(auto, matrix)


def test_given_start_labels_take_the_lazy_route(small_lazy):
    X = mixture(1000, 2, 4, seed=3)
    # a start near a good clustering: k-means++ labels of the data
    start = KernelKMeans(4, kernel="rbf", n_init=1, random_state=0, storage="matrix").fit(X).labels_.copy()
    flip = np.random.default_rng(0).choice(X.shape[0], 50, replace=False)
    start[flip] = (start[flip] + 1) % 4
    auto, matrix = _pair(X, n_clusters=4, init=start, random_state=0)
    assert auto.fit_stats_["storage"] == "blocked"
    _assert_same(auto, matrix)


@pytest.mark.parametrize("params, why", [
    (dict(n_init=3), "several restarts share the matrix"),
    (dict(init="spectral", n_init=1), "spectral starts need K"),
    (dict(kernel="sigmoid", n_init=1), "not PSD by construction"),
    (dict(kernel="poly", coef0=-1.0, n_init=1), "poly with coef0 < 0 is checked"),
    (dict(n_init=1, algorithm="lloyd"), "Lloyd asked for: blocked Lloyd is slow"),
    (dict(n_init=1, objective="ncut"), "ncut transforms K"),
    (dict(n_init=1, psd_repair="lingoes", kernel="sigmoid"), "repair needs K"),
    (dict(n_init=1, storage="matrix"), "asked for"),
])
def test_the_matrix_route_where_lazy_cannot_help(small_lazy, params, why):
    X = mixture(400, 3, 3)
    checked = params.get("kernel") in ("sigmoid", "poly") and "psd_repair" not in params
    with (pytest.warns(KKMeansWarning, match="not positive semidefinite") if checked
          else contextlib.nullcontext()):
        est = KernelKMeans(n_clusters=3, random_state=0, **{"kernel": "rbf", **params}).fit(X)
    assert est.fit_stats_["storage"] == "matrix", why


def test_many_features_and_few_clusters_use_the_matrix(small_lazy):
    # The blocked rule of algorithm='auto': Lloyd there, so no lazy start (engine.iterate.scheme).
    X = np.random.default_rng(0).normal(size=(400, 40))
    assert KernelKMeans(3, kernel="rbf", n_init=1, random_state=0).fit(X).fit_stats_["storage"] == "matrix"
    est = KernelKMeans(3, kernel="rbf", n_init=1, random_state=0, algorithm="elkan").fit(X)
    assert est.fit_stats_["storage"].startswith("blocked")


def test_given_kernel_matrix_and_small_n_use_the_matrix():
    X = mixture(600, 2, 3)
    est = KernelKMeans(3, kernel="rbf", n_init=1, random_state=0)
    assert est.fit(X).fit_stats_["storage"] == "matrix"        # n < LAZY_MIN_N
    est = KernelKMeans(3, kernel="rbf", n_init=1, random_state=0)
    K = est.kernel_matrix(X)
    assert est.fit(X, kernel_matrix=K).fit_stats_["storage"] == "matrix"


def test_at_the_real_threshold(small_lazy, monkeypatch):
    monkeypatch.setattr(estimator_module, "LAZY_MIN_N", estimator_module.LAZY_MIN_N)
    n = estimator_module.LAZY_MIN_N
    X = mixture(n, 4, 5, seed=7)
    auto, matrix = _pair(X, n_clusters=5, n_init=1, random_state=2, dtype=np.float32)
    assert auto.fit_stats_["storage"] == "blocked"
    _assert_same(auto, matrix)
    small = KernelKMeans(5, kernel="rbf", n_init=1, random_state=2).fit(X[:n - 1])
    assert small.fit_stats_["storage"] == "matrix"


def test_thread_count_does_not_change_the_lazy_result(small_lazy):
    X = mixture(2500, 3, 5, seed=11)
    one = KernelKMeans(5, kernel="rbf", n_init=1, random_state=0, n_threads=1).fit(X)
    two = KernelKMeans(5, kernel="rbf", n_init=1, random_state=0, n_threads=2).fit(X)
    np.testing.assert_array_equal(one.labels_, two.labels_)
    assert one.inertia_ == two.inertia_


# -- Hartigan without the kernel matrix ----------------------------------------------------------
def _brute_force_best_move(K, w, labels, k):
    """The lowest change of the objective by moving one point (NumPy on the whole K)."""
    def objective(lab):
        total = float(w @ np.diag(K))
        for c in range(k):
            m = lab == c
            if w[m].sum() > 0:
                total -= float(w[m] @ K[np.ix_(m, m)] @ w[m]) / w[m].sum()
        return total

    base, best = objective(labels), 0.0
    for i in range(labels.size):
        if np.count_nonzero(labels == labels[i]) < 2:
            continue
        for c in range(k):
            if c != labels[i]:
                moved = labels.copy()
                moved[i] = c
                best = min(best, objective(moved) - base)
    return best


@pytest.mark.parametrize("kind", ["blobs", "normal"])
@pytest.mark.parametrize("weighted", [False, True])
def test_blocked_hartigan_ends_at_a_hartigan_optimum(kind, weighted):
    """From Elkan's converged bounds, the blocked sweeps stop only where no single move lowers
    the objective (checked by brute force on K), never raise it, and move exactly what the
    matrix sweeps move when the moves are few and independent."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        k = int(rng.integers(2, 6))
        X = mixture(120, 2, k, seed=seed) if kind == "blobs" else rng.normal(size=(120, 2))
        w = rng.uniform(0.3, 3.0, 120) if weighted else np.ones(120)
        kern = Kernel("rbf", resolve_gamma("rbf", "median", X, np.random.default_rng(0)))
        blocked = BlockedKernel(kern, X)
        start, _ = kmeans_plusplus(blocked, w, k, np.random.default_rng(seed))
        result = elkan(blocked, w, start, k)
        assert result.converged
        labels, moves, gain = blocked_hartigan(blocked, w, result, k)
        K = kern.matrix(X)
        assert gain >= 0.0
        assert _brute_force_best_move(K, w, labels, k) > -1e-9 * float(w.sum())
        memory = InMemoryKernel(K, diag=kern.diag(X))
        _, moves_matrix, gain_matrix = hartigan(memory, w, result.labels, k)
        if moves_matrix == 0:
            assert moves == 0 and np.array_equal(labels, result.labels)


def test_blocked_hartigan_equals_matrix_hartigan_on_small_data():
    """The default fit (spectral and k-means++ starts, Hartigan) reaches the same labels and
    objective with kernel values in blocks as with the kernel matrix (seeded data; the
    order of the moves may differ, so this asserts the result on these fixed inputs)."""
    for seed in range(4):
        X = mixture(400, 3, 4, seed=seed)
        for init in ("k-means++", "random"):
            blocked = KernelKMeans(4, kernel="rbf", n_init=1, init=init, storage="blocked", random_state=seed,
                                   n_threads=1).fit(X)
            matrix = KernelKMeans(4, kernel="rbf", n_init=1, init=init, storage="matrix", algorithm="elkan",
                                  random_state=seed, n_threads=1).fit(X)
            np.testing.assert_array_equal(blocked.labels_, matrix.labels_)
            np.testing.assert_allclose(blocked.inertia_, matrix.inertia_, rtol=1e-12)
            assert blocked.fit_stats_["refine_moves"] == matrix.fit_stats_["refine_moves"]


def test_lazy_fit_does_not_build_the_matrix_for_hartigan(small_lazy, monkeypatch):
    """Hartigan's moves alone never build K: with a budget that the iterations cannot reach,
    a single-start fit whose refinement moves points stays blocked and equals the matrix
    fit."""
    X = mixture(1500, 2, 6, seed=2)
    matrix = KernelKMeans(6, kernel="rbf", n_init=1, random_state=0, n_threads=1, storage="matrix").fit(X)
    assert matrix.fit_stats_["refine_moves"] >= 1
    monkeypatch.setattr(estimator_module, "LAZY_BUDGET", np.inf)
    monkeypatch.setattr(Kernel, "matrix",
                        lambda *a, **kw: pytest.fail("the kernel matrix was built"))
    auto = KernelKMeans(6, kernel="rbf", n_init=1, random_state=0, n_threads=1).fit(X)
    assert auto.fit_stats_["storage"] == "blocked"
    assert auto.fit_stats_["refine_moves"] == matrix.fit_stats_["refine_moves"]
    _assert_same(auto, matrix)


# -- the command line ----------------------------------------------------------------------------
def test_cli_reports_the_storage_used(tmp_path, small_lazy):
    import json

    X = mixture(600, 2, 3, seed=2)
    data = write_csv(tmp_path / "d.csv", X)
    base = ["fit", "--kernel", "rbf", data, "-k", "3", "--n-init", "1", "--no-model"]
    auto = run(base + ["--summary", tmp_path / "auto.json"])
    assert auto.exit_code == 0, auto.output
    assert "no kernel matrix" in auto.stderr
    assert json.loads((tmp_path / "auto.json").read_text())["storage"] == "blocked"
    matrix = run(base + ["--storage", "matrix", "--summary", tmp_path / "matrix.json"])
    assert matrix.exit_code == 0, matrix.output
    assert json.loads((tmp_path / "matrix.json").read_text())["storage"] == "matrix"
    np.testing.assert_array_equal(labels_of(auto.stdout), labels_of(matrix.stdout))


@pytest.mark.parametrize("seed", [1, 2, 5])
def test_float32_starts_read_the_float32_values(small_lazy, seed):
    # k-means++ reads kernel rows: blocked rows must be rounded to float32 like the matrix,
    # else the starts differ (found in review: 53-66 labels differed here).
    X = np.random.default_rng(0).normal(size=(250, 2))
    auto, matrix = _pair(X, n_clusters=200, kernel="linear", n_init=1, random_state=seed,
                         dtype="float32", refine="none")
    np.testing.assert_array_equal(auto.labels_, matrix.labels_)
    assert auto.inertia_ == pytest.approx(matrix.inertia_, rel=1e-6)


def test_not_converged_warning_quotes_the_whole_max_iter(small_lazy, monkeypatch):
    import warnings

    monkeypatch.setattr(estimator_module, "LAZY_BUDGET", 0.3)
    X = np.random.default_rng(9).normal(size=(1000, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = KernelKMeans(10, kernel="rbf", n_init=1, max_iter=6, random_state=1, refine="none").fit(X)
    assert est.fit_stats_["storage"] == "blocked, then matrix"
    messages = [str(w.message) for w in caught]
    assert any("max_iter=6 was reached" in m for m in messages), messages
    assert not any("max_iter=4" in m or "max_iter=1 " in m for m in messages), messages


def test_hartigan_keeps_exact_sums_across_rounds():
    """The sums Hartigan's rounds ask for are computed from scratch once per point, then
    brought up to date by replaying the moves made since: equal to fresh sums."""
    from kkmeans_cli.engine.hartigan import ExactSums

    rng = np.random.default_rng(5)
    X, k = rng.normal(size=(500, 3)), 4
    w = rng.uniform(0.5, 2.0, 500)
    blocked = BlockedKernel(Kernel("rbf", 0.4), X)
    labels = rng.integers(0, k, 500).astype(np.int32)
    fresh_calls = []
    original = blocked.outer_sums_of

    def counted(points, *args):
        fresh_calls.append(np.array(points))
        return original(points, *args)

    blocked.outer_sums_of = counted
    sums = ExactSums(blocked, w, k, 500)
    for round_ in range(4):
        asked = np.sort(rng.choice(500, 120, replace=False))
        np.testing.assert_allclose(sums.of(asked, labels),
                                   original(asked, labels, w, k), rtol=1e-12, atol=1e-12)
        moved = np.sort(rng.choice(500, 7, replace=False))
        new = ((labels[moved] + 1 + round_) % k).astype(np.int32)
        sums.moved(moved, labels[moved], new)
        labels[moved] = new
    computed = np.concatenate(fresh_calls)
    assert np.unique(computed).size == computed.size      # each point at most once


def test_blocked_hartigan_sweeps_the_best_candidates_when_capped(monkeypatch):
    """With more gaining candidates than ``max_points``, the sweeps take those whose move
    gains most, and the rounds go on to a Hartigan optimum (no single move gains, from
    fresh sums)."""
    import warnings

    from kkmeans_cli.engine import hartigan as hartigan_module

    rng = np.random.default_rng(10)
    n, k = 600, 40
    X = rng.normal(size=(n, 2))
    w = rng.uniform(0.5, 2.0, n)
    blocked = BlockedKernel(Kernel("rbf", 0.25), X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KKMeansWarning)   # empty clusters refilled
        result = elkan(blocked, w, rng.integers(0, k, n).astype(np.int32), k)
    seen = {}
    move_costs, submatrix = hartigan_module._move_costs, blocked.submatrix

    def costs(F, diag, weights, labels, g, W, points):
        cost, best = move_costs(F, diag, weights, labels, g, W, points)
        seen.setdefault("first", (points, cost))
        return cost, best

    def swept(idx):
        seen.setdefault("swept", np.array(idx))
        return submatrix(idx)

    monkeypatch.setattr(hartigan_module, "_move_costs", costs)
    monkeypatch.setattr(blocked, "submatrix", swept)
    labels, moves, _ = blocked_hartigan(blocked, w, result, k, max_points=5)
    points, cost = seen["first"]
    assert np.sum(cost < 0) > 5
    np.testing.assert_array_equal(seen["swept"], np.sort(points[np.argsort(cost)[:5]]))
    assert moves > 5
    F = blocked.outer_sums_of(np.arange(n), labels, w, k)
    g = np.bincount(labels, weights=w * F[labels, np.arange(n)], minlength=k)
    W = np.bincount(labels, weights=w, minlength=k)
    remaining, _ = move_costs(F, blocked.diag, w, labels, g, W, np.arange(n))
    assert remaining.min() > -1e-9 * float(w.sum())
