"""The whitened refit of the graph kernel (``whiten=True``, ``--whiten``): fit, whiten the
points by the pooled within-cluster covariance W of the labels found (X·W^{-½}; De la Torre &
Kanade, "Discriminative cluster analysis"), fit the whitened points' graph again. Checked
against NumPy references: the transform, the two fits it chains, predict of the training
points, the model file, one and two threads, and every refusal (one line, its exit code,
nothing written)."""
import json

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_blobs, make_moons

from helpers import assert_one_error_line, labels_of, listing, run, run_process, write_csv
from kkmeans_cli import KernelKMeans
from kkmeans_cli.kernels.graph_fit import (WHITEN_RIDGE, fit_graph, predict_graph,
                                           whiten_points, within_whitening)
from kkmeans_cli.model.model_file import load_model
from kkmeans_cli.model.params import InvalidParameterError

ANISO = np.array([[0.6, -0.6], [-0.4, 0.8]])


def _aniso(n=450, seed=3):
    X, y = make_blobs(n, centers=3, random_state=seed)
    return np.round(X @ ANISO, 6), y


def _reference_whitening(X, labels, ridge=WHITEN_RIDGE):
    """W^{-½} by loops over the clusters and SciPy's matrix square root."""
    from scipy.linalg import sqrtm

    n, d = X.shape
    W = np.zeros((d, d))
    for c in np.unique(labels):
        R = X[labels == c] - X[labels == c].mean(axis=0)
        W += R.T @ R
    W /= n
    W += ridge * np.trace(W) / d * np.eye(d)
    return np.linalg.inv(np.real(sqrtm(W)))


def test_within_whitening_is_the_inverse_square_root_of_the_pooled_covariance():
    X, y = _aniso()
    T = within_whitening(X, y, 3)
    np.testing.assert_allclose(T, _reference_whitening(X, y), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(T, T.T, atol=1e-14)
    # in X·T the clusters found are round: their pooled covariance is I less the ridge's
    # share, I − ε(W + εI)⁻¹ = I − εT²
    def pooled(Z):
        return sum((Z[y == c] - Z[y == c].mean(0)).T @ (Z[y == c] - Z[y == c].mean(0))
                   for c in range(3)) / X.shape[0]

    eps = WHITEN_RIDGE * np.trace(pooled(X)) / 2
    np.testing.assert_allclose(pooled(X @ T), np.eye(2) - eps * T @ T, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(pooled(X @ T)) > 0.98)


def test_within_whitening_of_single_point_clusters_is_the_identity():
    X = np.array([[0.0, 1.0], [2.0, 3.0], [5.0, -1.0]])
    np.testing.assert_array_equal(within_whitening(X, np.array([0, 1, 2]), 3), np.eye(2))


def test_whiten_points_is_the_product_and_the_same_for_a_row_in_any_company():
    rng = np.random.default_rng(0)
    X, T = rng.normal(size=(1001, 7)), rng.normal(size=(7, 7))
    Z = whiten_points(X, T)
    np.testing.assert_allclose(Z, X @ T, rtol=1e-12, atol=1e-12)
    for rows in (np.arange(1), np.arange(3, 40), rng.permutation(1001)[:257]):
        np.testing.assert_array_equal(whiten_points(X[rows], T), Z[rows])


def test_fit_graph_whiten_is_a_fit_on_the_points_its_first_fit_whitens():
    """The two fits it chains, replayed by hand with the same generator."""
    X, _ = _aniso()
    got = fit_graph(X, 3, random_state=np.random.default_rng(5), n_threads=1, whiten=True)
    rng = np.random.default_rng(5)
    first = fit_graph(X, 3, random_state=rng, n_threads=1)
    T = _reference_whitening(X, first.labels)
    np.testing.assert_allclose(got.transform, T, rtol=1e-10, atol=1e-12)
    second = fit_graph(whiten_points(X, got.transform), 3, random_state=rng, n_threads=1)
    np.testing.assert_array_equal(got.labels, second.labels)
    assert got.ncut == second.ncut
    assert fit_graph(X, 3, random_state=1, n_threads=1).transform is None


def test_predict_of_the_training_points_is_the_labels_and_threads_agree():
    X, _ = _aniso(600, seed=11)
    one = KernelKMeans(3, whiten=True, random_state=2, n_threads=1).fit(X)
    two = KernelKMeans(3, whiten=True, random_state=2, n_threads=2).fit(X)
    np.testing.assert_array_equal(one.labels_, two.labels_)
    np.testing.assert_array_equal(one.predict(X), one.labels_)
    np.testing.assert_array_equal(one.predict(X[5::9]), one.labels_[5::9])
    assert one.graph_info_["whitened"] is True
    model = one.graph_model_
    assert model.transform.shape == (2, 2)
    # new points: the rule of the unwhitened model on the whitened points
    new = X[:40] + 0.01
    plain = model.__class__(**{**vars(model), "nodes": model.nodes, "transform": None})
    np.testing.assert_array_equal(predict_graph(model, new),
                                  predict_graph(plain, whiten_points(new, model.transform)))


def test_the_api_refuses_whiten_without_points():
    X, _ = _aniso(90)
    with pytest.raises(InvalidParameterError, match=r"whiten=True sets the whitened refit .* "
                                                    r"the rbf kernel builds no neighbour graph"):
        KernelKMeans(3, kernel="rbf", whiten=True).fit(X)
    A = sparse.random(30, 30, density=0.3, random_state=0)
    with pytest.raises(InvalidParameterError, match="the precomputed kernel builds no"):
        KernelKMeans(2, kernel="precomputed", whiten=True).fit(A + A.T)
    with pytest.raises(ValueError, match="whiten needs the points X"):
        fit_graph(None, 2, affinity=(A + A.T).tocsr(), whiten=True)
    from kkmeans_cli.model.sweep import graph_sweep
    with pytest.raises(InvalidParameterError, match="whiten=True is not swept"):
        graph_sweep(X, [2, 3], whiten=True)


# -- the command line ---------------------------------------------------------------------------
@pytest.fixture
def aniso_csv(tmp_path):
    X, _ = _aniso()
    write_csv(tmp_path / "aniso.csv", X, fmt="%.6f")
    return tmp_path


def test_cli_fit_whiten_predict_info_and_config(aniso_csv):
    folder = aniso_csv
    X = np.loadtxt(folder / "aniso.csv", delimiter=",", skiprows=1)
    fit = run(["fit", folder / "aniso.csv", "-k", "3", "--whiten", "--seed", "4",
               "-o", folder / "m.npz"])
    assert fit.exit_code == 0, fit.stderr
    est = KernelKMeans(3, whiten=True, random_state=4).fit(X)
    np.testing.assert_array_equal(labels_of(fit.stdout), est.labels_)
    assert "(connectivity; whitened)" in fit.stderr
    predicted = run(["predict", folder / "m.npz", folder / "aniso.csv"])
    assert predicted.exit_code == 0, predicted.stderr
    assert predicted.stdout == fit.stdout
    loaded = load_model(folder / "m.npz")
    np.testing.assert_array_equal(loaded.result.graph.model.transform,
                                  est.graph_model_.transform)
    info = run(["info", folder / "m.npz"])
    assert "(connectivity; whitened)" in info.stdout and "--whiten=True" in info.stdout
    assert json.loads(run(["info", folder / "m.npz", "--json"]).stdout)["graph"]["whitened"]
    (folder / "run.yaml").write_text("whiten: true\nseed: 4\n")
    configured = run(["fit", folder / "aniso.csv", "-k", "3", "--config", folder / "run.yaml",
                      "--no-model"])
    assert configured.exit_code == 0, configured.stderr
    assert configured.stdout == fit.stdout
    process = run_process(["fit", "aniso.csv", "-k", "3", "--whiten", "--seed", "4",
                           "--no-model"], cwd=folder)
    assert process.returncode == 0, process.stderr
    assert process.stdout == fit.stdout


@pytest.mark.parametrize("args, needles", [
    (["--kernel", "rbf"], ["--whiten sets the whitened refit", "the rbf kernel builds no "
                           "neighbour graph", "drop --whiten)"]),
    (["--kernel", "linear"], ["the linear kernel builds no neighbour graph"]),
])
def test_cli_refuses_whiten_with_a_dense_kernel(aniso_csv, args, needles):
    folder = aniso_csv
    before = listing(folder)
    result = run_process(["fit", "aniso.csv", "-k", "3", "--whiten", *args, "-o", "m.npz",
                          "--summary", "s.json"], cwd=folder)
    assert_one_error_line(result, *needles, code=2)
    assert listing(folder) == before


def test_cli_refuses_whiten_on_a_graph_given_as_data_and_in_a_sweep(aniso_csv):
    folder = aniso_csv
    X, _ = make_moons(120, noise=0.05, random_state=0)
    from sklearn.neighbors import kneighbors_graph
    A = kneighbors_graph(X, 8, include_self=False)
    sparse.save_npz(folder / "g.npz", ((A + A.T) > 0).astype(float).tocsr())
    before = listing(folder)
    given = run(["fit", folder / "g.npz", "--kernel", "precomputed", "-k", "2", "--whiten",
                 "-o", folder / "m.npz"])
    assert_one_error_line(given, "--whiten sets the whitened refit",
                          "the precomputed kernel builds no neighbour graph", code=2)
    swept = run_process(["sweep", "aniso.csv", "--k", "2..4", "--whiten", "-o", "m.npz",
                         "--table", "t.csv"], cwd=folder)
    assert_one_error_line(swept, "--whiten is not swept", "fit the chosen k with --whiten",
                          code=2)
    assert listing(folder) == before


def test_a_model_whose_whitening_is_damaged_is_refused(aniso_csv, tmp_path):
    folder = aniso_csv
    assert run(["fit", folder / "aniso.csv", "-k", "3", "--whiten", "-o",
                folder / "m.npz"]).exit_code == 0
    with np.load(folder / "m.npz") as z:
        arrays = {name: z[name] for name in z.files}
    meta = json.loads(str(arrays["meta"]))
    cases = {
        "shape": {**arrays, "graph_transform": np.eye(3)},
        "nan": {**arrays, "graph_transform": np.array([[np.nan, 0.0], [0.0, 1.0]])},
        "missing": {k: v for k, v in arrays.items() if k != "graph_transform"},
        "unsaid": {**arrays, "meta": np.array(json.dumps(
            {**meta, "graph": {**meta["graph"], "whitened": False}}))},
        "not a boolean": {**arrays, "meta": np.array(json.dumps(
            {**meta, "graph": {**meta["graph"], "whitened": 1}}))},
    }
    for name, members in cases.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, **members)
        result = run(["predict", path, folder / "aniso.csv"])
        assert_one_error_line(result, str(path), code=1)
        assert "graph_transform" in result.stderr, (name, result.stderr)
