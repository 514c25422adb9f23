"""``predict`` takes a model's columns by name when DATA has a header (in any order, out of
more columns), refuses DATA that lacks one of them with both lists, and takes DATA without
names (or with --columns) by position."""
import numpy as np
import pytest

from helpers import FAST, blobs, run


@pytest.fixture
def work(tmp_path):
    X, _ = blobs(n=60, d=3, k=3, seed=4)
    _write(tmp_path / "abc.csv", ["a", "b", "c"], X)
    result = run(["fit", "--kernel", "rbf", tmp_path / "abc.csv", "-k", "3", *FAST, "-o", tmp_path / "m.npz",
                  "--labels", tmp_path / "fit.txt", "-q"])
    assert result.exit_code == 0, result.stderr
    return tmp_path, X, (tmp_path / "fit.txt").read_text()


def _write(path, names, X):
    with open(path, "w") as f:
        f.write(",".join(names) + "\n")
        for row in X:
            f.write(",".join("" if np.isnan(v) else repr(float(v)) for v in row) + "\n")


@pytest.mark.parametrize("names", [["c", "b", "a"], ["b", "a", "c"], ["x", "c", "a", "b"],
                                   ["a", "b", "c", "x"]])
def test_the_model_columns_are_taken_by_name(work, names):
    tmp, X, expected = work
    order = {"a": 0, "b": 1, "c": 2}
    # x: another column, with a missing value the model's columns do not have
    x = np.where(np.arange(X.shape[0]) == 7, np.nan, 1.0)
    cols = np.column_stack([X[:, order[n]] if n in order else x for n in names])
    _write(tmp / "new.csv", names, cols)
    result = run(["predict", tmp / "m.npz", tmp / "new.csv"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
    assert "columns:       a, b, c (the model's, taken by name)" in result.stderr
    with_data = run(["predict", tmp / "m.npz", tmp / "new.csv", "--with-data", "-q"])
    assert with_data.stdout.splitlines()[0] == "a,b,c,label"
    stdin = run(["predict", tmp / "m.npz", "-", "-q"], input=(tmp / "new.csv").read_text())
    assert stdin.exit_code == 0 and stdin.stdout == expected


def test_data_in_the_model_order_is_read_as_before(work):
    tmp, X, expected = work
    result = run(["predict", tmp / "m.npz", tmp / "abc.csv"])
    assert result.exit_code == 0 and result.stdout == expected
    assert "taken by name" not in result.stderr


def _refused(tmp, message, *args):
    """predict of new.csv by the model m.npz fails with exit 1 and the one line
    "kkmeans: error: new.csv: ``message``", writing no labels."""
    result = run(["predict", tmp / "m.npz", tmp / "new.csv", "--labels", tmp / "new.txt", *args])
    assert result.exit_code == 1
    assert result.stderr == f"kkmeans: error: {tmp / 'new.csv'}: {message}\n"
    assert not (tmp / "new.txt").exists()


def test_a_missing_column_is_refused_with_both_lists(work):
    tmp, X, _ = work
    _write(tmp / "new.csv", ["c", "b", "z"], X[:, ::-1])
    _refused(tmp, f"has no column 'a' of the model {tmp / 'm.npz'}; its columns are 'c', 'b', "
                  f"'z', the model's 'a', 'b', 'c' (give --columns to take DATA's columns by "
                  f"position instead)")


def test_a_bad_value_is_named_in_the_model_columns_not_in_another(work):
    """DATA whose other column stops the first read (a missing value, or text) is read
    again with the model's columns: a problem there is named as it is, in its own column and
    line, and a column of the model that DATA lacks is refused with both lists."""
    tmp, X, expected = work
    w = np.where(np.arange(X.shape[0]) == 3, np.nan, 1.0)       # line 5: no w
    Xm = X.copy()
    Xm[7, 2] = np.nan                                           # line 9: no c
    _write(tmp / "new.csv", ["w", "b", "c", "a"], np.column_stack([w, Xm[:, [1, 2, 0]]]))
    result = run(["predict", tmp / "m.npz", tmp / "new.csv", "--labels", tmp / "new.txt"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (f"kkmeans: error: {tmp / 'new.csv'}: line 9, column 3 ('c'): "
                             f"missing value; use --missing drop to skip such rows\n")
    assert not (tmp / "new.txt").exists()
    dropped = run(["predict", tmp / "m.npz", tmp / "new.csv", "--missing", "drop", "-q"])
    assert dropped.exit_code == 0, dropped.stderr
    want = expected.splitlines()
    assert dropped.stdout.splitlines() == want[:7] + ["-1"] + want[8:]
    # a text column beside, and the model's 'c' missing: the missing column is the error
    with open(tmp / "text.csv", "w") as f:
        f.write("s,b,a\n" + "".join(f"p{i},{r[1]!r},{r[0]!r}\n" for i, r in enumerate(X)))
    result = run(["predict", tmp / "m.npz", tmp / "text.csv", "--labels", tmp / "new.txt"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (f"kkmeans: error: {tmp / 'text.csv'}: has no column 'c' of the "
                             f"model {tmp / 'm.npz'}; its columns are 's', 'b', 'a', the "
                             f"model's 'a', 'b', 'c' (give --columns to take DATA's columns by "
                             f"position instead)\n")
    assert not (tmp / "new.txt").exists()


def test_data_without_names_or_with_columns_is_taken_by_position(work):
    tmp, X, expected = work
    np.save(tmp / "new.npy", X)
    result = run(["predict", tmp / "m.npz", tmp / "new.npy", "-q"])
    assert result.exit_code == 0 and result.stdout == expected
    _write(tmp / "new.csv", ["c", "b", "a"], X)  # the names do not match the values' order
    result = run(["predict", tmp / "m.npz", tmp / "new.csv", "--columns", "0,1,2"])
    assert result.exit_code == 0 and result.stdout == expected
    assert ("kkmeans: warning: " + str(tmp / "new.csv") + ": its columns 'c', 'b', 'a' are "
            "matched by position to the model's 'a', 'b', 'c'") in result.stderr


def test_a_model_whose_header_repeats_a_name_takes_columns_by_position(tmp_path):
    """A header such as x,x,y fits (DATA's names are stored as they are); info reads the model
    and predict takes DATA by position, since a name given twice picks no one column."""
    X, _ = blobs(n=60, d=3, k=3, seed=4)
    _write(tmp_path / "dup.csv", ["x", "x", "y"], X)
    fit = run(["fit", "--kernel", "rbf", tmp_path / "dup.csv", "-k", "3", *FAST, "-o",
               tmp_path / "m.npz", "-q"])
    assert fit.exit_code == 0, fit.stderr
    info = run(["info", tmp_path / "m.npz"])
    assert info.exit_code == 0, info.stderr
    again = run(["predict", tmp_path / "m.npz", tmp_path / "dup.csv", "-q"])
    assert again.exit_code == 0 and again.stdout == fit.stdout
    _write(tmp_path / "other.csv", ["y", "x", "x"], X)
    moved = run(["predict", tmp_path / "m.npz", tmp_path / "other.csv"])
    assert moved.exit_code == 0 and moved.stdout == fit.stdout
    assert ("its columns 'y', 'x', 'x' are matched by position to the model's 'x', 'x', "
            "'y'") in moved.stderr


def test_data_that_repeats_a_name_of_the_model_is_refused(work):
    """DATA whose header names one of the model's columns twice (c, a, b, a) cannot say which
    is the model's 'a': predict refuses it, exit 1, and writes nothing (before, the first
    'a' was taken silently); --columns takes DATA by position."""
    tmp, X, expected = work
    _write(tmp / "new.csv", ["c", "a", "b", "a"], np.column_stack([X[:, 2], X[:, 0], X[:, 1],
                                                                   X[:, 1]]))
    refusal = (f"has 2 columns named 'a' (0-based indexes 1, 3), a column of the model "
               f"{tmp / 'm.npz'}; give --columns to take DATA's columns by position")
    for args in ([], ["--with-data"]):
        _refused(tmp, refusal, *args)
    picked = run(["predict", tmp / "m.npz", tmp / "new.csv", "--columns", "1,2,0", "-q"])
    assert picked.exit_code == 0 and picked.stdout == expected
    # also where text in a column the model does not use stops the first read
    with open(tmp / "new.csv", "a") as f:
        f.write("zz," + ",".join(repr(float(v)) for v in (X[0, 0], X[0, 1], X[0, 1])) + "\n")
    _refused(tmp, refusal)


def test_a_name_data_repeats_that_the_model_lacks_is_no_matter(work):
    """DATA c, x, a, x, b: 'x' is not the model's, so its columns are still taken by name."""
    tmp, X, expected = work
    other = np.ones(X.shape[0])
    _write(tmp / "new.csv", ["c", "x", "a", "x", "b"],
           np.column_stack([X[:, 2], other, X[:, 0], other, X[:, 1]]))
    result = run(["predict", tmp / "m.npz", tmp / "new.csv"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected and "taken by name" in result.stderr


def test_model_columns_named_by_numbers_are_taken_by_position(tmp_path):
    """A model fitted on a header '0,1' (--header): --columns would read its names as
    indexes, so DATA is taken by position — DATA '1,0' gives the labels of its columns as they
    stand, with the warning, and DATA of three columns is refused (before, '1,0,5' was read
    as columns 1 and 0 and every label came out swapped)."""
    X, _ = blobs(n=60, d=2, k=3, seed=4)
    _write(tmp_path / "fit.csv", ["0", "1"], X)
    fit = run(["fit", "--kernel", "rbf", tmp_path / "fit.csv", "--header", "-k", "3", *FAST,
               "-o", tmp_path / "m.npz", "-q"])
    assert fit.exit_code == 0, fit.stderr
    _write(tmp_path / "same.csv", ["1", "0"], X)
    same = run(["predict", tmp_path / "m.npz", tmp_path / "same.csv", "--header"])
    assert same.exit_code == 0 and same.stdout == fit.stdout
    assert "its columns '1', '0' are matched by position to the model's '0', '1'" in same.stderr
    _write(tmp_path / "three.csv", ["1", "0", "5"], np.column_stack([X[:, ::-1], X[:, :1]]))
    three = run(["predict", tmp_path / "m.npz", tmp_path / "three.csv", "--header"])
    assert three.exit_code == 1
    assert "has 3 columns, the model" in three.stderr and "expects 2 features" in three.stderr


def test_a_model_of_one_feature_names_it_in_the_singular(tmp_path):
    X, _ = blobs(n=40, d=2, k=2, seed=1)
    np.savetxt(tmp_path / "one.csv", X[:, :1], delimiter=",")
    np.savetxt(tmp_path / "two.csv", X, delimiter=",")
    fit = run(["fit", "--kernel", "rbf", tmp_path / "one.csv", "-k", "2", *FAST, "-o",
               tmp_path / "m.npz", "-q"])
    assert fit.exit_code == 0, fit.stderr
    result = run(["predict", tmp_path / "m.npz", tmp_path / "two.csv"])
    assert result.exit_code == 1
    assert result.stderr == (f"kkmeans: error: {tmp_path / 'two.csv'}: has 2 columns, the "
                             f"model {tmp_path / 'm.npz'} expects 1 feature; pick it with "
                             f"--columns\n")


def test_the_column_errors_travel_back_from_a_worker_whole():
    """A cluster's worker sends its errors back pickled: what predict words them from (DATA,
    its columns, the name and its places) survives the trip."""
    import pickle

    from kkmeans_cli.errors import AmbiguousColumn, ColumnNotFound, UsageError

    lacked = pickle.loads(pickle.dumps(ColumnNotFound("no 'z'", "d.csv", ["a", "b"])))
    assert (str(lacked), lacked.source, lacked.names) == ("no 'z'", "d.csv", ["a", "b"])
    twice = pickle.loads(pickle.dumps(AmbiguousColumn("two 'a'", "d.csv", "a", [1, 3])))
    assert isinstance(twice, UsageError)
    assert (str(twice), twice.source, twice.name, twice.places) == ("two 'a'", "d.csv", "a",
                                                                   [1, 3])
