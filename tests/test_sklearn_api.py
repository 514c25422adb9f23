"""KernelKMeans as a scikit-learn estimator: every check of ``check_estimator``, Pipeline,
clone, GridSearchCV, pickling, parameter validation, random_state, thread-safe prediction,
and the one table of choices shared with the command line."""
import copy
import os
import pickle
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import click
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.metrics import silhouette_score as sk_silhouette
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError as SklearnInvalidParameter
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.estimator_checks import parametrize_with_checks

from helpers import ROOT, blobs, run
from kkmeans_cli import _options
from kkmeans_cli.cli import fit as cli_module
from kkmeans_cli.errors import KKMeansError, KKMeansWarning, UsageError
from kkmeans_cli.measures.metrics import silhouette_score
from kkmeans_cli.model.estimator import KernelKMeans, expected_failed_checks
from kkmeans_cli.model.params import (PARAMETER_CONSTRAINTS, InvalidParameterError,
                                      check_param_combination)

# Checks that fit the default k = 8 on a few distinct points (16 rows, 4 distinct): more
# clusters than distinct points, which the estimator refuses (declared expected failures);
# they run with k = 2 in test_sample_weight_checks_with_as_many_clusters_as_points.
FEW_DISTINCT_POINTS = ("check_sample_weights_shape", "check_sample_weights_not_overwritten")


def _check_name(check):
    return getattr(check, "func", check).__name__


# -- scikit-learn's estimator checks --------------------------------------------------------
# The default estimator (the graph kernel 'knn') and the rbf kernel of the dense routes.
@parametrize_with_checks([KernelKMeans(), KernelKMeans(kernel="rbf")],
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    name = _check_name(check)
    if name == "check_array_api_input":
        # SciPy reads SCIPY_ARRAY_API once, at import: run this check in a fresh interpreter.
        _array_api_check_in_subprocess(check)
        return
    if name in expected_failed_checks(estimator):
        # An expected failure: its fits (zero weights, k = 8 on 15 points) may warn on the way.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KKMeansWarning)
            check(estimator)
    else:
        check(estimator)


def _array_api_check_in_subprocess(check):
    kwargs = dict(check.keywords)
    code = ("from kkmeans_cli.model.estimator import KernelKMeans\n"
            "from sklearn.utils.estimator_checks import check_array_api_input\n"
            f"check_array_api_input('KernelKMeans', KernelKMeans(), **{kwargs!r})\n"
            "print('passed')\n")
    env = dict(os.environ, SCIPY_ARRAY_API="1", PYTHONPATH=ROOT + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "passed"


def test_expected_failures_are_few_and_explained():
    for estimator in (KernelKMeans(), KernelKMeans(kernel="rbf")):
        expected = expected_failed_checks(estimator)
        assert sorted(expected) == sorted(("check_sample_weight_equivalence_on_dense_data",)
                                          + FEW_DISTINCT_POINTS)
        assert all(len(reason) > 80 for reason in expected.values())


@pytest.mark.parametrize("name", FEW_DISTINCT_POINTS)
def test_sample_weight_checks_with_as_many_clusters_as_points(name):
    """The two checks declared as expected failures fail for the reason given (k = 8 on four
    distinct points is refused) and pass with n_clusters = 2."""
    from sklearn.utils import estimator_checks

    from kkmeans_cli.errors import TooFewDistinctPointsError

    check = getattr(estimator_checks, name)
    with pytest.raises(TooFewDistinctPointsError, match="4 distinct points.*8 clusters"):
        check("KernelKMeans", KernelKMeans(kernel="rbf"))
    check("KernelKMeans", KernelKMeans(kernel="rbf", n_clusters=2))


def test_what_the_sample_weight_checks_are_about_holds():
    """The two sample-weight checks fail only on their k = 8 fit of 4 distinct points: with
    enough distinct points a sample_weight of the wrong shape is refused and a good one is
    left unmodified."""
    X, _ = blobs(n=40, d=2, k=3, seed=0)
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(X))
    kept = w.copy()
    KernelKMeans(3, kernel="rbf", random_state=0, n_init=2).fit(X, sample_weight=w)
    np.testing.assert_array_equal(w, kept)
    for bad in (w[:-1], w.reshape(-1, 1), np.ones((2, len(X)))):
        with pytest.raises(ValueError):
            KernelKMeans(3, kernel="rbf", random_state=0, n_init=2).fit(X, sample_weight=bad)


def test_integer_weights_equal_repeated_rows_from_the_same_start():
    """What the expected failure above does hold: weight w_i and w_i copies of row i have the
    same objective, so from the same start (and the same gamma) the fits are the same."""
    X, _ = make_blobs(40, centers=3, random_state=1)
    w = np.random.default_rng(0).integers(1, 5, size=40)
    start = np.arange(40) % 3
    params = dict(gamma=0.2, refine="hartigan", n_threads=1)
    weighted = KernelKMeans(3, init=start, **{"kernel": "rbf", **params}).fit(X, sample_weight=w)
    rows = np.repeat(np.arange(40), w)
    repeated = KernelKMeans(3, init=start[rows], **{"kernel": "rbf", **params}).fit(X[rows])
    assert repeated.inertia_ == pytest.approx(weighted.inertia_, rel=1e-12)
    np.testing.assert_array_equal(repeated.labels_, weighted.labels_[rows])
    np.testing.assert_array_equal(weighted.predict(X), repeated.predict(X))


# -- composition: Pipeline, clone, GridSearchCV, pickle -------------------------------------
def test_pipeline_equals_the_steps_by_hand():
    X, _ = make_blobs(150, centers=3, n_features=4, random_state=0)
    pipe = Pipeline([("scale", StandardScaler()),
                     ("kkm", KernelKMeans(3, kernel="rbf", random_state=0, n_init=3))]).fit(X)
    Xs = StandardScaler().fit_transform(X)
    direct = KernelKMeans(3, kernel="rbf", random_state=0, n_init=3).fit(Xs)
    np.testing.assert_array_equal(pipe.named_steps["kkm"].labels_, direct.labels_)
    np.testing.assert_array_equal(pipe.predict(X), direct.predict(Xs))
    np.testing.assert_allclose(pipe.transform(X), direct.transform(Xs), rtol=1e-12)
    # fit parameters reach the step: sample weights through the pipeline
    w = np.linspace(0.5, 2.0, 150)
    weighted = pipe.fit(X, kkm__sample_weight=w).named_steps["kkm"]
    again = KernelKMeans(3, kernel="rbf", random_state=0, n_init=3).fit(Xs, sample_weight=w)
    assert weighted.inertia_ == again.inertia_


def test_clone_gives_an_unfitted_twin_that_fits_the_same():
    X, _ = make_blobs(100, centers=3, random_state=2)
    est = KernelKMeans(3, kernel="poly", degree=2, gamma=0.1, n_init=4, random_state=5,
                       dtype="float32").fit(X)
    twin = clone(est)
    assert twin.get_params() == est.get_params()
    assert not hasattr(twin, "labels_")
    np.testing.assert_array_equal(twin.fit(X).labels_, est.labels_)


def _feature_space_silhouette(estimator, X, y=None):
    """Scorer: the silhouette of the predicted labels in the kernel's feature space."""
    labels = estimator.predict(X)
    K = estimator.kernel_.matrix(np.asarray(X, dtype=np.float64))
    return silhouette_score(labels, K=K).score


def test_grid_search_by_silhouette_picks_the_true_number_of_clusters():
    X, _ = make_blobs(240, centers=4, cluster_std=0.6, random_state=3)
    cv = KFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(KernelKMeans(kernel="rbf", random_state=0, n_init=3, n_threads=1),
                          {"n_clusters": [2, 3, 4, 5, 6]}, scoring=_feature_space_silhouette,
                          cv=cv).fit(X)
    assert search.best_params_ == {"n_clusters": 4}
    # the score of the winner, recomputed by hand on the same folds
    scores = [_feature_space_silhouette(
        KernelKMeans(4, kernel="rbf", random_state=0, n_init=3, n_threads=1).fit(X[train]), X[test])
        for train, test in cv.split(X)]
    assert search.best_score_ == pytest.approx(np.mean(scores), rel=1e-12)


def test_linear_kernel_silhouette_scorer_equals_sklearn():
    X, _ = make_blobs(90, centers=3, random_state=4)
    est = KernelKMeans(3, kernel="linear", random_state=0, n_init=2).fit(X)
    assert _feature_space_silhouette(est, X) == pytest.approx(
        sk_silhouette(X, est.predict(X)), rel=1e-9)


@pytest.mark.parametrize("params", [
    dict(),
    dict(kernel="sigmoid", gamma=0.01, coef0=1.0, psd_repair="lingoes"),
    dict(objective="ncut"),
    dict(approx="nystroem", n_landmarks=30),
])
def test_pickle_round_trip_predicts_the_same(params):
    X, _ = make_blobs(120, centers=3, random_state=6)
    est = KernelKMeans(3, random_state=0, n_init=2, **{"kernel": "rbf", **params}).fit(X)
    back = pickle.loads(pickle.dumps(est))
    Xn = X + 0.1
    np.testing.assert_array_equal(back.labels_, est.labels_)
    np.testing.assert_array_equal(back.predict(Xn), est.predict(Xn))
    np.testing.assert_array_equal(back.transform(Xn), est.transform(Xn))
    assert back.get_params() == est.get_params()


# -- parameters -----------------------------------------------------------------------------
def test_invalid_parameter_error_is_usage_value_and_sklearn_error():
    with pytest.raises(InvalidParameterError,
                       match="'psd_repair' parameter of KernelKMeans must be a str among") as info:
        KernelKMeans(2, kernel="rbf", psd_repair="higham").fit(np.ones((4, 2)))
    for base in (UsageError, KKMeansError, ValueError, SklearnInvalidParameter):
        assert isinstance(info.value, base)
    assert info.value.exit_code == 2


@pytest.mark.parametrize("params, message", [
    (dict(storage="blocked", kernel="precomputed"), "precomputed kernel has no kernel function"),
    (dict(storage="blocked", psd_repair="lingoes"), "storage='blocked' runs exact"),
    (dict(storage="blocked", solver="embed"), "storage='blocked' runs exact"),
    (dict(storage="blocked", objective="ncut"), "storage='blocked' runs exact"),
    (dict(storage="blocked", approx="nystroem"), "storage='blocked' runs exact"),
    (dict(approx="nystroem", psd_repair="clip"), "need the exact kernel matrix"),
    (dict(approx="nystroem", solver="embed"), "need the exact kernel matrix"),
    (dict(approx="nystroem", objective="ncut"), "objective='ncut' needs the exact"),
    (dict(approx="nystroem", kernel="precomputed"), "kernel='precomputed' gives no rows"),
    (dict(approx="nystroem", kernel="precomputed-distance"), "gives no rows, only the matrix"),
    (dict(memory_limit="eight gigs"), "memory_limit"),
])
def test_cross_parameter_rules(params, message):
    full = KernelKMeans(2, **{"kernel": "rbf", **params}).get_params()
    with pytest.raises(InvalidParameterError, match=message):
        check_param_combination(full)
    with pytest.raises(InvalidParameterError, match=message):
        KernelKMeans(2, **{"kernel": "rbf", **params}).fit(np.eye(5))


@pytest.mark.parametrize("args, message", [
    (["--storage", "blocked", "--psd-repair", "lingoes"],
     "--storage blocked runs exact kernel k-means on kernel rows recomputed in blocks; "
     "--approx nystroem, --psd-repair, --solver embed and --objective ncut need other kernels"),
    (["--approx", "nystroem", "--objective", "ncut"],
     "--objective ncut needs the exact kernel matrix; it cannot be used with --approx nystroem"),
    (["--approx", "nystroem", "--kernel", "precomputed"],
     "--approx nystroem computes kernel values from the data's rows (features of landmarks); "
     "--kernel precomputed gives no rows, only the matrix: use --approx none with it, or give "
     "the points with their kernel"),
])
def test_cli_maps_invalid_parameters_to_exit_2_before_reading_data(tmp_path, args, message):
    model = tmp_path / "m.npz"
    missing = tmp_path / "not-there.csv"   # never read: the options are refused first
    result = run(["fit", "--kernel", "rbf", missing, "-k", 2, "-o", model] + args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"kkmeans: error: {message}\n"  # in command-line words
    assert not model.exists()


def test_random_state_accepts_int_randomstate_none_and_generator():
    X, _ = make_blobs(80, centers=3, random_state=7)
    fit = lambda rs: KernelKMeans(3, kernel="rbf", n_init=2, random_state=rs, n_threads=1).fit(X)  # noqa: E731
    np.testing.assert_array_equal(fit(3).labels_, fit(3).labels_)
    a = fit(np.random.RandomState(11))
    b = fit(np.random.RandomState(11))
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.gamma_ == b.gamma_
    g1 = fit(np.random.default_rng(5))
    g2 = fit(np.random.default_rng(5))
    np.testing.assert_array_equal(g1.labels_, g2.labels_)
    np.random.seed(4)  # None draws from numpy's global RandomState, as in scikit-learn
    n1 = fit(None)
    np.random.seed(4)
    n2 = fit(None)
    np.testing.assert_array_equal(n1.labels_, n2.labels_)
    # a RandomState is drawn from, as scikit-learn's estimators do: its second use is not a
    # replay of the first
    state = np.random.RandomState(11)
    fit(state)
    assert not np.array_equal(state.get_state()[1], np.random.RandomState(11).get_state()[1])
    with pytest.raises(InvalidParameterError, match="'random_state' parameter"):
        fit("seed")


def test_tags_say_what_the_estimator_accepts():
    tags = KernelKMeans().__sklearn_tags__()
    assert tags.estimator_type == "clusterer"
    assert not tags.input_tags.pairwise and not tags.input_tags.sparse
    assert not KernelKMeans(kernel="rbf").__sklearn_tags__().input_tags.sparse
    # a sparse X is an affinity graph for the precomputed kernel (tests/test_graph_api.py)
    assert KernelKMeans(kernel="precomputed").__sklearn_tags__().input_tags.sparse
    assert not tags.input_tags.allow_nan and not tags.input_tags.positive_only
    assert tags.transformer_tags.preserves_dtype == ["float64"]
    assert KernelKMeans(kernel="precomputed").__sklearn_tags__().input_tags.pairwise
    assert KernelKMeans(kernel="precomputed-distance").__sklearn_tags__().input_tags.pairwise
    assert KernelKMeans(kernel="chi2").__sklearn_tags__().input_tags.positive_only


# -- one table of choices for the estimator and the command line ----------------------------
CHOICE_PARAMS = {"kernel": "KERNELS", "algorithm": "ALGORITHMS", "storage": "STORAGES",
                 "init": "INITS", "objective": "OBJECTIVES", "refine": "REFINES",
                 "psd_repair": "PSD_REPAIRS", "approx": "APPROXES", "solver": "SOLVERS",
                 "dtype": "DTYPES", "gamma": "GAMMA_RULES", "weighting": "WEIGHTINGS"}


@pytest.mark.parametrize("param, table", sorted(CHOICE_PARAMS.items()))
def test_estimator_constraints_come_from_the_options_table(param, table):
    options = [c for c in PARAMETER_CONSTRAINTS[param] if isinstance(c, StrOptions)]
    assert len(options) == 1 and options[0].options == set(getattr(_options, table))
    if param in _options.DEFAULTS:
        assert KernelKMeans().get_params()[param] == _options.DEFAULTS[param]


def test_cli_choices_and_defaults_come_from_the_options_table():
    fit_params = {p.name: p for p in cli_module.fit.params}
    for param, table in CHOICE_PARAMS.items():
        option = fit_params[param]
        if isinstance(option.type, click.Choice):
            assert tuple(option.type.choices) == getattr(_options, table)
        assert option.default == _options.DEFAULTS[param]
    assert tuple(fit_params["scale"].type.choices) == _options.SCALES
    assert tuple(fit_params["missing"].type.choices) == _options.MISSING
    for name in ("n_init", "max_iter", "tol", "degree", "coef0"):
        assert (fit_params[name].default == _options.DEFAULTS[name]
                == KernelKMeans().get_params()[name])


def test_help_imports_neither_numpy_nor_sklearn():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "kkmeans_cli", "--help"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and "Usage: kkmeans" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0]
                for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "kkmeans_cli" in imported and "click" in imported
    assert not imported & {"numpy", "sklearn", "scipy", "h5py", "rich"}


# -- predict and transform are pure --------------------------------------------------------
def _snapshot(obj):
    """A deep copy of an object's attributes, to compare before and after."""
    return copy.deepcopy({k: v for k, v in vars(obj).items()})


def _assert_same_state(before, after):
    assert before.keys() == after.keys()
    for key in before:
        a, b = before[key], after[key]
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg=key)
        elif hasattr(a, "__dict__") and not isinstance(a, type):
            _assert_same_state(_snapshot(a), _snapshot(b))
        else:
            assert a == b, key


PURE_CASES = [
    dict(),
    dict(kernel="sigmoid", gamma=0.01, coef0=1.0, psd_repair="lingoes"),
    dict(kernel="sigmoid", gamma=0.01, coef0=1.0, psd_repair="clip"),
    dict(objective="ncut"),
    dict(approx="nystroem", n_landmarks=40),
]


@pytest.mark.parametrize("params", PURE_CASES)
def test_predict_and_transform_write_nothing_to_the_estimator(params):
    X, _ = make_blobs(150, centers=3, random_state=8)
    est = KernelKMeans(3, random_state=0, n_init=2, **{"kernel": "rbf", **params}).fit(X)
    if params.get("psd_repair") == "lingoes":
        assert est.psd_.sigma > 0  # the shift that looks for training points is applied
    attributes = dict(vars(est))
    before = _snapshot(est)
    est.predict(X[:50])   # training points among them (the Lingoes shift looks for those)
    est.transform(X + 0.05)
    assert {k: id(v) for k, v in vars(est).items()} == {k: id(v) for k, v in attributes.items()}
    _assert_same_state(before, _snapshot(est))


@pytest.mark.parametrize("params", PURE_CASES)
def test_predict_from_many_threads_equals_serial(params):
    X, _ = make_blobs(300, centers=4, random_state=9)
    est = KernelKMeans(4, random_state=0, n_init=2, n_threads=1, **{"kernel": "rbf", **params}).fit(X[:200])
    if params.get("psd_repair") == "lingoes":
        assert est.psd_.sigma > 0
    # Different inputs in each call, half of them training points: a call that read another
    # call's rows (the old side channel) would give other labels.
    chunks = [X[i:i + 37] for i in range(0, 300, 37)] * 4
    serial = [(est.predict(c), est.transform(c)) for c in chunks]
    with ThreadPoolExecutor(max_workers=8) as pool:
        parallel = list(pool.map(lambda c: (est.predict(c), est.transform(c)), chunks))
    for (labels_s, dist_s), (labels_p, dist_p) in zip(serial, parallel):
        np.testing.assert_array_equal(labels_p, labels_s)
        np.testing.assert_array_equal(dist_p, dist_s)


def test_precomputed_model_predicts_in_threads():
    X, _ = blobs(n=90, k=3, seed=1)
    K = X @ X.T
    est = KernelKMeans(3, kernel="precomputed", random_state=0, n_init=2, n_threads=1).fit(K)
    rows = [K[i:i + 10] for i in range(0, 90, 10)] * 3
    serial = [est.predict(r) for r in rows]
    with ThreadPoolExecutor(max_workers=6) as pool:
        parallel = list(pool.map(est.predict, rows))
    for s, p in zip(serial, parallel):
        np.testing.assert_array_equal(p, s)
    np.testing.assert_array_equal(np.concatenate(serial[:9]), est.labels_)


# -- what predictions read: the fit's state and parameters, checked arguments ---------------
def _precomputed_fit():
    X, _ = blobs(n=90, k=3, seed=1)
    K = np.exp(-0.1 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
    return K, KernelKMeans(3, kernel="precomputed", random_state=0, n_init=2).fit(K)


@pytest.mark.parametrize("diag, message", [
    (np.full(5, np.nan), r"kernel_diag contains NaN or infinity \(first at row 0\)"),
    (np.ones(1), r"each of the 5 rows of X: shape \(5,\), got \(1,\)"),
    (np.ones((5, 1)), r"shape \(5,\), got \(5, 1\)"),
    (["a"] * 5, "kernel_diag must hold numbers"),
])
def test_kernel_diag_is_checked_before_the_engine_reads_it(diag, message):
    """A short, long or non-finite kernel_diag was handed to the compiled loops as it was:
    they read past its end (labels that changed from run to run, distances of 1e233)."""
    K, est = _precomputed_fit()
    for method in (est.predict, est.transform):
        with pytest.raises(ValueError, match=message):
            method(K[:5], kernel_diag=diag)


def test_kernel_diag_of_one_number_is_that_number_for_every_row():
    K, est = _precomputed_fit()
    np.testing.assert_array_equal(est.transform(K[:7], kernel_diag=1.0),
                                  est.transform(K[:7], kernel_diag=np.ones(7)))
    np.testing.assert_array_equal(est.predict(K[:7], kernel_diag=np.diag(K)[:7]),
                                  est.labels_[:7])


def test_kernel_diag_is_refused_where_the_kernel_computes_it():
    X, _ = make_blobs(120, centers=3, random_state=0)
    est = KernelKMeans(3, kernel="rbf", random_state=0).fit(X)
    with pytest.raises(ValueError, match="kernel_diag is for a precomputed kernel; "
                                         "kernel='rbf' computes K"):
        est.predict(X, kernel_diag=np.ones(120))


def test_fit_transform_of_a_precomputed_kernel_takes_its_diagonal():
    """TransformerMixin.fit_transform could pass no kernel_diag, and transform needs one."""
    K, est = _precomputed_fit()
    got = clone(est).fit_transform(K)
    np.testing.assert_array_equal(got, est.transform(K, kernel_diag=np.diag(K)))
    np.testing.assert_array_equal(got.argmin(axis=1), est.labels_)


@pytest.mark.parametrize("fitted, changed", [
    (dict(kernel="rbf", objective="ncut"), dict(objective="kmeans")),
    (dict(kernel="rbf"), dict(objective="ncut")),
    (dict(kernel="rbf", approx="nystroem"), dict(approx="none")),
    (dict(kernel="rbf", dtype="float32"), dict(dtype="float64")),
    (dict(kernel="rbf"), dict(approx="nystroem")),
])
def test_predict_reads_the_parameters_of_the_fit_not_later_ones(fitted, changed):
    """set_params after fit changed what predict read: 92 of 300 training points labelled
    otherwise, or an AttributeError for a state the fit never made."""
    X, _ = make_blobs(300, centers=3, random_state=0)
    est = KernelKMeans(3, random_state=0, **fitted).fit(X)
    labels, dist = est.predict(X), est.transform(X)
    scores = est.scores(("silhouette",)) if "approx" not in fitted else None
    est.set_params(**changed)
    np.testing.assert_array_equal(est.predict(X), labels)
    np.testing.assert_array_equal(est.transform(X), dist)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    if scores is not None:      # scored on the kernel matrix of the fit's own parameters
        assert est.scores(("silhouette",)) == scores


def test_feature_names_count_the_clusters_of_the_fit():
    X, _ = make_blobs(100, centers=2, random_state=0)
    est = KernelKMeans(2, kernel="rbf", random_state=0).fit(X).set_params(n_clusters=3)
    assert list(est.get_feature_names_out()) == ["kernelkmeans0", "kernelkmeans1"]
    assert est.transform(X).shape == (100, 2)


@pytest.mark.parametrize("first, second, gone", [
    (dict(), dict(kernel="rbf"), ("ncut_", "graph_model_", "graph_info_")),
    (dict(kernel="rbf", approx="nystroem"), dict(kernel="rbf"),
     ("landmarks_", "nystroem_transform_", "centers_")),
    (dict(kernel="rbf", objective="ncut"), dict(kernel="rbf"), ("degrees_",
                                                                 "degree_weights_")),
])
def test_a_refit_of_another_kind_leaves_no_state_of_the_first(first, second, gone):
    X, _ = make_blobs(200, centers=3, random_state=0)
    est = KernelKMeans(3, random_state=0, **first).fit(X)
    assert all(hasattr(est, name) for name in gone)
    est.set_params(**{**{key: KernelKMeans().get_params()[key] for key in first}, **second})
    est.fit(X)
    assert [name for name in gone if hasattr(est, name)] == []
    np.testing.assert_array_equal(est.predict(X), est.labels_)


def test_a_graph_fit_refuses_a_kernel_matrix():
    X, _ = make_blobs(60, centers=2, random_state=0)
    with pytest.raises(ValueError, match="kernel_matrix is for the dense kernels: "
                                         "kernel='knn' builds a sparse neighbour graph"):
        KernelKMeans(2).fit(X, kernel_matrix=np.eye(60))


def test_one_sample_weight_for_every_point_is_taken_as_scikit_learn_takes_it():
    X, _ = make_blobs(120, centers=3, random_state=0)
    one = KernelKMeans(3, kernel="rbf", random_state=0).fit(X, sample_weight=2.0)
    every = KernelKMeans(3, kernel="rbf", random_state=0).fit(X, sample_weight=np.full(120, 2.0))
    np.testing.assert_array_equal(one.labels_, every.labels_)
    np.testing.assert_array_equal(one.sample_weight_, every.sample_weight_)
