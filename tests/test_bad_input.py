"""Every bad input: one-line message, the exit code of docs/cli.md, no traceback, and no
output written or overwritten."""
import json
import os
import pickle

import h5py
import numpy as np
import pytest

from helpers import FAST, OLD, labels_of, listing, run, run_process, write_csv


def check_fails(work, args, code, message, input=None):
    """Run a failing command writing to the protected outputs; check the failure."""
    before = listing(work)
    fit_outputs = ["-o", work / "out.npz", "--labels", work / "labels.txt", "--summary",
                   work / "summary.json"] if args[0] == "fit" else ["--labels",
                                                                    work / "labels.txt"]
    result = run(list(args) + fit_outputs, input=input)
    assert result.exit_code == code, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kkmeans: error: ")
    assert message in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert listing(work) == before  # nothing new, no temporary files left
    assert (work / "out.npz").read_bytes() == OLD
    assert (work / "labels.txt").read_bytes() == OLD
    return lines[0]


# -- data files -----------------------------------------------------------------------------
def test_missing_file(work):
    check_fails(work, ["fit", "--kernel", "rbf", work / "nope.csv", "-k", "2"], 1,
                f"{work / 'nope.csv'}: no such file")


def test_unreadable_file(work):
    (work / "binary.csv").write_bytes(b"\xff\xfe\x00\x81garbage")
    check_fails(work, ["fit", "--kernel", "rbf", work / "binary.csv", "-k", "2"], 1, "not a text file")
    check_fails(work, ["fit", "--kernel", "rbf", work, "-k", "2"], 1, "is a folder, not a data file")


def test_empty_file(work):
    (work / "empty.csv").write_text("")
    check_fails(work, ["fit", "--kernel", "rbf", work / "empty.csv", "-k", "2"], 1,
                f"{work / 'empty.csv'}: the file is empty")


def test_header_only(work):
    (work / "head.csv").write_text("a,b\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "head.csv", "-k", "2"], 1,
                "has a header line but no data rows")


def test_non_numeric_cell(work):
    (work / "bad.csv").write_text("a,b\n1,2\n3,4\n5,oops\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "bad.csv", "-k", "2"], 1,
                f"{work / 'bad.csv'}: line 4, column 2 ('b'): 'oops' is not a number")


def test_ragged_row(work):
    (work / "ragged.csv").write_text("1,2\n3,4\n5\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "ragged.csv", "-k", "2"], 1,
                "line 3 has 1 field, expected 2")


@pytest.mark.parametrize("cell, message", [
    ("nan", "line 3, column 1: missing value ('nan'); use --missing drop"),
    ("", "line 3, column 1: missing value; use --missing drop"),
    ("inf", "line 3, column 1: infinite value 'inf'"),
    ("-Infinity", "line 3, column 1: infinite value '-Infinity'"),
])
def test_nan_or_inf(work, cell, message):
    (work / "nan.csv").write_text(f"1,2\n3,4\n{cell},5\n6,7\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "nan.csv", "-k", "2"], 1, message)


def test_nan_in_npy(work):
    X = np.ones((5, 2))
    X[3, 1] = np.nan
    np.save(work / "nan.npy", X)
    check_fails(work, ["fit", "--kernel", "rbf", work / "nan.npy", "-k", "2"], 1,
                "row 4, column 2: missing value (NaN)")


def test_missing_drop_prints_minus_one(work):
    (work / "nan.csv").write_text("1,2\n3,4\nnan,5\n60,70\n61,70\n")
    result = run(["fit", "--kernel", "rbf", work / "nan.csv", "-k", "2", "--missing", "drop", "--no-model",
                  *FAST])
    assert result.exit_code == 0
    labels = labels_of(result.stdout)
    assert labels.tolist()[2] == -1 and labels.shape == (5,)
    assert labels[0] == labels[1] and labels[3] == labels[4] and labels[0] != labels[3]
    assert "dropped" in result.stderr
    (work / "allnan.csv").write_text("nan,1\n2,nan\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "allnan.csv", "-k", "1", "--missing", "drop"], 1,
                "every row has a missing value")


@pytest.mark.parametrize("kernel", ["rbf", "knn"])
def test_predict_of_rows_that_all_have_a_missing_value_labels_each_minus_one(work, kernel):
    """fit has nothing to cluster when --missing drop drops every row (above); predict gives
    each row -1, as it gives a dropped row among others, so its lines stay aligned (it was
    'nothing is left to cluster', exit 1); --distances writes NaN rows."""
    fit = run(["fit", "--kernel", kernel, work / "data.csv", "-k", "3", "-o", work / "m.npz",
               "-q", "--labels", os.devnull])
    assert fit.exit_code == 0, fit.stderr
    (work / "allnan.csv").write_text("x0,x1\nnan,1\n2,\n")
    result = run(["predict", work / "m.npz", work / "allnan.csv", "--missing", "drop",
                  "--distances", work / "d.csv"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "-1\n-1\n"
    assert "0 rows (2 dropped)" in result.stderr
    assert np.isnan(np.loadtxt(work / "d.csv", delimiter=",")).all()
    np.testing.assert_array_equal(np.loadtxt(work / "d.csv", delimiter=",").shape, (2, 3))
    check_fails(work, ["predict", work / "m.npz", work / "allnan.csv"], 1,
                "allnan.csv: line 2, column 1 ('x0'): missing value")
    # the same where a column holds no value on any row (fit names the column: below)
    (work / "nocolumn.csv").write_text("x0,x1\n,1\n,2\n")
    result = run(["predict", work / "m.npz", work / "nocolumn.csv", "--missing", "drop"])
    assert result.exit_code == 0 and result.stdout == "-1\n-1\n", result.stderr


def test_a_part_of_a_glob_whose_rows_are_all_dropped_leaves_the_others(work):
    """With --missing drop a file of a glob whose every row has a missing value adds none;
    it stopped the whole read ('every row has a missing value'); all parts so: an error."""
    (work / "parts").mkdir()
    (work / "parts" / "a.csv").write_text("x,y\n1,\n,2\n")
    (work / "parts" / "b.csv").write_text("x,y\n0,0\n0.1,0\n5,5\n5.1,5\n")
    pattern = str(work / "parts" / "*.csv")
    fit = run(["fit", "--kernel", "rbf", pattern, "-k", "2", "--missing", "drop", "--no-model",
               *FAST])
    assert fit.exit_code == 0, fit.stderr
    labels = labels_of(fit.stdout)
    assert labels.tolist()[:2] == [-1, -1] and labels[2] == labels[3] != labels[4] == labels[5]
    (work / "parts" / "c.csv").write_text("x,y\n,0\n,1\n")        # a column of no value
    fit = run(["fit", "--kernel", "rbf", pattern, "-k", "2", "--missing", "drop", "--no-model",
               *FAST])
    assert fit.exit_code == 0, fit.stderr
    assert labels_of(fit.stdout).tolist()[6:] == [-1, -1]
    (work / "parts" / "b.csv").write_text("x,y\n,0\n1,\n")
    check_fails(work, ["fit", "--kernel", "rbf", pattern, "-k", "1", "--missing", "drop"], 1,
                f"{pattern}: every row of its files has a missing value; nothing is left to "
                f"cluster")
    # every part ending its lines with a delimiter: the column is named, as for one file
    for name in "abc":
        (work / "parts" / f"{name}.csv").write_text("1,2,\n3,4,\n")
    check_fails(work, ["fit", "--kernel", "rbf", pattern, "-k", "1", "--missing", "drop"], 1,
                f"{work / 'parts' / 'a.csv'}: column 3 holds no value on any row; --columns "
                f"picks the columns to read")


@pytest.mark.parametrize("files, args, message", [
    # int64 cannot hold it: a cast warning and a label -9223372036854775808 before
    ({"ib.txt": "0\n1\n100000000000000000000\n"}, ["--init", "ib.txt"],
     "ib.txt: initial labels value 3 (1e+20) is too large for a whole number"),
    # --missing drop is DATA's: no advice to give it for a weights or labels file
    ({"wn.txt": "1\nnan\n1\n"}, ["--weights", "wn.txt", "--missing", "drop"],
     "wn.txt: line 2, column 1: missing value ('nan')"),
    # a blank line of a file of one column: no delimiter ends it
    ({"ie.txt": "0\n\n1\n"}, ["--init", "ie.txt"], "ie.txt: line 2, column 1: missing value"),
])
def test_weights_and_labels_files_say_what_is_wrong_with_them(work, files, args, message):
    (work / "p3.csv").write_text("1,1\n2,2\n3,3\n")
    for name, text in files.items():
        (work / name).write_text(text)
    args = [str(work / a) if a in files else a for a in args]
    line = check_fails(work, ["fit", "--kernel", "rbf", work / "p3.csv", "-k", "2", *args], 1,
                       message)
    assert line.endswith(message), line


def test_a_repair_with_an_approximation_is_said_in_the_command_lines_words(work):
    check_fails(work, ["fit", "--kernel", "rbf", work / "data.csv", "-k", "2", "--approx",
                       "nystroem", "--psd-repair", "lingoes"], 2,
                "--psd-repair and --solver embed need the exact kernel matrix; they cannot be "
                "used with --approx nystroem")


def test_a_blank_line_of_one_column_is_no_delimiter_ending_it(work):
    (work / "one.csv").write_text("a\n1\n\n2\n")
    line = check_fails(work, ["fit", "--kernel", "rbf", work / "one.csv", "-k", "2"], 1,
                       "one.csv: line 3, column 1 ('a'): missing value; use --missing drop")
    assert "delimiter" not in line


@pytest.mark.parametrize("delimiter, needle", [
    (".", "cannot be '.': letters, digits, '.', '+' and '-' write numbers (1.5e-3, inf, nan), "
          "which it would split"),
    ("-", "cannot be '-'"), ("e", "cannot be 'e'"), ("5", "cannot be '5'"),
    ("n", "cannot be 'n'"), ('"', "cannot be '\"': it ends lines or quotes cells"),
    # every character that ends a line where text is split into lines
    *[(ch, f"cannot be {ch!r}: it ends lines or quotes cells")
      for ch in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"],
])
def test_a_delimiter_that_would_split_numbers_is_refused(work, delimiter, needle):
    """'1.5' read with --delimiter . was two columns, 1 and 5: a usage error now, from the
    command line and from a config."""
    check_fails(work, ["fit", work / "data.csv", "-k", "2", "--delimiter", delimiter], 2, needle)
    (work / "c.yaml").write_text(f"delimiter: {json.dumps(delimiter)}\n")    # YAML's escapes
    check_fails(work, ["fit", work / "data.csv", "-k", "2", "--config", work / "c.yaml"], 2,
                "key 'delimiter': " + needle)


def test_a_delimiter_ending_every_line_names_the_empty_column(work):
    """A delimiter at the end of every line (``x,y,``) makes a last column with no value:
    the first such cell says so and names --columns, --missing drop then says that the
    column holds no value on any row (rather than that every row has a missing value), and
    --columns x,y reads the file."""
    (work / "trailing.csv").write_text("x,y,\n0.27,-0.08,\n0.5,0.1,\n5.0,5.2,\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "trailing.csv", "-k", "2"], 1,
                "trailing.csv: line 2, column 3 (''): missing value (the line ends with a "
                "delimiter: --columns picks the columns to read); use --missing drop to skip "
                "such rows")
    check_fails(work, ["fit", "--kernel", "rbf", work / "trailing.csv", "-k", "2", "--missing",
                       "drop"], 1,
                "trailing.csv: column 3 ('') holds no value on any row; --columns picks the "
                "columns to read")
    (work / "bare.csv").write_text("0.27,-0.08,,\n0.5,0.1,,\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "bare.csv", "-k", "1", "--missing",
                       "drop"], 1,
                "bare.csv: columns 3, 4 hold no value on any row; --columns picks the columns "
                "to read")
    # picked by --columns, an empty column is named by its place in the file
    check_fails(work, ["fit", "--kernel", "rbf", work / "bare.csv", "-k", "1", "--missing",
                       "drop", "--columns", "0,3"], 1,
                "bare.csv: column 4 holds no value on any row; --columns picks the columns "
                "to read")
    check_fails(work, ["fit", "--kernel", "rbf", work / "trailing.csv", "-k", "1", "--missing",
                       "drop", "--columns", "y,2"], 1,
                "trailing.csv: column 3 ('') holds no value on any row")
    X = np.full((3, 4), np.nan)
    X[:, 0] = [0.27, 0.5, 5.0]
    np.save(work / "bare.npy", X)
    check_fails(work, ["fit", "--kernel", "rbf", work / "bare.npy", "-k", "1", "--missing",
                       "drop", "--columns", "0,2"], 1,
                "bare.npy: column 3 holds no value on any row")
    result = run(["fit", "--kernel", "rbf", work / "trailing.csv", "-k", "2", "--columns",
                  "x,y", "--no-model", *FAST])
    assert result.exit_code == 0, result.stderr
    labels = labels_of(result.stdout)
    assert labels[0] == labels[1] != labels[2]
    # a missing value inside a line keeps the plain advice
    (work / "inner.csv").write_text("1,,3\n4,5,6\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "inner.csv", "-k", "1"], 1,
                "inner.csv: line 1, column 2: missing value; use --missing drop to skip such "
                "rows")


@pytest.mark.parametrize("name, extra, why", [
    ("plain.csv", [], "has no header line; use 0-based indexes or --header"),
    ("named.csv", ["--no-header"], "is read without a header (--no-header); use 0-based "
                                   "indexes"),
    ("a.npy", [], "is an array, whose columns have no names; use 0-based indexes"),
    ("a.h5", ["--dataset", "X"], "is an array, whose columns have no names; use 0-based "
                                 "indexes"),
])
def test_a_column_name_where_there_are_no_names_says_what_works(work, name, extra, why):
    """--columns by name for DATA without names: why there are none and what works (an
    array takes indexes alone: --header would be ignored there)."""
    import h5py

    X = np.arange(12.0).reshape(6, 2)
    write_csv(work / "plain.csv", X, header=False)
    write_csv(work / "named.csv", X)
    np.save(work / "a.npy", X)
    with h5py.File(work / "a.h5", "w") as f:
        f["X"] = X
    source = f"{work / name}:X" if name.endswith(".h5") else work / name
    check_fails(work, ["fit", "--kernel", "rbf", work / name, *extra, "-k", "2", "--columns",
                       "x"], 2, f"--columns: 'x' is a name but {source} {why}")


def test_a_columns_item_of_two_minus_signs_is_a_name(work):
    """'--1' is no index (int() reads it not): a name the file lacks, exit 2 — it was
    'unexpected ValueError' for text, .npy, configs and predict, and for Parquet 'not a
    readable Parquet file'."""
    np.save(work / "x.npy", np.random.default_rng(0).standard_normal((30, 2)))
    (work / "c.yaml").write_text('columns: "--1"\n')
    for args, message in (
            (["fit", work / "data.csv", "-k", "2", "--columns=--1"],
             "has no column '--1'"),
            (["fit", work / "data.csv", "-k", "2", "--columns=0,--1"], "has no column '--1'"),
            (["fit", work / "data.csv", "-k", "2", "--config", work / "c.yaml"],
             "has no column '--1'"),
            (["fit", work / "x.npy", "-k", "2", "--columns=--0"],
             "'--0' is a name but"),
            (["predict", work / "model.npz", work / "data.csv", "--columns=--1,0"],
             "has no column '--1'")):
        check_fails(work, args, 2, message)


def test_with_columns_given_a_line_end_is_no_hint_to_give_them(work):
    """A missing value in the last cell of a line, in a column --columns picked: the plain
    advice, not the hint to pick columns."""
    (work / "miss.csv").write_text("a,b,c\n1,2,3\n4,5,\n7,8,9\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "miss.csv", "-k", "2", "--columns",
                       "c,a"], 1,
                "miss.csv: line 3, column 3 ('c'): missing value; use --missing drop to skip "
                "such rows")


# -- option values ----------------------------------------------------------------------------
def test_k_below_one(work):
    check_fails(work, ["fit", "--kernel", "rbf", work / "data.csv", "-k", "0"], 2,
                "Invalid value for '-k' / '--n-clusters': 0 is not in the range x>=1")


@pytest.mark.parametrize("option", ["-k", "--n-init", "--n-neighbors", "--max-iter",
                                    "--threads", "--landmarks"])
def test_a_count_that_is_no_whole_number(work, option):
    """Every count option says the value is not an integer (click's own wording for its
    IntRange type was "not a valid integer range")."""
    args = ["fit", work / "data.csv", "-k", "2"] + [option, "2.5"]
    line = check_fails(work, args, 2, "'2.5' is not a valid integer.")
    assert "range" not in line


def test_predict_threads_that_is_no_whole_number(work):
    check_fails(work, ["predict", work / "model.npz", work / "data.csv", "--threads", "1.5"],
                2, "Invalid value for '--threads': '1.5' is not a valid integer.")


def test_k_above_n(work):
    check_fails(work, ["fit", "--kernel", "rbf", work / "data.csv", "-k", "31"], 1,
                "k = 31 is larger than the number of rows (30)")


def test_k_above_the_rows_left_after_dropping_says_so(work):
    """k above the rows that --missing drop left names the rows dropped (the file seems to
    have enough; the sweep's twin is in test_hostile_inputs.py)."""
    (work / "holes.csv").write_text("x,y\n1,2\n3,\n5,6\n,8\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "holes.csv", "-k", "3", "--missing",
                       "drop"], 1, "holes.csv: k = 3 is larger than the number of rows (2, "
                "after 2 rows with missing values were dropped); use a smaller -k")


def test_too_few_distinct_rows_left_after_dropping_says_so(work):
    (work / "copies.csv").write_text("x,y\n1,2\n3,\n1,2\n")
    check_fails(work, ["fit", "--kernel", "rbf", work / "copies.csv", "-k", "2", "--missing",
                       "drop"], 1, "k can be at most 1, after 1 row with missing values was "
                "dropped; use a smaller -k")


def test_k_missing(work):
    line = ("missing option -k/--n-clusters (or the key 'n_clusters' in --config) (see 'kkmeans "
            "fit --help')")
    check_fails(work, ["fit", "--kernel", "rbf", work / "data.csv"], 2, line)
    # a config's k is the sweep's key: the line names fit's key (it said '-k in --config')
    (work / "k.yaml").write_text("k: 2\n")
    check_fails(work, ["fit", work / "data.csv", "--config", work / "k.yaml"], 2, line)


def test_unknown_kernel(work):
    check_fails(work, ["fit", work / "data.csv", "-k", "2", "--kernel", "gaussian"], 2,
                "Invalid value for '--kernel': 'gaussian' is not one of 'rbf'")


@pytest.mark.parametrize("gamma", ["0", "-1.5", "nan", "wide"])
def test_gamma_not_positive(work, gamma):
    check_fails(work, ["fit", "--kernel", "rbf", work / "data.csv", "-k", "2", "--gamma", gamma], 2,
                "Invalid value for '--gamma'")


def test_unknown_option(work):
    check_fails(work, ["fit", "--kernel", "rbf", work / "data.csv", "-k", "2", "--n-inits", "3"], 2,
                "No such option '--n-inits'")


# -- configs -----------------------------------------------------------------------------------
def test_invalid_yaml(work):
    (work / "bad.yaml").write_text("kernel: rbf\nn_init: [1, 2\n")
    line = check_fails(work, ["fit", work / "data.csv", "-k", "2", "--config",
                              work / "bad.yaml"], 2, "not valid YAML at line")
    assert str(work / "bad.yaml") in line


def test_unknown_config_key(work):
    (work / "typo.yaml").write_text("n_clusterz: 3\n")
    check_fails(work, ["fit", work / "data.csv", "--config", work / "typo.yaml"], 2,
                "unknown key 'n_clusterz'; did you mean 'n_clusters'?")


@pytest.mark.parametrize("text, message", [
    ("n_init: ten\n", "key 'n_init' must be an integer; got 'ten' (str)"),
    ("n_init: 2.5\n", "key 'n_init' must be an integer; got 2.5 (float)"),
    ("tol: yes\n", "key 'tol' must be a number; got True (bool)"),
    ("quiet: 1\n", "key 'quiet' must be true or false"),
    ("kernel: gaussian\n", "key 'kernel': 'gaussian' is not one of"),
    ("gamma: -1\n", "key 'gamma': must be a positive number"),
    ("n_init: 0\n", "key 'n_init': 0 is not in the range x>=1"),
])
def test_wrong_config_value_type(work, text, message):
    (work / "typed.yaml").write_text(text)
    check_fails(work, ["fit", work / "data.csv", "-k", "2", "--config", work / "typed.yaml"],
                2, message)


def test_config_file_missing(work):
    check_fails(work, ["fit", work / "data.csv", "-k", "2", "--config", work / "no.yaml"], 2,
                "no.yaml: no such file")


# -- HDF5 ----------------------------------------------------------------------------------------
def test_hdf5_file_missing(work):
    check_fails(work, ["fit", "--kernel", "rbf", f"{work / 'none.h5'}:/x", "-k", "2"], 1,
                f"{work / 'none.h5'}: no such file")


def test_hdf5_dataset_missing(work):
    with h5py.File(work / "d.h5", "w") as f:
        f.create_dataset("features", data=np.ones((4, 2)))
    check_fails(work, ["fit", "--kernel", "rbf", f"{work / 'd.h5'}:/other", "-k", "2"], 1,
                "no such dataset in")
    check_fails(work, ["fit", "--kernel", "rbf", work / "d.h5", "--dataset", "/other", "-k", "2"], 1,
                "(datasets: /features)")


def test_hdf5_dataset_not_2d(work):
    with h5py.File(work / "d.h5", "w") as f:
        f.create_dataset("vector", data=np.arange(5.0))
        f.create_dataset("cube", data=np.ones((2, 2, 2)))
    check_fails(work, ["fit", "--kernel", "rbf", f"{work / 'd.h5'}:/vector", "-k", "2"], 1,
                "expected a 2-D array (rows × features), got 1-D shape (5,)")
    check_fails(work, ["fit", "--kernel", "rbf", f"{work / 'd.h5'}:/cube", "-k", "2"], 1, "got 3-D")


def test_hdf5_dataset_of_no_array(work):
    """A null dataspace (h5py.Empty) holds no array: one line, not 'unexpected TypeError'."""
    with h5py.File(work / "e.h5", "w") as f:
        f["e"] = h5py.Empty("f8")
    for spec in (f"{work / 'e.h5'}:/e", work / "e.h5"):
        check_fails(work, ["fit", spec, "-k", "2"], 1,
                    f"{work / 'e.h5'}:/e: holds no array (an empty dataspace)")
    check_fails(work, ["predict", work / "model.npz", f"{work / 'e.h5'}:/e"], 1,
                "holds no array (an empty dataspace)")


def test_dataset_of_a_file_that_is_not_hdf5(work):
    """--dataset with a CSV, .npy or Parquet file: said so (it was 'not a readable HDF5
    file'); an HDF5 file without an HDF5 ending, user block or not, is read."""
    X = np.random.default_rng(0).standard_normal((30, 2))
    np.save(work / "x.npy", X)
    check_fails(work, ["fit", "--kernel", "rbf", work / "x.npy", "--dataset", "/x", "-k", "2"],
                1, f"{work / 'x.npy'}: --dataset names a dataset inside an HDF5 file, and this "
                   f"file is not HDF5; drop --dataset")
    check_fails(work, ["fit", "--kernel", "rbf", work / "data.csv", "--dataset", "/x", "-k",
                       "2"], 1, "and this file is not HDF5; drop --dataset")
    want = run(["fit", "--kernel", "rbf", work / "x.npy", "-k", "2", "--no-model", "-q"])
    for name, block in (("plain.data", 0), ("block.data", 1024), ("big.data", 2 ** 21)):
        with h5py.File(work / name, "w", userblock_size=block) as f:
            f.create_dataset("x", data=X)
        got = run(["fit", "--kernel", "rbf", work / name, "--dataset", "/x", "-k", "2",
                   "--no-model", "-q"])
        assert got.exit_code == 0, got.stderr
        assert got.stdout == want.stdout


# -- predict and model files -------------------------------------------------------------------
def test_predict_different_number_of_features(work):
    # Without a header (with one, the model's columns are taken by name: test_predict_columns)
    write_csv(work / "three.csv", np.ones((4, 3)), header=False)
    check_fails(work, ["predict", work / "model.npz", work / "three.csv"], 1,
                "has 3 columns, the model")


def test_truncated_model(work):
    data = (work / "model.npz").read_bytes()
    (work / "cut.npz").write_bytes(data[: len(data) // 2])
    line = check_fails(work, ["predict", work / "cut.npz", work / "data.csv"], 1,
                       str(work / "cut.npz"))
    assert "not a kkmeans model" in line or "corrupt" in line


def test_corrupt_model(work):
    (work / "junk.npz").write_bytes(os.urandom(300))
    check_fails(work, ["predict", work / "junk.npz", work / "data.csv"], 1,
                "not a kkmeans model")


def _rewrite_model(src, dst, **changes):
    with np.load(src) as model:
        arrays = {key: model[key] for key in model.files}
    meta = json.loads(str(arrays["meta"]))
    meta.update(changes.pop("meta", {}))
    arrays["meta"] = np.array(json.dumps(meta))
    arrays.update(changes)
    np.savez(dst, **arrays)


def test_newer_format_version(work):
    _rewrite_model(work / "model.npz", work / "new.npz", meta={"format_version": 99})
    check_fails(work, ["predict", work / "new.npz", work / "data.csv"], 1,
                "format_version 99 is newer than this kkmeans")
    result = run(["info", work / "new.npz"])
    assert result.exit_code == 1 and "(format_version 3)" in result.stderr


class _Marker:
    """Unpickling this creates a marker file: proof that a pickle was (wrongly) loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickled_object_arrays_refused_never_unpickled(work):
    marker = work / "UNPICKLED"
    with np.load(work / "model.npz") as model:
        arrays = {key: model[key] for key in model.files}
    arrays["labels"] = np.array([_Marker(str(marker))] * 30, dtype=object)
    np.savez(work / "evil.npz", **arrays)
    assert pickle.dumps(_Marker(str(marker)))  # the payload would create the marker
    check_fails(work, ["predict", work / "evil.npz", work / "data.csv"], 1,
                "array 'labels' holds pickled Python objects; refused")
    result = run(["info", work / "evil.npz"])
    assert result.exit_code == 1
    assert not marker.exists()


def test_model_with_missing_array(work):
    with np.load(work / "model.npz") as model:
        arrays = {key: model[key] for key in model.files if key != "inner_sums"}
    np.savez(work / "partial.npz", **arrays)
    check_fails(work, ["predict", work / "partial.npz", work / "data.csv"], 1,
                "the required array 'inner_sums' is missing")


# -- outputs --------------------------------------------------------------------------------
def test_output_folder_missing(work):
    result = run(["fit", "--kernel", "rbf", work / "data.csv", "-k", "2", "-o", work / "nodir" / "m.npz",
                  "--labels", work / "labels.txt"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"kkmeans: error: cannot write the model to "
                                     f"{work / 'nodir' / 'm.npz'}: folder {work / 'nodir'} "
                                     f"does not exist")
    assert (work / "labels.txt").read_bytes() == OLD
    assert not (work / "nodir").exists()


def test_output_folder_not_writable(work):
    # Tests run as root, so chmod cannot make a folder unwritable: use a file as the folder.
    result = run(["fit", "--kernel", "rbf", work / "data.csv", "-k", "2", "--no-model", "--labels",
                  work / "data.csv" / "labels.txt", "--summary", work / "s.json"])
    assert result.exit_code == 1
    assert "is a file, not a folder" in result.stderr
    assert not (work / "s.json").exists()
    result = run(["predict", work / "model.npz", work / "data.csv", "--distances",
                  work / "missing" / "d.csv"])
    assert result.exit_code == 1 and "folder" in result.stderr


# -- degenerate data ------------------------------------------------------------------------
def test_distances_that_underflow_are_not_called_identical_points(work):
    """Distinct points of order 1e-310: their squared distances underflow to 0, so the
    median gamma is undefined; the warning says so and how to fix it, not that the points
    are identical, and --scale standard separates them."""
    X = np.random.default_rng(0).normal(size=(40, 2)) * 1e-310
    X[:20, 0] += 5e-310
    write_csv(work / "tiny.csv", X, fmt="%.17g")
    result = run(["fit", "--kernel", "rbf", work / "tiny.csv", "-k", "2", "--no-model", *FAST])
    assert result.exit_code == 0, result.stderr
    first = result.stderr.splitlines()[0]
    assert first == ("kkmeans: warning: the median heuristic for gamma is undefined (the "
                     "squared distances between the points underflow to 0); using gamma = "
                     "1.0; rescale the data, e.g. scale='standard' (--scale standard)")
    scaled = run(["fit", "--kernel", "rbf", work / "tiny.csv", "-k", "2", "--no-model",
                  "--scale", "standard", *FAST])
    assert scaled.exit_code == 0 and "warning" not in scaled.stderr, scaled.stderr
    assert len(set(labels_of(scaled.stdout)[:20])) == 1


def test_all_points_identical_warns_and_falls_back(work):
    # k = 1: the one cluster there is, with the gamma fallback (k = 2 is refused: see
    # test_cli_refuses_fewer_distinct_points_than_k in test_robust.py).
    write_csv(work / "same.csv", np.full((10, 2), 3.0))
    result = run(["fit", "--kernel", "rbf", work / "same.csv", "-k", "1", "-o", work / "same.npz", *FAST])
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warnings, result.stderr
    assert all(line.startswith("kkmeans: warning: ") for line in warnings)
    assert any("all points are identical" in line and "gamma = 1.0" in line
               for line in warnings)
    assert labels_of(result.stdout).shape == (10,)
    info = json.loads(run(["info", work / "same.npz", "--json"]).stdout)
    assert info["gamma"] == 1.0
    quiet = run(["fit", "--kernel", "rbf", work / "same.csv", "-k", "1", "--no-model", "--quiet", *FAST])
    assert quiet.stderr == ""


def test_errors_as_subprocess(work):
    """The same one-line contract from the real executable."""
    result = run_process(["fit", "--kernel", "rbf", "data.csv", "-k", "0"], work)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("kkmeans: error: Invalid value for '-k'")
    (work / "bad.csv").write_text("1,2\n3,x\n")
    result = run_process(["fit", "--kernel", "rbf", "bad.csv", "-k", "1"], work)
    assert result.returncode == 1
    assert result.stderr == "kkmeans: error: bad.csv: line 2, column 2: 'x' is not a number\n"
