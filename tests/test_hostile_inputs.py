"""More hostile and careless inputs: each refused with one ``kkmeans: error:`` line, the
exit code of docs/cli.md (1 data or files, 2 usage) and no output file left behind."""
import numpy as np
import pytest

from helpers import FAST, assert_one_error_line, blobs, listing, run, run_process, write_csv


def _data(tmp_path, n=30):
    X, _ = blobs(n=n)
    return write_csv(tmp_path / "x.csv", X)


# ---- weights whose products underflow floating point ------------------------------------

@pytest.mark.parametrize("value", [1e-200, 5e-324])
@pytest.mark.parametrize("command", ["fit", "sweep"])
def test_weights_too_small_for_floating_point_are_refused(tmp_path, value, command):
    data = _data(tmp_path)
    np.savetxt(tmp_path / "w.txt", np.full(30, value))
    args = ([command, data, "-k", 3, "-o", tmp_path / "m.npz", "--labels", tmp_path / "l.txt"]
            if command == "fit" else
            [command, data, "--k", "2..3", "-o", tmp_path / "m.npz",
             "--table", tmp_path / "t.csv"])
    result = run(args + ["--weights", tmp_path / "w.txt", "--threads", 1, "-q"])
    assert result.exit_code == 1
    assert_one_error_line(result, "--weights", "must stay above 2.23e-308",
                          "multiply the weights by a common factor")
    assert "Probabilities" not in result.stderr
    assert listing(tmp_path) == sorted(["x.csv", "w.txt"])


def test_small_weights_with_a_normal_square_sum_give_the_unweighted_labels(tmp_path):
    data = _data(tmp_path)
    np.savetxt(tmp_path / "w.txt", np.full(30, 1e-150))
    weighted = run(["fit", "--kernel", "rbf", data, "-k", 3, "--no-model", "--weights", tmp_path / "w.txt",
                    "-q"] + FAST)
    plain = run(["fit", "--kernel", "rbf", data, "-k", 3, "--no-model", "-q"] + FAST)
    assert weighted.exit_code == 0 and plain.exit_code == 0, weighted.stderr
    assert weighted.stdout == plain.stdout


def test_estimator_refuses_weights_too_small_for_floating_point():
    from kkmeans_cli.errors import DataError
    from kkmeans_cli.model.estimator import KernelKMeans

    X, _ = blobs(n=20)
    with pytest.raises(DataError, match="must stay above"):
        KernelKMeans(3, kernel="rbf", random_state=0, n_threads=1).fit(X, sample_weight=np.full(20, 1e-200))


def test_all_zero_weights_are_named_as_such(tmp_path):
    data = _data(tmp_path)
    np.savetxt(tmp_path / "w.txt", np.zeros(30))
    result = run(["fit", "--kernel", "rbf", data, "-k", 3, "-o", tmp_path / "m.npz", "--weights",
                  tmp_path / "w.txt", "-q"])
    assert result.exit_code == 1
    assert_one_error_line(result, "--weights", "every weight is 0")
    assert "at most 0" not in result.stderr
    assert listing(tmp_path) == sorted(["x.csv", "w.txt"])


# ---- option values refused in the command line's words, not the estimator's -------------

@pytest.mark.parametrize("command", ["fit", "sweep"])
@pytest.mark.parametrize("option,value,needle", [
    ("--seed", "-1", "0<=x<=4294967295"),
    ("--seed", "99999999999999999999999", "0<=x<=4294967295"),
    ("--tol", "inf", "not a finite number"),
    ("--tol", "nan", "not a finite number"),
    ("--coef0", "nan", "not a finite number"),
    ("--coef0", "-inf", "not a finite number"),
])
def test_non_finite_or_out_of_range_option_values_are_usage_errors(tmp_path, command, option,
                                                                   value, needle):
    data = _data(tmp_path)
    k = ["-k", "3"] if command == "fit" else ["--k", "2..3"]
    result = run([command, data, *k, "-o", tmp_path / "m.npz", "--kernel", "poly",
                  f"{option}={value}", "-q"])
    assert result.exit_code == 2
    assert_one_error_line(result, f"'{option}'", needle)
    for internal in ("KernelKMeans", "random_state", "parameter"):
        assert internal not in result.stderr
    assert listing(tmp_path) == sorted(["x.csv"])


@pytest.mark.parametrize("line,needle", [("seed: -1", "0<=x<=4294967295"),
                                         ("tol: .inf", "not a finite number"),
                                         ("coef0: .nan", "not a finite number")])
def test_config_values_get_the_same_checks(tmp_path, line, needle):
    data = _data(tmp_path)
    (tmp_path / "c.yaml").write_text(line + "\n")
    result = run(["fit", data, "-k", 3, "-o", tmp_path / "m.npz", "--config",
                  tmp_path / "c.yaml", "-q"])
    assert result.exit_code == 2
    assert_one_error_line(result, "c.yaml", needle)
    assert "KernelKMeans" not in result.stderr
    assert listing(tmp_path) == sorted(["x.csv", "c.yaml"])


def test_the_largest_seed_is_accepted(tmp_path):
    data = _data(tmp_path)
    result = run(["fit", "--kernel", "rbf", data, "-k", 3, "--no-model", "--seed", 2 ** 32 - 1, "-q"] + FAST)
    assert result.exit_code == 0, result.stderr
    assert len(result.stdout.split()) == 30


# ---- the model file's best_restart is 1-based (docs/model-format.md), the API's 0-based ---

def test_best_restart_is_one_based_in_the_file_and_zero_based_after_loading(tmp_path):
    import json

    from kkmeans_cli.model.model_file import load_model

    data = _data(tmp_path)
    result = run(["fit", "--kernel", "rbf", data, "-k", 3, "-o", tmp_path / "m.npz", "--summary",
                  tmp_path / "s.json", "-q", "--threads", 1, "--n-init", 4])
    assert result.exit_code == 0, result.stderr
    best = json.loads((tmp_path / "s.json").read_text())["best_restart"]
    loaded = load_model(str(tmp_path / "m.npz"))
    assert loaded.meta["fit_stats"]["best_restart"] == best
    assert loaded.estimator.fit_stats_["best_restart"] == best - 1


# ---- numbers in text files: the decimal notation of CSV, not all that Python's float reads --

@pytest.mark.parametrize("cell", ["1_000", "١٢", "１２"])
@pytest.mark.parametrize("command", ["fit", "predict"])
def test_python_only_number_spellings_are_not_numbers(tmp_path, cell, command):
    X, _ = blobs(n=30)
    good = write_csv(tmp_path / "good.csv", X)
    lines = (tmp_path / "good.csv").read_text().splitlines()
    lines[4] = f"1.0,{cell}"
    (tmp_path / "x.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if command == "predict":
        assert run(["fit", "--kernel", "rbf", good, "-k", 3, "-o", tmp_path / "m.npz", "-q"] + FAST).exit_code == 0
        args = ["predict", tmp_path / "m.npz", tmp_path / "x.csv", "--labels",
                tmp_path / "l.txt"]
        before = ["good.csv", "m.npz", "x.csv"]
    else:
        args = ["fit", "--kernel", "rbf", tmp_path / "x.csv", "-k", 3, "-o", tmp_path / "m.npz", "--labels",
                tmp_path / "l.txt"]
        before = ["good.csv", "x.csv"]
    result = run(args + ["-q"])
    assert result.exit_code == 1
    assert_one_error_line(result, "x.csv: line 5, column 2", f"{cell!r} is not a number")
    assert listing(tmp_path) == sorted(before)



def test_scientific_and_signed_spellings_still_read(tmp_path):
    (tmp_path / "x.csv").write_text("1e3,+.5\n-2.5E-1,7.\n0,0\n")
    result = run(["fit", "--kernel", "rbf", tmp_path / "x.csv", "-k", 3, "--no-model", "--with-data", "-q"] + FAST)
    assert result.exit_code == 0, result.stderr
    rows = [line.split(",")[:2] for line in result.stdout.splitlines()]
    assert [[float(a), float(b)] for a, b in rows] == [[1000.0, 0.5], [-0.25, 7.0], [0.0, 0.0]]


# ---- model metadata of the wrong type or size: "corrupt model", in plain words -------------

def _model_with_meta(tmp_path, **changes):
    import io
    import json
    import zipfile

    data = _data(tmp_path)
    assert run(["fit", "--kernel", "rbf", data, "-k", 3, "-o", tmp_path / "good.npz", "-q"] + FAST).exit_code == 0
    with zipfile.ZipFile(tmp_path / "good.npz") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    meta = json.loads(str(np.load(io.BytesIO(members["meta.npy"]), allow_pickle=False)))
    meta.update(changes)
    buffer = io.BytesIO()
    np.save(buffer, np.array(json.dumps(meta)))
    members["meta.npy"] = buffer.getvalue()
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as archive:
        for name, raw in members.items():
            archive.writestr(name, raw)
    return data


@pytest.mark.parametrize("changes,needle", [
    (dict(n_clusters="3"), "meta 'n_clusters' is missing or not an integer"),
    (dict(format_version="2"), "meta 'format_version' is missing or not an integer"),
    (dict(kernel=3), "meta 'kernel' is missing or not a string"),
    (dict(n_clusters=10 ** 30), "meta 'n_clusters' must be an integer from 1 to 2**63 - 1; "
                                "got 1000000000000000000000000000000"),
    (dict(n_samples=0), "meta 'n_samples' must be an integer from 1 to 2**63 - 1; got 0"),
])
@pytest.mark.parametrize("command", ["info", "predict"])
def test_model_meta_of_the_wrong_type_or_size_is_named_plainly(tmp_path, changes, needle,
                                                               command):
    data = _model_with_meta(tmp_path, **changes)
    args = (["info", tmp_path / "bad.npz"] if command == "info" else
            ["predict", tmp_path / "bad.npz", data, "--labels", tmp_path / "l.txt"])
    result = run(args)
    assert result.exit_code == 1
    assert_one_error_line(result, "bad.npz: corrupt model: " + needle)
    assert "a int" not in result.stderr and "at least 1" not in result.stderr
    assert result.stdout == ""
    assert listing(tmp_path) == sorted(["x.csv", "good.npz", "bad.npz"])


# ---- error messages keep file names and config keys as the user wrote them ---------------

def test_paths_that_look_like_api_names_are_not_reworded(tmp_path):
    (tmp_path / "max_iter").mkdir()
    (tmp_path / "max_iter" / "n_init.csv").write_text("a,b\n1,x\n")
    result = run_process(["fit", "--kernel", "rbf", "max_iter/n_init.csv", "-k", "2", "-q", "--no-model"],
                         cwd=tmp_path)
    assert result.returncode == 1
    assert_one_error_line(result,
                          "max_iter/n_init.csv: line 2, column 2 ('b'): 'x' is not a number")
    assert "--max-iter" not in result.stderr and "--n-init" not in result.stderr
    data = _data(tmp_path)
    result = run(["fit", "--kernel", "rbf", data, "-k", 3, "-q", "-o", tmp_path / "n_clusters" / "m.npz"])
    assert result.exit_code == 1
    assert_one_error_line(result, "cannot write the model to", "n_clusters/m.npz")
    assert "-k/" not in result.stderr
    assert listing(tmp_path) == sorted(["max_iter", "x.csv"])


def test_the_api_wording_still_applies_to_the_api_messages():
    from kkmeans_cli.cli.report import cli_wording

    assert cli_wording("n_clusters=3 is too many; max_iter must be positive.") == (
        "-k 3 is too many; --max-iter must be positive.")


def test_config_key_list_names_config_keys(tmp_path):
    data = _data(tmp_path)
    (tmp_path / "c.yaml").write_text("max_iterr: 3\n")
    result = run(["fit", data, "-k", 3, "-o", tmp_path / "m.npz", "--config",
                  tmp_path / "c.yaml"])
    assert result.exit_code == 2
    assert_one_error_line(result, "unknown key 'max_iterr'; did you mean 'max_iter'?",
                          "landmarks, max_iter, memory_limit,", " n_clusters, n_init,",
                          " psd_repair,")
    assert "--max-iter" not in result.stderr and "-k," not in result.stderr
    assert listing(tmp_path) == sorted(["x.csv", "c.yaml"])


@pytest.mark.parametrize("text,lines", [("seed: 1\nkernel: rbf\nseed: 2\n", "lines 1 and 3"),
                                        ("{seed: 1, seed: 2}\n", "lines 1 and 1")])
@pytest.mark.parametrize("command", ["fit", "sweep", "predict"])
def test_a_config_key_given_twice_is_refused(tmp_path, text, lines, command):
    data = _data(tmp_path)
    (tmp_path / "c.yaml").write_text(text)
    if command == "predict":
        assert run(["fit", "--kernel", "rbf", data, "-k", 3, "-o", tmp_path / "m.npz", "-q"] + FAST).exit_code == 0
        args = ["predict", tmp_path / "m.npz", data, "--labels", tmp_path / "l.txt"]
        before = ["x.csv", "c.yaml", "m.npz"]
    elif command == "sweep":
        args = ["sweep", "--kernel", "rbf", data, "--k", "2..3", "--table", tmp_path / "t.csv"]
        before = ["x.csv", "c.yaml"]
    else:
        args = ["fit", "--kernel", "rbf", data, "-k", 3, "-o", tmp_path / "m.npz"]
        before = ["x.csv", "c.yaml"]
    result = run(args + ["--config", tmp_path / "c.yaml"])
    assert result.exit_code == 2
    assert_one_error_line(result, f"c.yaml: key 'seed' is given twice ({lines}); keep one")
    assert listing(tmp_path) == sorted(before)


def test_a_yaml_merge_key_may_be_overridden(tmp_path):
    data = _data(tmp_path)
    (tmp_path / "c.yaml").write_text("seed: 1\n<<: {seed: 2, tol: 0.001}\n")
    merged = run(["fit", "--kernel", "rbf", data, "-k", 3, "--no-model", "-q", "--config",
                  tmp_path / "c.yaml"] + FAST)
    plain = run(["fit", "--kernel", "rbf", data, "-k", 3, "--no-model", "-q", "--seed", 1, "--tol", 0.001] + FAST)
    assert merged.exit_code == 0, merged.stderr
    assert merged.stdout == plain.stdout


# ---- MODEL given as '-' ----------------------------------------------------------------------

@pytest.mark.parametrize("command", ["info", "predict"])
def test_model_from_standard_input_is_a_usage_error(tmp_path, command):
    data = _data(tmp_path)
    assert run(["fit", "--kernel", "rbf", data, "-k", 3, "-o", tmp_path / "m.npz", "-q"] + FAST).exit_code == 0
    raw = (tmp_path / "m.npz").read_bytes()
    args = ["info", "-"] if command == "info" else ["predict", "-", data, "--labels", "l.txt"]
    result = run_process(args, cwd=tmp_path, input=raw.decode("latin-1"))
    assert result.returncode == 2
    assert_one_error_line(result, "MODEL '-': a model is read from its .npz file, not from "
                                  "standard input")
    assert "no such file" not in result.stderr and result.stdout == ""
    assert listing(tmp_path) == sorted(["x.csv", "m.npz"])


# ---- --columns naming one column twice ---------------------------------------------------------

@pytest.mark.parametrize("columns,needle", [("x0,x0", "column 'x0' is listed twice;"),
                                            ("0,x0", "column 'x0' is listed twice (as '0');")])
@pytest.mark.parametrize("command", ["fit", "sweep"])
def test_a_column_listed_twice_is_a_usage_error(tmp_path, columns, needle, command):
    data = _data(tmp_path)
    k = ["-k", 3, "-o", tmp_path / "m.npz"] if command == "fit" else ["--k", "2..3",
                                                                      "--table", tmp_path / "t"]
    result = run([command, data, *k, "--columns", columns, "-q"])
    assert result.exit_code == 2
    assert_one_error_line(result, "--columns: " + needle)
    assert listing(tmp_path) == sorted(["x.csv"])


def test_a_column_listed_twice_in_an_npy_file_is_a_usage_error(tmp_path):
    X, _ = blobs(n=30)
    np.save(tmp_path / "x.npy", X)
    result = run(["fit", "--kernel", "rbf", tmp_path / "x.npy", "-k", 3, "-o", tmp_path / "m.npz", "--columns",
                  "1,1", "-q"])
    assert result.exit_code == 2
    assert_one_error_line(result, "--columns: column '1' is listed twice;")
    assert listing(tmp_path) == sorted(["x.npy"])


@pytest.mark.parametrize("command", ["fit", "sweep"])
def test_a_name_the_header_repeats_is_picked_by_index_only(tmp_path, command):
    """--columns x of a header x,x,y: which x is meant only an index says (before, the first
    was taken silently). A usage error naming both places; an index picks either."""
    X, _ = blobs(n=30)
    with open(tmp_path / "x.csv", "w") as f:
        f.write("x,x,y\n" + "".join(f"{a},{b},{a + b}\n" for a, b in X.tolist()))
    out = ["-k", 3, "-o", tmp_path / "m.npz"] if command == "fit" else ["--k", "2..3",
                                                                        "--table", tmp_path / "t"]
    result = run_process([command, "x.csv", *out, "--columns", "x,y", "-q"], cwd=tmp_path)
    assert_one_error_line(result, "--columns: x.csv has 2 columns named 'x' (0-based indexes "
                                  "0, 1); pick one by its index", code=2)
    assert listing(tmp_path) == sorted(["x.csv"])
    picked = run([command, tmp_path / "x.csv", *out, "--columns", "1,y", "-q"])
    assert picked.exit_code == 0, picked.stderr


def test_a_sweep_above_the_rows_left_after_dropping_says_so(tmp_path):
    (tmp_path / "holes.csv").write_text("x,y\n1,2\n3,\n5,6\n,8\n")
    result = run(["sweep", tmp_path / "holes.csv", "--k", "2-3", "--missing", "drop", "--table",
                  tmp_path / "t.csv"])
    assert_one_error_line(result, "holes.csv: k = 3 is too large for 2 rows, after 2 rows with "
                                  "missing values were dropped (a sweep on a graph needs k ≤ "
                                  "rows = 2); use a smaller --k", code=1)
    assert listing(tmp_path) == sorted(["holes.csv"])
    # two rows of one point: no k ≥ 2 fits, and no smaller --k helps
    (tmp_path / "twice.csv").write_text("1,1\n1,1\n")
    for kernel, line in (("knn", "the data have 1 distinct point (of positive weight), fewer "
                                 "than the 2 clusters asked for; k can be at most 1; a "
                                 "sweep's ks start at 2, so these data cannot be swept"),
                         ("rbf", "k = 2 is too large for 2 rows (a sweep needs k ≤ rows − 1 "
                                 "= 1); a sweep's ks start at 2, so these data cannot be "
                                 "swept")):
        result = run(["sweep", tmp_path / "twice.csv", "--k", "2", "--kernel", kernel,
                      "--table", tmp_path / "t.csv"])
        assert_one_error_line(result, f"{tmp_path / 'twice.csv'}: {line}", code=1)
        assert listing(tmp_path) == sorted(["holes.csv", "twice.csv"])


# ---- a huge --n-init is a usage error, not a failed allocation --------------------------------

@pytest.mark.parametrize("command", ["fit", "sweep"])
def test_a_huge_n_init_is_a_usage_error(tmp_path, command):
    data = _data(tmp_path)
    k = ["-k", 3, "-o", tmp_path / "m.npz"] if command == "fit" else ["--k", "2..3"]
    result = run([command, data, *k, "--n-init", "99999999999999", "-q"])
    assert result.exit_code == 2
    assert_one_error_line(result, "'--n-init': 99999999999999 is more than 1,000,000")
    assert "memory" not in result.stderr
    assert listing(tmp_path) == sorted(["x.csv"])


# ---- an empty output path ------------------------------------------------------------------

@pytest.mark.parametrize("args,what", [(["fit", "--kernel", "rbf", "-k", "3", "--no-model", "--labels", ""], "labels"),
                                       (["fit", "--kernel", "rbf", "-k", "3", "-o", ""], "model"),
                                       (["sweep", "--kernel", "rbf", "--k", "2..3", "--table", ""], "table")])
def test_an_empty_output_path_is_named_as_empty(tmp_path, args, what):
    data = _data(tmp_path)
    result = run_process([args[0], data, *args[1:], "-q"], cwd=tmp_path)
    assert result.returncode == 1
    assert_one_error_line(result, f"cannot write the {what}: the path is empty")
    assert "folder" not in result.stderr and result.stdout == ""
    assert listing(tmp_path) == sorted(["x.csv"])
