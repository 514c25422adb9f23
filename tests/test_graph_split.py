"""The split test that ends the default graph fit (``whiten='auto'``): where the whitened
refit, the Gaussian step or the mixture changed the first fit's labels, a mixture of 2k
Gaussians (each cluster cut in two across its direction of most variance, the start of
Pelleg & Moore's X-means) is fitted by EM, and the steps are undone where it raises the
log-likelihood by more than Schwarz's BIC charges for the k extra components. Checked
against a NumPy split, scikit-learn's ``GaussianMixture`` from the same start, the rule
replayed by hand on both sides, one and two threads, the command line and the model file."""
import json
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_moons
from sklearn.metrics import adjusted_rand_score

from helpers import assert_one_error_line, labels_of, listing, run, run_process, write_csv
from test_graph_gaussian import fitted_model_arrays, reference_mixture
from test_graph_mixture import _standard, _varied
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine.graph_starts import canonical_labels
from kkmeans_cli.kernels import graph_fit
from kkmeans_cli.kernels.graph_fit import (MIXTURE_MAX_ITER, MIXTURE_RIDGE, MIXTURE_TOL,
                                           SPLIT_RATIO_MAX, SPLIT_SAMPLE,
                                           SPLIT_SAMPLE_PER_CLUSTER, fit_graph,
                                           gaussian_mixture, gaussian_step, mixture_step,
                                           split_labels, split_sample, split_test)


def _moons(seed=3, n=1500, noise=0.15):
    """Two moons that touch (noise .15), standardized, and their classes."""
    X, y = make_moons(n, noise=noise, random_state=seed)
    return _standard(X), y


def _reference_split(X, labels, k):
    """Each cluster cut at its mean across the top eigenvector of its covariance in X
    whitened by the total covariance's Cholesky factor (any whitening: they differ by a
    rotation, which turns the eigenvector with the points), as a partition into 2k."""
    L = np.linalg.cholesky(np.cov(X.T, bias=True))
    Z = np.linalg.solve(L, (X - X.mean(axis=0)).T).T
    out = 2 * np.asarray(labels)
    for c in range(k):
        rows = np.flatnonzero(labels == c)
        D = Z[rows] - Z[rows].mean(axis=0)
        top = np.linalg.eigh(D.T @ D)[1][:, -1]
        out[rows[D @ top > 0]] += 1
    return out


def _same_partition(a, b):
    return np.array_equal(canonical_labels(a), canonical_labels(b))


@pytest.mark.parametrize("data", ["moons", "varied"])
def test_split_labels_cut_each_cluster_across_its_widest_direction(data, monkeypatch):
    """The split is NumPy's, each cluster's two halves numbered 2c and 2c + 1 (which half is
    which follows an eigenvector's sign), in any blocks of rows."""
    X, y = _moons() if data == "moons" else _varied()
    k = int(y.max()) + 1
    got = split_labels(X, y, k)
    want = _reference_split(X, y, k)
    np.testing.assert_array_equal(got // 2, y)
    for c in range(k):
        rows = y == c
        assert 0 < np.count_nonzero(got[rows] % 2) < rows.sum()
        assert _same_partition(got[rows], want[rows])
    monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", 97)
    np.testing.assert_array_equal(split_labels(X, y, k), got)
    assert split_labels(np.ones((50, 2)), np.zeros(50, dtype=int), 1) is None


def _replayed_ratio(X, start, k):
    """The test's statistic by another route: scikit-learn's EM of k components from
    ``start`` and of 2k from the NumPy split (each to the mixture's tolerance), their gain
    n (L_2k − L_k) over ½ k p ln n; (ratio, passes of the 2k EM)."""
    from sklearn.exceptions import ConvergenceWarning

    n, d = X.shape
    _, _, low = reference_mixture(X, start, k)
    split = _reference_split(X, start, k)
    L = np.linalg.cholesky(np.cov(X.T, bias=True))
    Z = np.linalg.solve(L, (X - X.mean(axis=0)).T).T
    from sklearn.mixture import GaussianMixture

    eye = MIXTURE_RIDGE * np.eye(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)     # as the library: 200 at most
        gm = GaussianMixture(
            2 * k, covariance_type="full", reg_covar=MIXTURE_RIDGE, tol=MIXTURE_TOL,
            max_iter=MIXTURE_MAX_ITER, weights_init=np.bincount(split, minlength=2 * k) / n,
            means_init=np.array([Z[split == c].mean(axis=0) for c in range(2 * k)]),
            precisions_init=np.array([np.linalg.inv(np.cov(Z[split == c].T, bias=True) + eye)
                                      for c in range(2 * k)]), random_state=0).fit(Z)
    charge = 0.5 * k * (1 + d + d * (d + 1) / 2) * np.log(n)
    return n * (gm.lower_bound_ - low) / charge, gm.n_iter_


@pytest.mark.parametrize("data, seed", [("moons", 3), ("moons", 0), ("varied", 5)])
def test_the_steps_are_undone_exactly_where_bic_prefers_2k_gaussians(data, seed):
    """Replayed by hand: the first fit (one fit of the points as given), the steps after it,
    the 2k EM by scikit-learn from the NumPy split; the default keeps the steps' labels
    where the ratio is at most SPLIT_RATIO_MAX and returns the first fit's otherwise, its
    records then saying what was undone. Touching moons: the steps cut through both (and on
    seed 3 the whitened refit was kept too); varied blobs: the steps are kept."""
    X, y = _moons(seed) if data == "moons" else _varied(seed)
    k = int(y.max()) + 1
    fit = fit_graph(X, k, random_state=seed, n_threads=1)
    first = fit_graph(X, k, random_state=seed, n_threads=1, whiten=False)
    record = fit.split_test
    assert record is not None
    undo = record["ratio"] > SPLIT_RATIO_MAX
    assert record["kept"] is not undo
    assert undo is (data == "moons")                # each case runs the branch it names
    if undo:
        np.testing.assert_array_equal(fit.labels, first.labels)
        assert fit.transform is None and fit.mixture_model is None
        assert fit.ncut == first.ncut and fit.start_kinds == first.start_kinds
        assert adjusted_rand_score(y, fit.labels) > 0.9
        for name in ("whitening", "gaussian", "mixture"):
            step = getattr(fit, name)
            assert step is None or step["kept"] is False
        undone = [name for name in ("whitening", "gaussian", "mixture")
                  if (getattr(fit, name) or {}).get("undone")]
        assert "mixture" in undone and (seed != 3 or "whitening" in undone), undone
    # the mixture step's EM started from the labels the Gaussian step left: replayed from
    # the same labels the library's steps give on the fit the steps started from
    base = first if not (fit.whitening or {}).get("undone") and not \
        (fit.whitening or {}).get("kept") else None
    assert (base is None) is (seed == 3)    # replayed on both branches; seed 3 refitted
    if base is not None:
        stepped = gaussian_step(X, base, k)
        mixed = mixture_step(X, stepped, k)
        ratio, passes = _replayed_ratio(X, stepped.labels, k)
        assert record["ratio"] == pytest.approx(ratio, rel=1e-6, abs=1e-6)
        assert record["n_iter"] == passes
        # the k Gaussians without the mixture step's uniform component: the test asks
        # whether the clusters themselves are Gaussian
        assert record["log_likelihood"] == pytest.approx(
            reference_mixture(X, stepped.labels, k)[2], rel=1e-9, abs=1e-12)
        again = split_test(X, mixed, stepped.labels, base, k)
        assert again.split_test == record and record["sample"] == X.shape[0]
        np.testing.assert_array_equal(again.labels, fit.labels)
    if data == "moons":     # without the test the steps lose the moons
        import unittest.mock as mock

        with mock.patch.object(graph_fit, "SPLIT_RATIO_MAX", np.inf):
            kept = fit_graph(X, k, random_state=seed, n_threads=1)
        assert adjusted_rand_score(y, kept.labels) < 0.6 < adjusted_rand_score(y, fit.labels)


def test_a_mixture_within_its_cut_limit_on_moons_is_undone_by_the_split_test():
    """The mixture's cut limit (MIXTURE_NCUT_RATIO) lets mixtures that cut up to 10 times
    the fit's graph through (overlapping blobs gain there); on moons (.1, seed 9) the
    mixture cuts about 4 times and passes it, and the split test is what keeps the moons: 2k
    Gaussians gain far more than BIC allows, and the first fit is returned."""
    X, y = _moons(9, noise=0.1)
    fit = fit_graph(X, 2, random_state=9, n_threads=1)
    first = fit_graph(X, 2, random_state=9, n_threads=1, whiten=False)
    assert 1.0 < fit.mixture["ncut_ratio"] <= graph_fit.MIXTURE_NCUT_RATIO
    assert fit.mixture["undone"] is True and fit.mixture["kept"] is False
    assert fit.split_test["ratio"] > 5 * SPLIT_RATIO_MAX and fit.split_test["kept"] is False
    np.testing.assert_array_equal(fit.labels, first.labels)
    assert fit.mixture_model is None and adjusted_rand_score(y, fit.labels) > 0.95


def test_above_the_sample_size_the_test_reads_a_sample_drawn_from_its_seed():
    """Above SPLIT_SAMPLE points the statistic is the replay's on the rows a generator of
    the seed draws (sorted, without replacement), and another seed draws other rows."""
    X, y = _moons(0, n=3000)
    first = fit_graph(X, 2, random_state=0, n_threads=1, whiten=False)
    stepped = gaussian_step(X, first, 2)
    mixed = mixture_step(X, stepped, 2)
    got = split_test(X, mixed, stepped.labels, first, 2, seed=7)
    rows = np.sort(np.random.default_rng(7).choice(3000, SPLIT_SAMPLE, replace=False))
    ratio, passes = _replayed_ratio(X[rows], stepped.labels[rows], 2)
    assert got.split_test["sample"] == SPLIT_SAMPLE
    assert got.split_test["ratio"] == pytest.approx(ratio, rel=1e-6, abs=1e-6)
    assert got.split_test["n_iter"] == passes
    assert split_test(X, mixed, stepped.labels, first, 2, seed=8).split_test["ratio"] != \
        got.split_test["ratio"]


def _moon_pairs(pairs, per, seed):
    """``pairs`` pairs of moons (noise .1, ``per`` points a moon) side by side on a grid of
    five columns: 2·pairs clusters, and their classes."""
    X, y = [], []
    for p in range(pairs):
        Xp, yp = make_moons(2 * per, noise=0.1, random_state=seed + p)
        X.append(Xp + [3.5 * (p % 5), 2.5 * (p // 5)])
        y.append(yp + 2 * p)
    return np.vstack(X), np.concatenate(y)


def test_the_sample_keeps_a_hundred_points_a_cluster_above_fifteen_clusters():
    assert SPLIT_SAMPLE_PER_CLUSTER * 15 == SPLIT_SAMPLE == 1500
    assert [split_sample(k) for k in (1, 2, 10, 15, 16, 40, 100)] == \
        [1500, 1500, 1500, 1500, 1600, 4000, 10_000]


def test_at_thirty_clusters_the_test_reads_them_all_and_undoes_the_steps():
    """Fifteen pairs of moons (k = 30, 100 points a moon): the whitened refit and the
    Gaussian steps cut moons in half; on 1,500 points (50 a cluster) 2k Gaussians gained
    less than their charge (ratio 0.75, the steps kept: ARI 0.70), on all 3,000 more, and
    the first fit is returned."""
    X, y = _moon_pairs(15, 100, 0)
    fit = fit_graph(X, 30, random_state=0, n_threads=1)
    first = fit_graph(X, 30, random_state=0, n_threads=1, whiten=False)
    assert fit.split_test["sample"] == 3000 and fit.split_test["kept"] is False
    assert fit.split_test["ratio"] > SPLIT_RATIO_MAX
    np.testing.assert_array_equal(fit.labels, first.labels)
    assert adjusted_rand_score(y, fit.labels) > 0.95


def test_above_fifteen_clusters_the_sample_is_drawn_a_hundred_a_cluster():
    """Ten pairs of moons of 150 points a moon (k = 20, 3,000 points): the test reads
    2,000 of them, drawn as the 1,500 are at fewer clusters, and its statistic is the
    replay's on those rows."""
    X, y = _moon_pairs(10, 150, 0)
    first = fit_graph(X, 20, random_state=0, n_threads=1, whiten=False)
    stepped = gaussian_step(X, first, 20)
    mixed = mixture_step(X, stepped, 20)
    got = split_test(X, mixed, stepped.labels, first, 20, seed=7).split_test
    assert got.get("sample") == 2000, got
    rows = np.sort(np.random.default_rng(7).choice(3000, 2000, replace=False))
    ratio, passes = _replayed_ratio(X[rows], stepped.labels[rows], 20)
    assert got["ratio"] == pytest.approx(ratio, rel=1e-6, abs=1e-6)
    assert got["n_iter"] == passes


def test_no_split_test_where_the_steps_changed_nothing_or_no_mixture_was_made():
    """Two moons apart (noise .1; the mixture cuts 18.7 times the fit's cut): nothing after the
    first fit is kept, and no test is made;
    a cut of zero makes no step at all; a 2k EM that loses a component keeps the steps."""
    X, _ = _moons(2, noise=0.1)
    fit = fit_graph(X, 2, random_state=2, n_threads=1)
    assert fit.split_test is None and not fit.mixture["kept"]
    assert fit.mixture["ncut_ratio"] > 1.5 * graph_fit.MIXTURE_NCUT_RATIO
    X0, _ = _moons(3, noise=0.03)
    assert fit_graph(X0, 2, random_state=3, n_threads=1).split_test is None
    Xv, yv = _varied()
    first = fit_graph(Xv, 3, random_state=4, n_threads=1, whiten=False)
    stepped = gaussian_step(Xv, first, 3)
    mixed = mixture_step(Xv, stepped, 3)
    assert mixed.mixture["kept"]
    import unittest.mock as mock

    with mock.patch.object(graph_fit, "split_labels", lambda X, labels, k: np.where(
            np.arange(labels.size) < 2, 2 * labels + 1, 2 * labels)):
        got = split_test(Xv, mixed, stepped.labels, first, 3)
    assert got.split_test == {"kept": True, "skipped": True}
    np.testing.assert_array_equal(got.labels, mixed.labels)
    # a component of 2k collapsed as the mixture's guard has it: its density would inflate
    # L_2k, and the test is skipped
    with mock.patch.object(graph_fit, "MIXTURE_MIN_VARIANCE", 1e9):
        assert split_test(Xv, mixed, stepped.labels, first, 3).split_test == \
            {"kept": True, "skipped": True}
    assert gaussian_mixture(Xv, np.where(np.arange(yv.size) < 2, 2 * yv + 1, 2 * yv), 6) \
        is None


def test_the_sample_path_tests_the_steps_made_on_all_the_points(monkeypatch):
    """Above REFIT_SAMPLE_ABOVE distinct points the refit is decided on a sample; where it
    is not made there, the steps made on all the points are tested against the first fit
    (lowered here to reach it at 3,000 points)."""
    X, y = _moons(0, n=3000)
    monkeypatch.setattr(graph_fit, "REFIT_SAMPLE_ABOVE", 2000)
    monkeypatch.setattr(graph_fit, "REFIT_SAMPLE", 1500)
    fit = fit_graph(X, 2, random_state=0, n_threads=1)
    first = fit_graph(X, 2, random_state=0, n_threads=1, whiten=False)
    assert fit.whitening["sample"] == 1500 and fit.whitening["kept"] is False
    assert fit.split_test["kept"] is False and fit.mixture["undone"] is True
    assert fit.split_test["sample"] == SPLIT_SAMPLE
    np.testing.assert_array_equal(fit.labels, first.labels)
    assert adjusted_rand_score(y, fit.labels) > 0.9


def test_one_and_two_threads_undo_the_same_steps():
    X, _ = _moons(0, n=2400)
    one = KernelKMeans(2, random_state=0, n_threads=1).fit(X)
    two = KernelKMeans(2, random_state=0, n_threads=2).fit(X)
    assert one.fit_stats_["graph"]["split_test"]["kept"] is False
    assert one.fit_stats_["graph"]["split_test"] == two.fit_stats_["graph"]["split_test"]
    np.testing.assert_array_equal(one.labels_, two.labels_)
    np.testing.assert_array_equal(one.predict(X), one.labels_)


def test_the_command_line_says_the_steps_were_undone_and_the_model_predicts(tmp_path):
    """The report's graph row, in process and as a subprocess; the model file keeps the
    record and no mixture or whitening; predict of the training points gives the labels;
    info shows the record."""
    X, y = _moons(0)
    write_csv(tmp_path / "moons.csv", X, fmt="%.6f")
    done = run(["fit", tmp_path / "moons.csv", "-k", "2", "-o", tmp_path / "m.npz"])
    assert done.exit_code == 0, done.stderr
    assert "; Gaussian steps undone: the clusters are not Gaussian)" in done.stderr, done.stderr
    assert "Gaussian mixture kept" not in done.stderr
    assert "; whitened;" not in done.stderr and "; whitened)" not in done.stderr
    labels = labels_of(done.stdout)
    assert adjusted_rand_score(y, labels) > 0.9
    with np.load(tmp_path / "m.npz") as z:
        meta = json.loads(str(z["meta"]))
        assert not any(name.startswith("graph_mixture_") for name in z.files)
        assert "graph_transform" not in z.files
    assert meta["graph"]["split_test"]["kept"] is False
    assert meta["graph"]["split_test"]["ratio"] > SPLIT_RATIO_MAX
    assert meta["graph"]["mixture"]["undone"] is True
    shown = run(["info", tmp_path / "m.npz"])
    assert "Gaussian steps undone: the clusters are not Gaussian" in shown.stdout
    again = run(["predict", tmp_path / "m.npz", tmp_path / "moons.csv"])
    np.testing.assert_array_equal(labels_of(again.stdout), labels)
    proc = run_process(["fit", "moons.csv", "-k", "2"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "; Gaussian steps undone: the clusters are not Gaussian)" in proc.stderr
    np.testing.assert_array_equal(labels_of(proc.stdout), labels)
    # a refit kept, then undone with the steps after it (seed 3, as the API's above): the
    # row says neither 'whitened' nor that the refit was turned down
    write_csv(tmp_path / "moons3.csv", _moons(3)[0], fmt="%.6f")
    done = run(["fit", tmp_path / "moons3.csv", "-k", "2", "--seed", "3", "-o",
                tmp_path / "m3.npz"])
    assert done.exit_code == 0, done.stderr
    assert "(connectivity; Gaussian steps undone: the clusters are not Gaussian)" in \
        done.stderr, done.stderr
    with np.load(tmp_path / "m3.npz") as z:
        meta = json.loads(str(z["meta"]))
        assert "graph_transform" not in z.files
    assert meta["graph"]["whitening"]["undone"] is True
    assert meta["graph"]["whitening"]["kept"] is False and "whitened" not in meta["graph"]


def test_a_model_whose_split_record_is_damaged_is_refused(tmp_path):
    """The record is informational, but info shows it: a record that is not an object of
    numbers with a true/false 'kept' is refused by every reader, in one line, nothing
    written."""
    arrays, meta = fitted_model_arrays(tmp_path)
    assert meta["graph"]["split_test"]["kept"] is True      # varied blobs keep the steps
    for bad in ("oops", {"ratio": 0.1}, {"kept": "yes"}, {"kept": True, "x": "y"}):
        path = tmp_path / "bad.npz"
        np.savez(path, **{**arrays, "meta": np.array(json.dumps(
            {**meta, "graph": {**meta["graph"], "split_test": bad}}))})
        before = listing(tmp_path)
        for args in (["info", path], ["predict", path, tmp_path / "varied.csv"]):
            assert_one_error_line(run(args), str(path), "meta 'graph.split_test'", code=1)
            assert listing(tmp_path) == before
