"""A run config is read within bounds (``io.config``: size, nesting, alias expansion) and every
value in it is checked; messages show a short excerpt of a value, and an error about an option
that a config set names the config and the key. Each case checks the exit code, the message
and that no output is written."""
import os

import pytest

from helpers import FAST, blobs, run, write_csv


@pytest.fixture
def work(tmp_path):
    X, _ = blobs(n=30, d=2, k=3)
    write_csv(tmp_path / "data.csv", X)
    return tmp_path


def _fit(work, text, *extra, command="fit"):
    (work / "run.yaml").write_text(text)
    args = [command, work / "data.csv", *FAST, "--config", work / "run.yaml", "-q"]
    if command == "fit":
        args += ["-k", "3", "-o", work / "new.npz", "--labels", work / "new.txt"]
    else:
        args += ["-o", work / "new.npz", "--table", work / "new.csv"]
    result = run(args + list(extra))
    assert sorted(os.listdir(work)) == ["data.csv", "run.yaml"]  # nothing written
    return result


def _one_line(result, code, needle, longest=300):
    assert result.exit_code == code, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kkmeans: error: "), result.stderr[:2000]
    assert needle in lines[0], lines[0]
    assert len(lines[0]) <= longest, len(lines[0])


def _laughs(levels, width=9, key="columns"):
    lines = [f"{key}:", f"  - &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"  - &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [5, 7, 9])
def test_an_alias_bomb_is_refused_before_it_expands(work, levels):
    text = _laughs(levels)
    assert len(text) < 1000
    _one_line(_fit(work, text), 2, "its aliases expand to more than 10,000 values")


def test_an_alias_bomb_through_merge_keys_is_refused(work):
    lines = ["a0: &a0 {" + ", ".join(f"k{j}: lol" for j in range(9)) + "}"]
    for i in range(1, 7):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append("seed: {<<: [*a5]}")
    _one_line(_fit(work, "\n".join(lines) + "\n"), 2, "expand to more than 10,000 values")


@pytest.mark.parametrize("text", [
    "".join(f"k{i}: 1\n" for i in range(9000)),                 # many keys, no alias
    "columns: [" + ", ".join(["a"] * 10_500) + "]\n",           # one long list
])
def test_a_config_too_large_without_aliases_does_not_blame_aliases(work, text):
    assert len(text) < 2 ** 20 and "*" not in text
    _one_line(_fit(work, text), 2, "it holds more than 10,000 values; a run config holds a "
                                   "few option values")


def test_a_few_aliases_within_the_bound_still_work(work):
    (work / "run.yaml").write_text("seed: &s 7\nn_init: *s\n")
    result = run(["fit", work / "data.csv", "-k", "3", "--threads", "1", "--config",
                  work / "run.yaml", "--no-model", "-q"])
    assert result.exit_code == 0, result.stderr
    assert len(result.stdout.split()) == 30


@pytest.mark.parametrize("text, needle", [
    ("n_init: " + "[" * 10000 + "]" * 10000 + "\n", "nested more than 32 levels deep at line 1"),
    ("columns:\n" + "".join("  " * i + "- \n" for i in range(1, 200)),
     "nested more than 32 levels deep"),
    ("a: &a [*a]\n", "line 1: an alias refers to the value that holds it"),
    ("seed: " + "9" * 5000 + "\n", "holds a number too long to read"),
])
def test_deep_or_self_referring_values_are_config_errors(work, text, needle):
    _one_line(_fit(work, text), 2, needle)


def test_a_config_larger_than_a_config_is_refused(work):
    _one_line(_fit(work, "columns: " + "x" * (2 << 20) + "\n"), 2, "is larger than 1024 KiB")


@pytest.mark.parametrize("text, needle", [
    ("n_init: [" + ", ".join(["123456789"] * 2000) + "]\n",
     "key 'n_init' must be an integer; got [123456789, 123456789"),
    ("kernel: " + "x" * 100000 + "\n", "key 'kernel'"),
    ("k" * 1000 + ": 1\n", "unknown key 'kkkk"),
    ("? " + "k" * 100000 + "\n: 1\n", "unknown key 'kkkk"),
    ("columns: {" + ", ".join(f"k{j}: {j}" for j in range(3000)) + "}\n", "key 'columns'"),
])
def test_messages_show_a_short_excerpt_of_a_value(work, text, needle):
    _one_line(_fit(work, text), 2, needle, longest=1200)


def test_a_long_value_used_as_is_is_cut_in_the_message(work):
    result = _fit(work, "columns: " + "x," * 200000 + "x\n")
    _one_line(result, 2, "--columns", longest=2400)
    assert "(--columns is key 'columns' of config" in result.stderr


@pytest.mark.parametrize("text, flag, needle", [
    ("n_init: abc\n", ["--n-init", "5"], "key 'n_init' must be an integer; got 'abc'"),
    ("gamma: -1\n", ["--gamma", "2"], "key 'gamma'"),
    ("kernel: rbff\n", ["--kernel", "rbf"], "key 'kernel'"),
    # values checked only as DATA was read or an output written (exit 0 when overridden)
    ("delimiter: ''\n", ["--delimiter", ","],
     "key 'delimiter': must be one character, 'tab' or 'whitespace'; got ''"),
    ("init: kmeans++\n", ["--init", "random"], "key 'init': not a start method (k-means++, "
                                               "spectral, random) and no such file; did you "
                                               "mean --init k-means++?"),
    ("columns: 'a,,b'\n", ["--columns", "0,1"], "key 'columns': must list names or 0-based "
                                                "indexes separated by commas; got 'a,,b'"),
    ("labels: ''\n", [], "key 'labels': the path is empty"),
    ("plot: p.txt\n", [], "key 'plot': unknown plot format '.txt'; name the file .png, .pdf "
                          "or .svg"),
])
def test_a_config_value_a_flag_overrides_is_still_checked(work, text, flag, needle):
    _one_line(_fit(work, text, *flag), 2, needle)


def test_a_value_for_another_command_is_still_checked(work):
    _one_line(_fit(work, "n_clusters: abc\n", command="sweep"), 2,
              "key 'n_clusters' must be an integer")
    _one_line(_fit(work, "distances: [1, 2]\n"), 2, "key 'distances'")
    _one_line(_fit(work, "distances: ''\n"), 2, "key 'distances': the path is empty")
    _one_line(_fit(work, "plot: p.txt\n", command="sweep"), 2, "key 'plot': unknown plot "
                                                                "format '.txt'")
    _one_line(_fit(work, "labels: ''\n", command="sweep"), 2, "key 'labels': the path is empty")


@pytest.mark.parametrize("key", ["delimiter", "columns", "init", "labels"])
def test_a_config_value_of_the_wrong_type_is_worded_as_text(work, key):
    """The options checked by their own types are texts (paths) to a config: 'must be a
    char', 'a columns' and 'a init' were said."""
    word = "a path" if key == "labels" else "a text"
    _one_line(_fit(work, f"{key}: [a]\n"), 2, f"key '{key}' must be {word}; got ['a'] (list)")


def test_a_bad_delimiter_is_a_usage_error_before_data_is_opened(tmp_path):
    """--delimiter '' was found reading DATA: a missing DATA was said first (exit 1)."""
    result = run(["fit", tmp_path / "missing.csv", "-k", "2", "--delimiter", ""])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("kkmeans: error: Invalid value for '--delimiter': must be one "
                             "character, 'tab' or 'whitespace'; got '' (see 'kkmeans fit "
                             "--help')\n")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("text, extra, needle", [
    ("columns: zz\n", [], "--columns"),
    ("init: start.txt\n", ["--kernel", "rbf"], "--init start.txt: no such file"),
])
def test_an_error_about_a_config_value_names_the_config_and_key(work, text, extra, needle):
    result = _fit(work, text, *extra)
    key = text.split(":")[0]
    _one_line(result, result.exit_code, needle)
    assert result.exit_code in (1, 2)
    assert result.stderr.rstrip().endswith(f"is key '{key}' of config {work / 'run.yaml'})")


def test_a_cluster_value_is_checked_as_the_config_is_read(work):
    """--cluster and --scheduler are checked as they are parsed: a config's value is a config
    error naming the key, before anything is started."""
    result = _fit(work, "cluster: 2\napprox: nystroem\n")
    _one_line(result, 2, f"config {work / 'run.yaml'}: key 'cluster': '2': expected local or "
                         f"local:N")


def test_a_flag_named_in_an_error_is_not_blamed_on_the_config(work):
    (work / "run.yaml").write_text("seed: 3\n")
    result = run(["fit", work / "data.csv", "-k", "3", "--columns", "zz", "--config",
                  work / "run.yaml", "-q"])
    assert result.exit_code == 2
    assert "of config" not in result.stderr
