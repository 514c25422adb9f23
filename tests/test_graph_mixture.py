"""The mixture step of the default graph fit (``whiten='auto'``): the EM of a Gaussian
mixture with a covariance and a weight per component (Dempster, Laird & Rubin 1977),
started from the labels the Gaussian step left, its labels kept only where their normalized
cut of the fit's graph stays within 2 times the fit's; predict then labels new points by the
mixture. Checked against scikit-learn's ``GaussianMixture`` from the same start, SciPy's
densities, the rule replayed by hand where it is kept, turned down and skipped, one and two
threads, the model file and its damaged arrays."""
import json

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_circles, make_moons

from helpers import assert_one_error_line, labels_of, listing, run, run_process, write_csv
from test_graph_gaussian import fitted_model_arrays, reference_mixture, replayed_mixture
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine.graph import normalized_cut
from kkmeans_cli.kernels import graph_fit
from kkmeans_cli.kernels.graph_fit import (MIXTURE_NCUT_RATIO, fit_graph, gaussian_mixture,
                                           gaussian_step, mixture_step)


def _varied(seed=4, n=1500):
    """Blobs of spreads 1, 2.5 and 0.5 (scikit-learn's clustering gallery, 'varied'),
    standardized."""
    X, y = make_blobs(n, centers=3, cluster_std=[1.0, 2.5, 0.5], random_state=seed)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def _standard(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)


@pytest.mark.parametrize("seed", [4, 5, 0])
def test_the_em_is_scikit_learns_gaussian_mixture(seed, monkeypatch):
    """The same passes, labels and mean log-likelihood as ``GaussianMixture`` started from
    the same labels; in blocks of 7 rows the same labels and passes (sums in another order),
    and on 1, 2 and 4 threads the same mixture to the bit."""
    X, _ = _varied(seed)
    start = fit_graph(X, 3, random_state=seed, n_threads=1, whiten=False).labels
    mixture, passes, log_likelihood = gaussian_mixture(X, start, 3)
    labels, _ = mixture.labels(X)
    want, want_passes, want_log_likelihood = reference_mixture(X, start, 3)
    assert passes == want_passes > 1
    np.testing.assert_array_equal(labels, want)
    assert log_likelihood == pytest.approx(want_log_likelihood, rel=1e-9, abs=1e-12)
    assert not np.array_equal(labels, start)            # it moved points
    monkeypatch.setattr(graph_fit, "SCATTER_BLOCK_ROWS", 7)
    small = gaussian_mixture(X, start, 3)
    assert small[1] == passes and small[2] == pytest.approx(log_likelihood, rel=1e-12)
    np.testing.assert_array_equal(small[0].labels(X)[0], labels)
    for threads in (2, 4):
        again = gaussian_mixture(X, start, 3, n_threads=threads)
        assert again[1:] == small[1:]
        for name, value in small[0].arrays().items():
            np.testing.assert_array_equal(again[0].arrays()[name], value)


def test_the_mixture_is_affine_invariant_and_its_costs_are_scipys_densities():
    """X·A + b gives the same labels; a component's cost is −2 ln(w_c N(z; μ_c, S_c)) but
    for the constant d ln 2π (SciPy's density in the mixture's coordinates)."""
    from scipy.stats import multivariate_normal

    X, y = _varied(5)
    start = fit_graph(X, 3, random_state=5, n_threads=1, whiten=False).labels
    mixture, _, _ = gaussian_mixture(X, start, 3)
    labels, costs = mixture.labels(X, want_costs=True)
    A = np.array([[3.0, 1.0], [-2.0, 0.5]])
    moved, _, _ = gaussian_mixture(X @ A + [7.0, -4.0], start, 3)
    np.testing.assert_array_equal(moved.labels(X @ A + [7.0, -4.0])[0], labels)
    Z = mixture.coordinates(X)
    for c in range(3):
        precision = mixture.maps[c] @ mixture.maps[c].T
        S = np.linalg.inv(precision)
        log_weight = (np.linalg.slogdet(S)[1] - mixture.consts[c]) / 2
        density = multivariate_normal(mixture.means[c], S).logpdf(Z)
        np.testing.assert_allclose(costs[:, c], -2 * (log_weight + density)
                                   - 2 * np.log(2 * np.pi), rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(labels, np.argmin(costs, axis=1))
    weights = np.exp([(np.linalg.slogdet(np.linalg.inv(m @ m.T))[1] - k) / 2
                      for m, k in zip(mixture.maps, mixture.consts)])
    assert weights.sum() == pytest.approx(1.0, rel=1e-9)


def test_the_step_is_kept_exactly_where_the_cut_allows():
    """Replayed by hand: kept on overlapping blobs (its cut within 2 times the fit's, its
    sums, cut and objective those of its labels on the graph), turned down on two moons
    (the ellipsoids cut through both), skipped on two rings (one component swallows the
    other: a cluster of d points or fewer), not tried on a cut of zero."""
    X, _ = _varied()
    fit = gaussian_step(X, fit_graph(X, 3, random_state=4, n_threads=1, whiten=False), 3)
    want, keep, ratio = replayed_mixture(X, fit.graph, fit.labels, fit.ncut, 3)
    got = mixture_step(X, fit, 3)
    assert keep and got.mixture["kept"] is True and got.mixture_model is not None
    np.testing.assert_array_equal(got.labels, want)
    assert got.mixture["ncut_ratio"] == pytest.approx(ratio, rel=1e-9)
    assert 1.0 < ratio <= MIXTURE_NCUT_RATIO
    assert got.ncut == pytest.approx(normalized_cut(fit.graph.affinity, got.node_labels),
                                     rel=1e-9)
    assert got.objective - got.ncut == pytest.approx(fit.objective - fit.ncut, rel=1e-9)
    np.testing.assert_array_equal(got.sums.vol, np.bincount(
        got.node_labels, weights=fit.kernel.degrees, minlength=3))
    # two moons: turned down, the fit's labels and cut as they were
    M = _standard(make_moons(1500, noise=0.1, random_state=3)[0])
    fit = fit_graph(M, 2, random_state=4, n_threads=1, whiten=False)
    want, keep, ratio = replayed_mixture(M, fit.graph, fit.labels, fit.ncut, 2)
    got = mixture_step(M, fit, 2)
    assert not keep and ratio > 2 * MIXTURE_NCUT_RATIO
    assert got.mixture["kept"] is False and got.mixture_model is None
    assert got.mixture["ncut_ratio"] == pytest.approx(ratio, rel=1e-9)
    np.testing.assert_array_equal(got.labels, fit.labels)
    assert got.ncut == fit.ncut
    # two rings: one component takes both
    C = _standard(make_circles(1500, factor=0.5, noise=0.1, random_state=1)[0])
    fit = fit_graph(C, 2, random_state=1, n_threads=1, whiten=False)
    assert replayed_mixture(C, fit.graph, fit.labels, fit.ncut, 2)[1:] == (False, None)
    got = mixture_step(C, fit, 2)
    assert got.mixture == {"kept": False, "skipped": True}
    np.testing.assert_array_equal(got.labels, fit.labels)
    # a cut of zero: the graph's exact answer
    B, _ = make_blobs(400, centers=[[0, 0], [30, 0]], random_state=0)
    fit = fit_graph(B, 2, random_state=0, n_threads=1, whiten=False)
    assert fit.ncut == 0.0 and mixture_step(B, fit, 2) is fit


def test_repeated_points_share_a_label_and_a_collapsing_component_is_skipped():
    X, _ = _varied()
    Xr = np.r_[X, X[::3]]                               # a third of the points twice
    fit = gaussian_step(Xr, fit_graph(Xr, 3, random_state=4, n_threads=1, whiten=False), 3)
    got = mixture_step(Xr, fit, 3)
    assert got.mixture["kept"] is True
    np.testing.assert_array_equal(got.labels[len(X):], got.labels[:len(X)][::3])
    np.testing.assert_array_equal(got.labels, fit.graph.point_labels(got.node_labels))
    # a start whose cluster has d points: no covariance, no mixture
    labels = fit.labels.copy()
    labels[labels == 2] = 1
    labels[:2] = 2
    assert gaussian_mixture(Xr, labels, 3) is None


def test_the_default_predicts_new_points_by_the_mixture():
    """predict of the training points is labels_; of new points, the reference mixture's
    labels from the same start (the Gaussian step's labels); transform gives the mixture's
    costs, whose least is the label; one and two threads give the same labels."""
    X, _ = _varied()
    est = KernelKMeans(3, random_state=4, n_threads=1).fit(X)
    assert est.fit_stats_["graph"]["mixture"]["kept"] is True
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    np.testing.assert_array_equal(est.predict(X[5::11]), est.labels_[5::11])
    from kkmeans_cli.model.params import fit_rngs

    first = fit_graph(X, 3, random_state=fit_rngs(4)[1], n_threads=1, whiten=False)
    step = gaussian_step(X, first, 3)
    new, _ = _varied(9, n=600)
    want, _, _ = reference_mixture(X, step.labels, 3, X_new=new)
    np.testing.assert_array_equal(est.predict(new), want)
    D = est.transform(new)
    np.testing.assert_array_equal(np.argmin(D, axis=1), est.predict(new))
    # 2,400 points: below 2,000 a fit runs on one thread whatever n_threads says
    X2, _ = _varied(4, n=2400)
    one = KernelKMeans(3, random_state=1, n_threads=1).fit(X2)
    two = KernelKMeans(3, random_state=1, n_threads=2).fit(X2)
    assert one.fit_stats_["graph"]["mixture"]["kept"] is True
    np.testing.assert_array_equal(one.labels_, two.labels_)
    np.testing.assert_array_equal(one.predict(new), two.predict(new))


def test_the_model_file_keeps_the_mixture_and_predict_uses_it(tmp_path):
    X, _ = _varied()
    write_csv(tmp_path / "varied.csv", X, fmt="%.6f")
    new, _ = _varied(9, n=600)
    write_csv(tmp_path / "new.csv", new, fmt="%.6f")
    X = np.loadtxt(tmp_path / "varied.csv", delimiter=",", skiprows=1)
    new = np.loadtxt(tmp_path / "new.csv", delimiter=",", skiprows=1)
    est = KernelKMeans(3, random_state=0).fit(X)
    assert est.fit_stats_["graph"]["mixture"]["kept"] is True
    done = run(["fit", tmp_path / "varied.csv", "-k", "3", "-o", tmp_path / "m.npz"])
    assert done.exit_code == 0, done.stderr
    np.testing.assert_array_equal(labels_of(done.stdout), est.labels_)
    with np.load(tmp_path / "m.npz", allow_pickle=False) as saved:
        assert set(graph_fit.GraphModel.MIXTURE_ARRAYS) <= set(saved.files)
    again = run_process(["predict", "m.npz", "new.csv"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    np.testing.assert_array_equal(labels_of(again.stdout), est.predict(new))
    same = run_process(["predict", "m.npz", "varied.csv"], cwd=tmp_path)
    assert same.stdout == done.stdout


def test_a_model_whose_mixture_is_damaged_is_refused(tmp_path):
    """Every reader refuses, in one line and writing nothing, a mixture array missing, of
    the wrong shape, not finite or naming a column out of range, and a record that says
    kept without the arrays (or arrays the record does not keep)."""
    arrays, meta = fitted_model_arrays(tmp_path)
    assert meta["graph"]["mixture"]["kept"] is True
    names = graph_fit.GraphModel.MIXTURE_ARRAYS
    nan_maps = arrays["graph_mixture_maps"].copy()
    nan_maps[0, 0, 0] = np.nan
    cases = [({name: None for name in names[:1]}, "must come together"),
             ({"graph_mixture_columns": np.array([0, 2])}, "'graph_mixture_columns'"),
             ({"graph_mixture_columns": np.array([1, 0])}, "'graph_mixture_columns'"),
             ({"graph_mixture_maps": nan_maps}, "'graph_mixture_maps' must hold finite"),
             ({"graph_mixture_projection": np.ones((2, 3))}, "shapes"),
             ({"graph_mixture_scale": -arrays["graph_mixture_scale"]}, "positive"),
             ({name: None for name in names}, "meta 'graph.mixture.kept'")]
    for change, needle in cases:
        damaged = {name: value for name, value in {**arrays, **change}.items()
                   if value is not None}
        path = tmp_path / "bad.npz"
        np.savez(path, **damaged)
        before = listing(tmp_path)
        for args in (["info", path], ["predict", path, tmp_path / "varied.csv"]):
            result = run(args)
            assert_one_error_line(result, str(path), needle, code=1)
        assert listing(tmp_path) == before
    # arrays beside a record that kept no mixture
    path = tmp_path / "bad.npz"
    np.savez(path, **{**arrays, "meta": np.array(json.dumps(
        {**meta, "graph": {**meta["graph"], "mixture": {"kept": False}}}))})
    assert_one_error_line(run(["info", path]), "meta 'graph.mixture.kept'", code=1)
