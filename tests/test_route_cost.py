"""The cost model of storage='auto' (model/planning.py: route_costs, choose_route, plan_fit)
and the adaptive screening it chooses (engine/exact_restarts.adaptive_restarts): the choice
on small synthetic cost inputs, the screened objective against the full restarts on i.i.d.
normal data, and the report's route row."""
import re

import numpy as np
import pytest

from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine import exact_restarts
from kkmeans_cli.model import planning
from kkmeans_cli.model.planning import RouteCosts, choose_route, plan_fit, route_costs

from helpers import run

GIB = 2**30


def _params(**kw):
    kw = {"kernel": "rbf", **kw}
    return {**KernelKMeans(**kw).get_params(), "memory_limit": kw.get("memory_limit", "16G")}


@pytest.fixture
def small_sample(monkeypatch):
    """Screening on a sample of 1,000 points, so that 2,500 points can be screened."""
    monkeypatch.setattr(exact_restarts, "SAMPLE_MIN", 1000)
    monkeypatch.setattr(exact_restarts, "SAMPLE_PER_CLUSTER", 100)


@pytest.mark.parametrize("matrix, screened, matrix_fits, blocked_fits, expected", [
    (150.4, 2.5, True, True, ("blocked", True)),   # screening predicted faster
    (2.5, 150.4, True, True, ("matrix", False)),   # the matrix predicted faster
    (2.0, 10.0, False, True, ("blocked", True)),   # the matrix does not fit: screened
    (10.0, 2.0, True, False, ("matrix", False)),   # no blocked route fits
    (10.0, 2.0, False, False, None),               # nothing fits: the caller refuses
])
def test_choose_route_on_synthetic_costs(matrix, screened, matrix_fits, blocked_fits,
                                         expected):
    costs = RouteCosts(matrix=matrix, screened=screened, matrix_bytes=GIB, sample=5000)
    chosen = choose_route(costs, matrix_fits, blocked_fits)
    if expected is None:
        assert chosen is None
        return
    assert chosen[:2] == expected
    if matrix_fits and blocked_fits:
        faster, slower = sorted([matrix, screened])
        assert chosen[2].startswith(f"predicted {faster:.2g} s with ")
        assert f" against {slower:.0f} s with " in chosen[2]
        assert "the kernel matrix (1 GiB) and full restarts" in chosen[2]
        assert "screened on a sample of 5,000 points" in chosen[2]
    elif expected[0] == "blocked":
        assert chosen[2] == ("the kernel matrix (1 GiB) does not fit the memory limit; "
                             "restarts screened on a sample of 5,000 points")


def test_route_costs_grow_as_the_model_says():
    """The matrix's prediction is n²-bound in every term; the screened one grows as n²/k
    beyond a fixed sample: quadrupling n multiplies the first by 16, the second by less."""
    small, large = route_costs(20_000, 10, 8, 20), route_costs(80_000, 10, 8, 20)
    assert large.matrix == pytest.approx(16 * small.matrix)
    assert large.screened < 16 * small.screened
    assert small.sample == large.sample == 5000
    assert small.matrix_bytes == 20_000**2 * 8
    # fewer restarts: the full restarts' share shrinks, the screening's fixed costs stay
    assert route_costs(20_000, 10, 8, 2).matrix < small.matrix
    assert route_costs(20_000, 10, 8, 20, itemsize=4).matrix_bytes == 20_000**2 * 4


def test_plan_fit_takes_the_cost_models_choice():
    auto = plan_fit(_params(n_clusters=8), 20_000, 10)
    assert (auto.route, auto.screen, auto.matrix_fits) == ("blocked", True, True)
    assert auto.reason.startswith("predicted ") and auto.costs.screened < auto.costs.matrix
    # asked for explicitly: no cost model, the old routes
    matrix = plan_fit(_params(n_clusters=8, storage="matrix"), 20_000, 10)
    assert (matrix.route, matrix.screen, matrix.costs) == ("matrix", False, None)
    blocked = plan_fit(_params(n_clusters=8, storage="blocked"), 20_000, 10)
    assert (blocked.route, blocked.screen, blocked.costs) == ("blocked", False, None)
    # restarts that cannot be screened (too few points, one start): the old rules
    assert plan_fit(_params(n_clusters=4), 4000, 3).route == "matrix"
    assert plan_fit(_params(n_clusters=8, n_init=1), 20_000, 10).route == "lazy"
    # a kernel without a blocked route (not PSD by construction): the matrix
    sigmoid = plan_fit(_params(n_clusters=8, kernel="sigmoid"), 20_000, 10)
    assert (sigmoid.route, sigmoid.screen) == ("matrix", False)
    # the kernel matrix does not fit: screened in blocks, no matrix to fall back on
    tight = plan_fit(_params(n_clusters=8, memory_limit="1G"), 20_000, 10)
    assert (tight.route, tight.screen, tight.matrix_fits) == ("blocked", True, False)
    assert tight.reason.startswith("the kernel matrix would need 3.05 GiB with the fit, more "
                                   "than the limit of 1 GiB (memory_limit)")
    assert tight.reason.endswith("; restarts screened on a sample of 5,000 points")


def test_screened_objective_not_above_full_restarts_on_iid_normal(small_sample, monkeypatch):
    """On data without clusters the sample's candidates end within the sampling noise of
    each other: the adaptive screening runs the very full restarts of storage='matrix' on
    kernel values in blocks (the kernel matrix of all points is never built), so it makes
    the same moves and ends at their objective, with their labels."""
    from kkmeans_cli.kernels.sources import LazyKernel

    X = np.random.default_rng(3).normal(size=(2500, 4))
    kw = dict(n_clusters=4, kernel="rbf", n_init=20, random_state=0, n_threads=1)
    full = KernelKMeans(storage="matrix", **kw).fit(X)
    monkeypatch.setattr(LazyKernel, "materialize",
                        lambda self: pytest.fail("the kernel matrix was built"))
    auto = KernelKMeans(**kw).fit(X)
    stats = auto.fit_stats_
    assert stats["route_predicted_seconds"]["screened"] < stats["route_predicted_seconds"][
        "matrix"]
    assert stats["screen_separated"] is False and stats["completed"] == []
    assert stats["storage"] == "blocked" and stats["screen_full_restarts"] == 20
    # the screening stopped once three distinct candidates were within 1% of the best
    ran = len(stats["sample_objectives"])
    assert exact_restarts.SCREEN_STOP_AFTER <= ran < 20
    assert len(stats["screened_start_kinds"]) == ran
    assert len(exact_restarts.promising(stats["sample_objectives"])) >= 3
    assert len(exact_restarts.promising(stats["sample_objectives"][:-1])) < 3 or \
        ran == exact_restarts.SCREEN_STOP_AFTER
    # the same 20 runs: objectives equal up to the rounding of sums made in another order
    np.testing.assert_allclose(stats["restart_inertias"],
                               full.fit_stats_["restart_inertias"], rtol=1e-12)
    assert stats["best_restart"] == full.fit_stats_["best_restart"]
    assert auto.inertia_ <= full.inertia_ * (1 + 1e-12)
    np.testing.assert_array_equal(auto.labels_, full.labels_)
    np.testing.assert_array_equal(auto.predict(X), auto.labels_)


def test_blocked_route_runs_the_full_restarts_when_the_sample_does_not_separate(
        small_sample):
    """storage='blocked' screens the same way: on data without clusters its objective is
    the full restarts' (the same runs as storage='matrix'), not a completed candidate's."""
    X = np.random.default_rng(5).normal(size=(2500, 3))
    kw = dict(n_clusters=3, kernel="rbf", n_init=8, random_state=1, n_threads=1)
    full = KernelKMeans(storage="matrix", **kw).fit(X)
    blocked = KernelKMeans(storage="blocked", **kw).fit(X)
    stats = blocked.fit_stats_
    assert stats["screen_separated"] is False and stats["sample_size"] == 1000
    assert stats["screen_full_restarts"] == 8 and len(stats["restart_inertias"]) == 8
    np.testing.assert_allclose(stats["restart_inertias"],
                               full.fit_stats_["restart_inertias"], rtol=1e-12)
    np.testing.assert_array_equal(blocked.labels_, full.labels_)
    np.testing.assert_array_equal(blocked.predict(X), blocked.labels_)


def test_separated_sample_completes_in_blocks(small_sample, monkeypatch):
    """Well-separated blobs: one solution stands out on the sample, it is completed on
    kernel values in blocks and the kernel matrix of all points is never built."""
    from kkmeans_cli.kernels.sources import LazyKernel

    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [20.0, 0.0], [0.0, 20.0]])
    y = rng.integers(0, 3, size=2500)
    X = centres[y] + rng.normal(size=(2500, 2))
    monkeypatch.setattr(LazyKernel, "materialize",
                        lambda self: pytest.fail("the kernel matrix was built"))
    est = KernelKMeans(3, kernel="rbf", gamma=0.01, n_init=20, random_state=0).fit(X)
    stats = est.fit_stats_
    assert stats["route_predicted_seconds"]["screened"] < stats["route_predicted_seconds"][
        "matrix"]
    assert stats["screen_separated"] is True and stats["storage"] == "blocked"
    assert len(stats["sample_objectives"]) == 20          # no early stop: one solution
    assert len(stats["restart_inertias"]) == 1
    assert len(np.unique(y[est.labels_ == 0])) == 1  # the blobs found (ARI 1)
    np.testing.assert_array_equal(est.predict(X), est.labels_)


def test_report_route_row_names_the_cost_models_choice(tmp_path, small_sample):
    from helpers import write_csv

    data = write_csv(tmp_path / "d.csv", np.random.default_rng(3).normal(size=(2500, 4)))
    result = run(["fit", data, "-k", 4, "--kernel", "rbf", "--n-init", 20, "--no-model",
                  "--threads", 1])
    assert result.exit_code == 0, result.stderr
    route = re.search(r"^route: +(.*)$", result.stderr, re.M).group(1)
    assert re.fullmatch(
        r"blocked \(kernel values computed in blocks, no kernel matrix\): predicted [0-9.]+ s "
        r"with restarts screened on a sample of 1,000 points against [0-9.]+ s with the "
        r"kernel matrix \(47\.7 MiB\) and full restarts; the matrix is never built: the "
        r"full restarts run in blocks if the sample's solutions do not separate",
        route), route
    restarts = re.search(r"^restarts: +(.*)$", result.stderr, re.M).group(1)
    assert re.fullmatch(r"([5-9]|1[0-9]|20) screened on a sample of 1,000 points \(their "
                        r"solutions did not "
                        r"separate\), then 20 on all the data \(best: #([1-9]|1[0-9]|20)\)",
                        restarts), restarts
    # asked for explicitly: the matrix route has no route row
    matrix = run(["fit", data, "-k", 4, "--kernel", "rbf", "--n-init", 20, "--no-model", "--threads", 1,
                  "--storage", "matrix"])
    assert matrix.exit_code == 0 and "route:" not in matrix.stderr
