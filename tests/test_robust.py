"""Hostile numbers and degenerate data: values whose kernel overflows floating point, fewer
distinct points than clusters, huge k ranges, the silhouette's route and memory plan, and
ties on duplicated data (``predict(X_fit) == labels_``).

Every refusal is checked for its message, its exit code and the files it leaves (none).
"""
import contextlib
import os
import re
import time
import warnings

import numpy as np
import pytest

from helpers import (FAST, assert_one_error_line, gaussian, labels_of, run, run_process,
                     square_grid, write_csv)
from kkmeans_cli import KernelKMeans
from kkmeans_cli.errors import (DataError, KKMeansError, KKMeansWarning, TooFewDistinctPointsError,
                                ValueRangeError)
from kkmeans_cli.kernels.functions import FLOAT_MAX, check_range, count_distinct
from kkmeans_cli.model.sweep import parse_ks, sweep
from kkmeans_cli.model import planning as estimator_module
from kkmeans_cli.memory import plan


def _write(path, X, fmt="%.6g"):
    """Two columns x, y in ``fmt`` (%g keeps values far beyond %.4f's range)."""
    return write_csv(path, X, header=("x", "y"), fmt=fmt)


# -- values whose kernel cannot be computed in floating point -------------------------------
@pytest.mark.parametrize("big", [1e200, 1e308, -1e250])
def test_cli_fit_refuses_values_that_overflow_with_row_and_column(tmp_path, big):
    X = gaussian(30, 2, decimals=4)
    X[2, 1] = big
    data = _write(tmp_path / "big.csv", X, fmt="%.17g")
    for outputs in (["-o", tmp_path / "m.npz", "--labels", tmp_path / "l.txt",
                     "--summary", tmp_path / "s.json"], ["--no-model"]):
        result = run(["fit", "--kernel", "rbf", data, "-k", 2, *outputs, *FAST])
        assert result.exit_code == 1
        assert result.stdout == ""
        assert_one_error_line(result, "row 3, column y", "too large for floating point",
                              "4·‖x‖² must stay below 1.8e+308")
    assert sorted(os.listdir(tmp_path)) == ["big.csv"]


def test_cli_predict_names_the_value_in_the_data_where_the_model_scaled_it(tmp_path):
    """A column spread 1e-300 in training, standardized by the model, makes a new 1 into
    1e300: the message gave only the scaled value, which DATA does not hold."""
    rng = np.random.default_rng(3)
    X = np.c_[np.r_[rng.normal(0, 1, 40), rng.normal(10, 1, 40)], rng.normal(0, 1e-300, 80)]
    data = _write(tmp_path / "x.csv", X, fmt="%.17g")
    fitted = run(["fit", data, "-k", 2, "--scale", "standard", "-o", tmp_path / "m.npz", "-q"])
    assert fitted.exit_code == 0
    result = run(["predict", tmp_path / "m.npz", "-", "--labels", tmp_path / "l.txt"],
                 input="x,y\n0,1\n")
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "row 1, column y", "too large for floating point",
                          "(the value is DATA's 1 after --scale standard)")
    assert sorted(os.listdir(tmp_path)) == ["m.npz", "x.csv"]


@pytest.mark.parametrize("kernel,rule", [
    ("linear", "4·‖x‖²·m²"), ("laplacian", "2·Σ|x_j|"), ("poly", "4·‖x‖²"),
    ("cosine", "squared norms"), ("sigmoid", "squared norms")])
def test_cli_fit_states_the_rule_of_each_kernel(tmp_path, kernel, rule):
    X = gaussian(30, 2, decimals=4)
    X[4, 0] = 1e308 if kernel == "laplacian" else 1e200
    result = run(["fit", _write(tmp_path / "big.csv", X, "%.17g"), "-k", 2, "--kernel",
                  kernel, "--no-model", *FAST])
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "row 5, column x", rule)


def test_fit_refusal_as_a_subprocess_leaks_no_numpy_warning(tmp_path):
    X = gaussian(30, 2, decimals=4)
    X[0, 0] = 1e300
    _write(tmp_path / "big.csv", X, "%.17g")
    result = run_process(["fit", "--kernel", "rbf", "big.csv", "-k", "2", "-q", "-o", "m.npz"], tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    assert_one_error_line(result, "big.csv: row 1, column x")
    assert sorted(os.listdir(tmp_path)) == ["big.csv"]


def test_text_values_beyond_float_are_refused_by_the_reader(tmp_path):
    (tmp_path / "inf.csv").write_text("x,y\n1,2\n3,1e400\n4,5\n")
    result = run(["fit", "--kernel", "rbf", tmp_path / "inf.csv", "-k", 2, "--no-model", *FAST])
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "infinite value")


def test_sweep_refuses_overflowing_values_and_writes_no_table(tmp_path):
    X = gaussian(40, 2, decimals=4)
    X[7, 1] = 1e200
    data = _write(tmp_path / "big.csv", X, "%.17g")
    result = run(["sweep", "--kernel", "rbf", data, "--k", "2..4", "--table", tmp_path / "t.csv",
                  "-o", tmp_path / "m.npz", *FAST])
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "row 8, column y", "too large")
    assert sorted(os.listdir(tmp_path)) == ["big.csv"]


def test_predict_refuses_new_rows_that_overflow(tmp_path):
    X = gaussian(30, 2, decimals=4)
    fitted = run(["fit", "--kernel", "rbf", _write(tmp_path / "d.csv", X), "-k", 2, "-o", tmp_path / "m.npz",
                  "-q", *FAST])
    assert fitted.exit_code == 0, fitted.stderr
    new = X[:5].copy()
    new[3, 0] = 1e200
    result = run(["predict", tmp_path / "m.npz", _write(tmp_path / "new.csv", new, "%.17g"),
                  "--labels", tmp_path / "l.txt", "--distances", tmp_path / "dist.csv"])
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "new.csv: row 4, column x", "too large")
    assert sorted(os.listdir(tmp_path)) == ["d.csv", "m.npz", "new.csv"]


def test_scale_standard_makes_huge_data_usable(tmp_path):
    # Moments computed on X / max|x|: no overflow, no NumPy warning even with --quiet, and a
    # model that info and predict accept.
    X = gaussian(30, 2, decimals=4) * 1e200
    data = _write(tmp_path / "big.csv", X, "%.17g")
    result = run(["fit", "--kernel", "rbf", data, "-k", 2, "--scale", "standard", "-o", tmp_path / "m.npz",
                  "-q", *FAST])
    assert result.exit_code == 0 and result.stderr == ""
    scaled = run(["fit", "--kernel", "rbf", _write(tmp_path / "small.csv", X / 1e200, "%.17g"), "-k", 2,
                  "--scale", "standard", "--no-model", "-q", *FAST])
    assert np.array_equal(labels_of(result.stdout), labels_of(scaled.stdout))
    assert run(["info", tmp_path / "m.npz"]).exit_code == 0
    predicted = run(["predict", tmp_path / "m.npz", data, "-q"])
    assert predicted.exit_code == 0 and predicted.stderr == ""
    assert np.array_equal(labels_of(predicted.stdout), labels_of(result.stdout))
    proc = run_process(["fit", "--kernel", "rbf", "big.csv", "-k", "2", "--scale", "standard", "--no-model",
                        "-q", "--threads", "1"], tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""


def test_scale_standard_of_tiny_data_is_not_a_constant_column():
    from kkmeans_cli.io.scaling import fit_scaler

    X = gaussian(30, 2, decimals=4)
    tiny = fit_scaler(X * 1e-200, "standard")
    plain = fit_scaler(X, "standard")
    np.testing.assert_allclose(tiny.factor * 1e200, plain.factor, rtol=1e-12)
    np.testing.assert_allclose(tiny.transform(X * 1e-200), plain.transform(X), atol=1e-12)


def test_scale_minmax_refuses_a_column_wider_than_floating_point(tmp_path):
    X = gaussian(30, 2, decimals=4)
    X[0, 1], X[1, 1] = 1.5e308, -1.5e308
    result = run(["fit", "--kernel", "rbf", _write(tmp_path / "wide.csv", X, "%.17g"), "-k", 2, "--scale",
                  "minmax", "-o", tmp_path / "m.npz", *FAST])
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "--scale minmax: column 2 spans", "wider than floating point")
    assert not (tmp_path / "m.npz").exists()


def test_predict_refuses_rows_that_the_scaling_sends_to_infinity(tmp_path):
    X = gaussian(30, 2, decimals=4) * 1e-200  # moments without underflow: factor ~1e-200, not 1
    fitted = run(["fit", "--kernel", "rbf", _write(tmp_path / "d.csv", X, "%.17g"), "-k", 2, "--scale",
                  "standard", "-o", tmp_path / "m.npz", "-q", *FAST])
    assert fitted.exit_code == 0, fitted.stderr
    new = np.array([[1e120, 0.0]])
    result = run(["predict", tmp_path / "m.npz", _write(tmp_path / "n.csv", new, "%.17g"),
                  "--distances", tmp_path / "dist.csv"])
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "row 1, column x", "inf after --scale standard")
    assert not (tmp_path / "dist.csv").exists()


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid", "cosine", "laplacian",
                                    "chi2"])
def test_estimator_refuses_overflow_with_row_and_column(kernel):
    X = np.abs(gaussian(30, 2, decimals=4)) if kernel == "chi2" else gaussian(30, 2, decimals=4)
    X[6, 1] = 1e308 if kernel == "laplacian" else 1e200
    with pytest.raises(ValueRangeError, match=r"X row 6, column 1: the value 1e\+\d+ is too "
                                              r"large for floating point") as e:
        KernelKMeans(2, kernel=kernel, n_init=1, random_state=0).fit(X)
    assert isinstance(e.value, ValueError) and isinstance(e.value, KKMeansError)
    assert (e.value.row, e.value.column) == (6, 1)
    psd_warning = (pytest.warns(KKMeansWarning, match="not positive semidefinite")
                   if kernel == "sigmoid" else contextlib.nullcontext())
    with psd_warning:
        fitted = KernelKMeans(2, kernel=kernel, n_init=1, random_state=0).fit(X[:6])
    with pytest.raises(ValueRangeError, match="X row 0, column 1"):
        fitted.predict(X[6:7])


def test_precomputed_kernels_refuse_entries_whose_sums_overflow():
    K = np.eye(4) + 1.0
    K[1, 2] = K[2, 1] = 1e307
    with pytest.raises(ValueRangeError, match="4·m²·|K_ij|"):
        KernelKMeans(2, kernel="precomputed", n_init=1).fit(K)
    D = np.ones((4, 4)) - np.eye(4)
    D[0, 3] = D[3, 0] = 1e153
    with pytest.raises(ValueRangeError, match="16·m²·D_ij²"):
        KernelKMeans(2, kernel="precomputed-distance", n_init=1).fit(D)


def test_the_linear_rule_counts_the_total_weight():
    # 4·‖x‖²·m² < 1.8e308: the largest norm allowed falls as the total weight grows.
    n = 10
    limit = np.sqrt(FLOAT_MAX / (4.0 * n * n))
    ok = np.zeros((n, 1))
    ok[0, 0] = 0.99 * limit
    check_range("linear", ok, n)
    with pytest.raises(ValueRangeError, match="m = 1000"):
        check_range("linear", ok, 1000.0)
    ok[0, 0] = 1.01 * limit
    with pytest.raises(ValueRangeError):
        check_range("linear", ok, n)
    check_range("rbf", ok, n)  # rbf values are at most 1: only 4·‖x‖² counts


def test_weights_whose_sums_overflow_are_refused(tmp_path):
    X = gaussian(30, 2, decimals=4)
    w = np.full(30, 1e153)  # (Σw)² = 9e308
    with pytest.raises(DataError, match=r"sample_weight sums to 3e\+154: 4·\(Σw\)² must stay"):
        KernelKMeans(2, kernel="rbf", n_init=1).fit(X, sample_weight=w)
    est = KernelKMeans(2, kernel="rbf", n_init=1, random_state=0).fit(X, sample_weight=w / 1e153)
    assert np.isfinite(est.inertia_)
    np.savetxt(tmp_path / "w.txt", w)
    result = run(["fit", "--kernel", "rbf", _write(tmp_path / "d.csv", X), "-k", 2, "--weights",
                  tmp_path / "w.txt", "-o", tmp_path / "m.npz", *FAST])
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "w.txt: sums to 3e+154", "only their ratios matter")
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("scale, message", [
    (1e80, "sums to 2.4e+81: 4·(Σw)⁴ must stay below 1.8e+308 (the normalized cut weighs a "
           "point by its weight times its degree"),
    (1e-90, "sums to 2.4e-89: (Σw)⁴ must stay above 2.23e-308"),
])
def test_ncut_weights_whose_fourth_power_leaves_floating_point_are_refused(tmp_path, scale,
                                                                           message):
    """The normalized cut weighs a point by u_i·d_i: with all weights 1e80 it overflowed
    (raw NumPy warnings, clusters of 147, 2 and 1, exit 0), with 1e-90 'the data's kernel
    values overflow'. Refused, naming the weights; 1e60 fits as 1 does."""
    X = np.vstack([np.random.default_rng(0).normal(c, 0.5, size=(8, 2))
                   for c in [(0, 0), (4, 4), (0, 4)]])
    with pytest.raises(DataError, match=re.escape("sample_weight " + message)):
        KernelKMeans(3, kernel="rbf", objective="ncut").fit(X, sample_weight=np.full(24, scale))
    np.savetxt(tmp_path / "w.txt", np.full(24, scale))
    result = run(["fit", "--kernel", "rbf", _write(tmp_path / "d.csv", X), "-k", 3,
                  "--objective", "ncut", "--weights", tmp_path / "w.txt", "--no-model"])
    assert_one_error_line(result, "w.txt: " + message, code=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one = KernelKMeans(3, kernel="rbf", objective="ncut", random_state=0).fit(X)
        big = KernelKMeans(3, kernel="rbf", objective="ncut", random_state=0).fit(
            X, sample_weight=np.full(24, 1e60))
    np.testing.assert_array_equal(one.labels_, big.labels_)


def test_a_fit_near_the_limit_stays_finite():
    X = gaussian(20, 2, decimals=4) * 1e150
    est = KernelKMeans(2, kernel="linear", n_init=2, random_state=0).fit(X)
    assert np.isfinite(est.inertia_) and np.all(np.isfinite(est.inner_sums_))
    assert np.all(np.isfinite(est.transform(X)))


# -- fewer distinct points than clusters --------------------------------------------------------
def test_cli_refuses_fewer_distinct_points_than_k(tmp_path):
    data = _write(tmp_path / "same.csv", np.full((50, 2), 1.5))
    t0 = time.perf_counter()
    result = run(["fit", "--kernel", "rbf", data, "-k", 2, "-o", tmp_path / "m.npz", "--labels",
                  tmp_path / "l.txt", *FAST])
    assert time.perf_counter() - t0 < 10  # at once, not after 300 iterations
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "the data have 1 distinct point (of positive weight), fewer "
                                  "than the 2 clusters asked for; k can be at most 1",
                          "use a smaller -k")
    assert sorted(os.listdir(tmp_path)) == ["same.csv"]
    proc = run_process(["fit", "--kernel", "rbf", "same.csv", "-k", "2", "--no-model"], tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("kkmeans: error: same.csv: the data have 1 distinct")
    ok = run(["fit", "--kernel", "rbf", data, "-k", 1, "--no-model", "-q", *FAST])
    assert ok.exit_code == 0 and set(labels_of(ok.stdout)) == {0}


def test_cli_counts_only_points_of_positive_weight(tmp_path):
    X = np.repeat(np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]]), 4, axis=0)
    weights = np.where(np.arange(12) >= 8, 0.0, 1.0)  # the third point weighs nothing
    np.savetxt(tmp_path / "w.txt", weights)
    result = run(["fit", "--kernel", "rbf", _write(tmp_path / "d.csv", X), "-k", 3, "--weights",
                  tmp_path / "w.txt", "--no-model", *FAST])
    assert result.exit_code == 1
    assert_one_error_line(result, "2 distinct points (of positive weight)")


def test_sweep_skips_ks_above_the_distinct_points(tmp_path):
    X = np.repeat(np.array([[0.0, 0.0], [3.0, 3.0]]), [30, 21], axis=0)
    data = _write(tmp_path / "two.csv", X)
    result = run(["sweep", "--kernel", "rbf", data, "--k", "2..4", "-o", tmp_path / "m.npz", *FAST])
    assert result.exit_code == 0, result.stderr
    assert "kkmeans: warning: k = 3, 4 skipped: the data have only 2 distinct points" in \
        result.stderr
    rows = result.stdout.splitlines()
    assert len(rows) == 2 and rows[1].startswith("2,")
    assert "chosen k:   2" in result.stderr and "(1 k)" in result.stderr
    info = run(["info", tmp_path / "m.npz", "--json"])
    assert '"n_clusters": 2' in info.stdout
    same = _write(tmp_path / "same.csv", np.full((50, 2), 1.5))
    refused = run(["sweep", "--kernel", "rbf", same, "--k", "2..4", "--table", tmp_path / "t.csv", *FAST])
    assert refused.exit_code == 1 and refused.stdout == ""
    # ("use a smaller --k" led nowhere: a sweep's ks start at 2)
    assert_one_error_line(refused, "1 distinct point", "k can be at most 1; a sweep's ks "
                                                        "start at 2, so these data cannot be "
                                                        "swept")
    assert not (tmp_path / "t.csv").exists()


def test_sweep_api_never_scores_or_chooses_skipped_ks():
    X = np.repeat(np.array([[0.0, 0.0], [3.0, 3.0], [0.0, 3.0]]), 10, axis=0)
    with pytest.warns(KKMeansWarning, match=r"k = 4\.\.6 skipped: the data have only 3"):
        res = sweep(X, [2, 3, 4, 5, 6], kernel="rbf", random_state=0, n_init=2, n_threads=1)
    assert [r["k"] for r in res.rows] == [2, 3] and res.skipped_ks == [4, 5, 6]
    assert res.best_k == 3  # the three points: silhouette 1
    with pytest.raises(TooFewDistinctPointsError):
        sweep(np.ones((10, 2)), [2, 3], kernel="rbf", random_state=0, n_init=1, n_threads=1)


def test_count_distinct():
    X = np.array([[0.0, 1.0], [-0.0, 1.0], [1.0, 2.0], [2.0, 4.0]])
    assert count_distinct(X, 10) == 3            # −0.0 is 0.0
    assert count_distinct(X, 10, name="cosine") == 2   # x and 2x are one point
    assert count_distinct(X, 10, weights=np.array([1, 1, 0, 1.0])) == 2
    assert count_distinct(np.repeat(X, 100, axis=0), 2) >= 2


# -- k ranges, the silhouette's route, memory plans ----------------------------------------------
def test_huge_k_range_is_checked_before_it_is_expanded(tmp_path):
    data = _write(tmp_path / "d.csv", gaussian(40, 2, decimals=4))
    t0 = time.perf_counter()
    result = run(["sweep", "--kernel", "rbf", data, "--k", "2..99999999999", "--table", tmp_path / "t.csv",
                  *FAST])
    assert time.perf_counter() - t0 < 10
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "k = 99999999999 is too large for 40 rows")
    assert not (tmp_path / "t.csv").exists()
    proc = run_process(["sweep", "--kernel", "rbf", "d.csv", "--k", "2,5..99999999999"], tmp_path)
    assert proc.returncode == 1 and "k = 99999999999 is too large" in proc.stderr
    with pytest.raises(ValueError, match="k = 99999999999 is above the largest k"):
        parse_ks("2..99999999999", max_k=39)
    with pytest.raises(ValueError, match="above the largest k possible here, 39"):
        sweep(gaussian(40, 2, decimals=4), "2..99999999999", kernel="rbf")
    with pytest.raises(ValueError, match="between 2 and n_samples - 1 = 39"):
        sweep(gaussian(40, 2, decimals=4), range(2, 10**11), kernel="rbf")


def test_silhouette_of_a_blocked_start_never_builds_the_kernel_matrix(tmp_path, monkeypatch):
    # A one-start fit that starts blocked (storage auto, made to apply to small data here)
    # scores the silhouette on kernel rows recomputed in blocks, with the same value.
    monkeypatch.setattr(estimator_module, "LAZY_MIN_N", 50)
    data = write_csv(tmp_path / "d.csv", gaussian(300, 2, seed=3, decimals=4))
    built = []
    original = KernelKMeans.kernel_matrix
    monkeypatch.setattr(KernelKMeans, "kernel_matrix",
                        lambda self, X: built.append(1) or original(self, X))
    blocked = run(["fit", "--kernel", "rbf", data, "-k", 3, "--n-init", 1, "--silhouette", "--no-model",
                   "--threads", 1])
    assert blocked.exit_code == 0, blocked.stderr
    assert built == []
    # The time line names a matrix only when the fit built one itself (after its blocked
    # iterations, which happens on this small data depending on the iteration count), never
    # the 0 s of a matrix given to the fit ("kernel matrix 0.000 s, iterations").
    assert "kernel matrix 0.000 s, " not in blocked.stderr
    assert "no kernel matrix" in blocked.stderr or "built after blocked" in blocked.stderr
    shared = run(["fit", "--kernel", "rbf", data, "-k", 3, "--n-init", 1, "--storage", "matrix", "--silhouette",
                  "--no-model", "--threads", 1, "--json"])
    assert shared.exit_code == 0 and built == [1]
    import json
    summary = json.loads(shared.stdout)
    assert summary["silhouette"] == pytest.approx(
        float(blocked.stderr.split("silhouette:")[1].split()[0]), abs=1e-4)


def test_memory_plan_counts_the_route_that_runs():
    # A silhouette after a blocked fit needs the larger of the two, not their sum.
    fit_only = plan(21000, 5, storage="blocked")
    with_score = plan(21000, 5, storage="blocked", silhouette="silhouette",
                      silhouette_after=True)
    sample = 10_000 * 10_000 * 8
    assert with_score.total == max(fit_only.total, sample + 3 * 10_000 * 5 * 8)
    assert with_score.total < 1 << 30
    summed = plan(21000, 5, storage="matrix", silhouette="silhouette")
    assert summed.alternatives["--storage blocked"] > with_score.total


def test_fit_blocked_silhouette_fits_the_memory_the_plan_names(tmp_path):
    data = write_csv(tmp_path / "d.csv", gaussian(21000, 2, seed=1, decimals=4))
    refused = run(["fit", "--kernel", "rbf", data, "-k", 3, "--n-init", 1, "--silhouette", "--memory-limit",
                   "700M", "--storage", "blocked", "--no-model", "--threads", 1])
    assert refused.exit_code == 1 and refused.stdout == ""
    assert_one_error_line(refused, "needs 764 MiB", "silhouette sample after the fit")
    # storage auto: K (3.5 GB) does not fit 1G, the blocked route does and is taken
    auto = run(["fit", "--kernel", "rbf", data, "-k", 3, "--n-init", 1, "--silhouette", "--memory-limit", "1G",
                "--no-model", "--threads", 1])
    assert auto.exit_code == 0, auto.stderr
    assert "route:" in auto.stderr and "more than the limit of 1 GiB" in auto.stderr
    assert "no kernel matrix" in auto.stderr
    # ... and below the blocked route's need no exact route fits: refused, Nyström named
    none = run(["fit", "--kernel", "rbf", data, "-k", 3, "--n-init", 1, "--silhouette", "--memory-limit",
                "700M", "--no-model", "--threads", 1])
    assert none.exit_code == 1 and none.stdout == ""
    assert_one_error_line(none, "not enough memory", "--approx nystroem")


def test_sweep_memory_refusal_only_suggests_what_sweep_accepts(tmp_path):
    data = write_csv(tmp_path / "d.csv", gaussian(3000, 2, seed=2, decimals=4))
    result = run(["sweep", "--kernel", "rbf", data, "--k", "2..3", "--memory-limit", "20M", *FAST])
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result, "not enough memory", "--approx nystroem")
    assert "--storage blocked" not in result.stderr


# -- ties on duplicated data: predict(X_fit) == labels_ ---------------------------------------
@pytest.mark.parametrize("storage", ["matrix", "blocked"])
@pytest.mark.parametrize("kernel,gamma", [("rbf", 0.3), ("linear", None), ("laplacian", 0.5)])
def test_predict_on_duplicated_training_data_returns_labels(storage, kernel, gamma):
    # A grid (distances tie everywhere), every point three times, k up to the distinct points.
    X = square_grid(4, copies=3)
    kw = {} if gamma is None else {"gamma": gamma}
    for k in (2, 3, 5, 16):
        for seed in range(2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", KKMeansWarning)
                est = KernelKMeans(k, kernel=kernel, storage=storage, n_init=2,
                                   random_state=seed, n_threads=1, **kw).fit(X)
            assert est.converged_
            np.testing.assert_array_equal(est.predict(X), est.labels_)
            one_by_one = [est.predict(X[i:i + 1])[0] for i in range(0, len(X), 7)]
            np.testing.assert_array_equal(one_by_one, est.labels_[::7])


def test_an_exact_tie_goes_to_the_lowest_cluster_in_fit_and_predict():
    # 1-D linear kernel: clusters {-2, 0} (centre -1) and {1}; the point 0 is at squared
    # distance 1 from both centres, exactly (copies 10, 10, 20: the mean the linear kernel
    # subtracts is 0, so the products stay exact).
    X = np.repeat(np.array([[-2.0], [0.0], [1.0]]), [10, 10, 20], axis=0)
    start = np.repeat([0, 0, 1], [10, 10, 20])
    est = KernelKMeans(2, kernel="linear", init=start, random_state=0).fit(X)
    assert est.converged_
    np.testing.assert_array_equal(est.labels_, start)  # the tie kept in cluster 0
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    D = est.transform(X)
    assert D[10, 0] == D[10, 1] == 1.0
    swapped = KernelKMeans(2, kernel="linear", init=1 - start, random_state=0).fit(X)
    # Cluster 1 holds {-2, 0} now: the tied point goes to cluster 0, in fit and in predict.
    assert swapped.converged_ and np.all(swapped.labels_[10:20] == 0)
    np.testing.assert_array_equal(swapped.predict(X), swapped.labels_)


def test_as_many_clusters_as_distinct_points():
    # 5 distinct points × 20 copies: k = 5 is the exact partition; k = 8 is refused.
    P = np.random.default_rng(7).normal(size=(5, 2))
    X = np.repeat(P, 20, axis=0)
    est = KernelKMeans(5, kernel="rbf", random_state=0, n_init=3).fit(X)
    assert est.converged_ and est.inertia_ == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    with pytest.raises(TooFewDistinctPointsError, match="5 distinct points.*8 clusters"):
        KernelKMeans(8, kernel="rbf", random_state=0).fit(X)


def test_what_the_refused_sklearn_weight_checks_hold():
    # scikit-learn's weight checks fit k = 8 on 4 distinct points (refused); with k at most
    # the distinct points: wrong weight shapes are refused and the weights are not written to.
    X = np.repeat(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), 4, axis=0)
    w = np.arange(1.0, 17.0)
    kept = w.copy()
    KernelKMeans(4, kernel="rbf", n_init=2, random_state=0).fit(X, sample_weight=w)
    np.testing.assert_array_equal(w, kept)
    for bad in (np.ones(15), np.ones((16, 1)), np.ones((4, 4))):
        with pytest.raises(ValueError, match="sample_weight"):
            KernelKMeans(4, kernel="rbf", n_init=1).fit(X, sample_weight=bad)


@pytest.mark.parametrize("name", ["linear", "rbf", "poly", "laplacian", "chi2", "sigmoid",
                                  "cosine", "precomputed", "precomputed-distance"])
def test_the_range_check_shortcut_never_passes_a_row_the_full_check_refuses(name):
    # check_range first bounds every |x_ij − offset_j| by the extremes of X (and the offset);
    # when that bound keeps the rule it returns without looking at the rows. Over magnitudes
    # from far below to far above each limit, whenever the full row-by-row check refuses,
    # check_range refuses too, with the same message.
    from kkmeans_cli.kernels import functions as kf

    rng = np.random.default_rng(7)
    kernel = kf.Kernel("poly", gamma=0.5, degree=3, coef0=1.0) if name == "poly" else None
    refused = 0
    for exponent in np.linspace(0, 308, 120):
        for d in (1, 7):
            X = rng.random((5, d)) * 10.0 ** exponent
            if name != "chi2":
                X *= rng.choice([-1.0, 1.0], size=X.shape)
            offset = (rng.random(d) * 10.0 ** exponent
                      if name in ("rbf", "linear") and exponent % 2 < 1 else None)
            m = float(rng.choice([5.0, 1e6]))
            try:
                kf._check_rows(name, X, m, kernel, "X", offset)
                full = None
            except ValueRangeError as exc:
                full = str(exc)
            b = max(float(X.max()), -float(X.min())) + (
                0.0 if offset is None else float(np.abs(offset).max()))
            if kf._within_limits(name, b, d, m, kernel):
                assert full is None, (exponent, d)
            try:
                check_range(name, X, m, kernel=kernel, offset=offset)
                short = None
            except ValueRangeError as exc:
                short = str(exc)
            assert short == full
            refused += full is not None
    assert refused > 0  # the sweep reaches every kernel's limit


@pytest.mark.parametrize("coef0", [0.0, 1.0, 1e120])
def test_all_zero_data_keep_the_poly_rule_of_coef0(coef0):
    # At x = 0 the poly kernel is coef0^degree: a large coef0 overflows its sums even though
    # every value is 0, so the shortcut must not pass all-zero data without that term.
    from kkmeans_cli.kernels import functions as kf

    kernel = kf.Kernel("poly", gamma=1.0, degree=3, coef0=coef0)
    X = np.zeros((4, 2))
    if coef0 > 1e100:
        # No data could keep that rule: the parameters are at fault (a usage error naming
        # them), not a value of X.
        from kkmeans_cli.errors import OptionConflictError

        with pytest.raises(OptionConflictError, match=r"coef0=1e\+120 with degree=3: "
                                                      r"4·m²·\|coef0\|\^degree overflows"):
            check_range("poly", X, 4.0, kernel=kernel)
    else:
        check_range("poly", X, 4.0, kernel=kernel)
    for name in ("linear", "rbf", "laplacian", "chi2", "precomputed", "precomputed-distance"):
        check_range(name, X, 4.0)
