"""All the outputs of a command, standard output included, are committed together after every
one of them is known to have been written, or none is (docs/cli.md, "Outputs appear whole or
not at all"): a full device or disk, a closed standard output, a reader that went away or a
failed rename leaves every existing file as it was and no new one. Each case checks the exit
code, the message and the files left behind; the cases of devices, pipes and full disks run as
subprocesses."""
import contextlib
import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers import FAST, blobs, kkmeans_command, run, run_process, write_csv

OLD = b"OLD CONTENT\n"


@pytest.fixture
def work(tmp_path):
    X, _ = blobs(n=30, d=2, k=3)
    write_csv(tmp_path / "data.csv", X)
    np.save(tmp_path / "data.npy", X)
    result = run(["fit", "--kernel", "rbf", tmp_path / "data.csv", "-k", "3", "-o", tmp_path / "model.npz",
                  *FAST, "--quiet"])
    assert result.exit_code == 0, result.stderr
    return tmp_path


def _snapshot(folder):
    """Every file under ``folder`` (hidden ones included) and its bytes."""
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path):
                with open(path, "rb") as handle:
                    out[os.path.relpath(path, folder)] = handle.read()
    return out


def _shell(line, cwd):
    exe = kkmeans_command()
    prefix = "" if len(exe) == 1 else f'kkmeans() {{ "{sys.executable}" -m kkmeans_cli "$@"; }}\n'
    return subprocess.run(["bash", "-c", prefix + line], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def _one_error_line(stderr, needle):
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kkmeans: error: "), stderr
    assert needle in lines[0], lines[0]


# -- 1. a failing output (stdout or a device) commits no file ----------------------------------
@pytest.mark.parametrize("line, needle", [
    ("kkmeans fit data.csv -k 3 {fast} -o old.npz --summary old.json -q > /dev/full",
     "cannot write the labels to standard output: No space left on device"),
    ("kkmeans fit data.csv -k 3 {fast} -o old.npz --summary old.json --json -q > /dev/full",
     "cannot write the JSON summary to standard output: No space left on device"),
    ("kkmeans fit data.csv -k 3 {fast} -o new.npz --labels new.txt --summary /dev/full -q",
     "cannot write the summary to /dev/full: No space left on device"),
    ("kkmeans predict model.npz data.npy --labels new.txt --distances /dev/full -q",
     "cannot write the distances to /dev/full: No space left on device"),
    ("kkmeans predict model.npz data.csv --distances new.csv --with-data -q > /dev/full",
     "cannot write the labels to standard output: No space left on device"),
    ("kkmeans predict model.npz data.csv --distances old.csv -q > /dev/full",
     "cannot write the labels to standard output: No space left on device"),
    ("kkmeans sweep data.csv --k 2..3 {fast} -o old.npz -q > /dev/full",
     "cannot write the table to standard output: No space left on device"),
    ("kkmeans sweep data.csv --k 2..3 {fast} -o new.npz --table /dev/full -q",
     "cannot write the table to /dev/full: No space left on device"),
])
def test_a_failing_stdout_or_device_leaves_every_file_as_it_was(work, line, needle):
    for name in ("old.npz", "old.json", "old.txt", "old.csv"):
        (work / name).write_bytes(OLD)
    before = _snapshot(work)
    proc = _shell(line.format(fast=" ".join(FAST)), work)
    assert proc.returncode == 1, proc.stderr
    _one_error_line(proc.stderr, needle)
    assert _snapshot(work) == before


def test_devices_are_written_before_stdout(work):
    """A device that refuses its bytes fails the command before anything is printed."""
    proc = _shell("kkmeans predict model.npz data.csv --distances /dev/full -q", work)
    assert proc.returncode == 1
    assert proc.stdout == ""
    _one_error_line(proc.stderr, "cannot write the distances to /dev/full")


@pytest.mark.parametrize("outputs, fails, needle", [
    (("old.npz", "old.txt", "old.json"), "second", "Permission denied"),
    (("new.npz", "new.txt", "new.json"), "new.json", "cannot write the summary to"),
    # names of 250 bytes: their backups' names are cut short as the staging files' are
    ((f"old{'a' * 243}.npz", f"old{'b' * 243}.txt", f"old{'c' * 242}.json"), "second",
     "Permission denied"),
])
def test_a_failed_rename_puts_back_the_files_already_replaced(work, monkeypatch, outputs,
                                                               fails, needle):
    """The last step of the commit renames the staged files: when one rename fails, the
    files replaced before it get their old bytes back, the new ones renamed before it are
    removed, and no staged file or backup is left."""
    for name in outputs:
        if name.startswith("old"):
            (work / name).write_bytes(OLD)
    before = _snapshot(work)
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        if str(src).endswith(".tmp"):
            calls.append(dst)
            if (fails == "second" and len(calls) == 2) or str(dst).endswith(fails):
                raise OSError(errno.EACCES, os.strerror(errno.EACCES))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    model, labels, summary = (work / name for name in outputs)
    result = run(["fit", "--kernel", "rbf", work / "data.csv", "-k", "3", *FAST, "-o", model, "--labels", labels,
                  "--summary", summary, "-q"])
    assert result.exit_code == 1
    _one_error_line(result.stderr, needle)
    assert "cannot write the " in result.stderr and str(work) in result.stderr
    assert len(calls) >= 2
    assert _snapshot(work) == before


# -- 2. a full disk: one line naming the file, nothing left --------------------------------------
_ENOSPC_SITE = textwrap.dedent('''
    """Test stand-in for a full disk: every write into $KKMEANS_TEST_FULL_FOLDER fails with
    ENOSPC (used where a small tmpfs cannot be mounted)."""
    import errno
    import os

    _FULL = os.environ.get("KKMEANS_TEST_FULL_FOLDER")
    if _FULL:
        _fdopen = os.fdopen

        class _FullFile:
            def __init__(self, handle):
                self._handle = handle

            def write(self, data):
                if len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return 0

            def __getattr__(self, name):
                return getattr(self._handle, name)

        def fdopen(fd, *args, **kwargs):
            handle = _fdopen(fd, *args, **kwargs)
            try:
                where = os.path.dirname(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                return handle
            return _FullFile(handle) if where == os.path.realpath(_FULL) else handle

        os.fdopen = fdopen
''')


@contextlib.contextmanager
def full_disk(parent):
    """A folder on a full file system, and the environment a subprocess needs for it: a 64 KiB
    tmpfs filled to the last byte where this process may mount one (root), else a folder where
    a patched ``os.fdopen`` makes every write fail with ENOSPC (the error a full disk gives)."""
    folder = parent / "full"
    folder.mkdir()
    # KKMEANS_TEST_NO_MOUNT=1 tries the stand-in where mounting would work.
    try:
        mounted = "KKMEANS_TEST_NO_MOUNT" not in os.environ and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
            capture_output=True).returncode == 0
    except OSError:  # no mount command
        mounted = False
    try:
        if mounted:
            fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
            finally:
                os.close(fd)
            env = {}
        else:
            site = parent / "enospc-site"
            site.mkdir()
            (site / "sitecustomize.py").write_text(_ENOSPC_SITE)
            env = {"KKMEANS_TEST_FULL_FOLDER": str(folder),
                   "PYTHONPATH": os.pathsep.join([str(site)] + [p for p in sys.path if p])}
        yield folder, env
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.mark.parametrize("args, what", [
    (["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "-o", "full/new.npz", "--labels", "new.txt"],
     "the model to full/new.npz"),
    (["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "--no-model", "--plot", "full/p.png",
      "--labels", "/dev/null"], "the plot to full/p.png"),
    (["predict", "model.npz", "data.npy", "--distances", "full/d.npy", "--labels", "new.txt"],
     "the distances to full/d.npy"),
    (["predict", "model.npz", "data.csv", "--with-data", "--labels", "full/out.csv"],
     "the labels to full/out.csv"),
    (["sweep", "--kernel", "rbf", "data.csv", "--k", "2..3", *FAST, "-o", "full/s.npz", "--table", "new.csv"],
     "the model to full/s.npz"),
])
def test_a_full_disk_names_the_file_and_leaves_nothing(work, args, what):
    if "--plot" in args:
        pytest.importorskip("matplotlib")
    with full_disk(work) as (full, env):
        before = _snapshot(work)
        result = run_process(args + ["-q"], work, env=env)
        assert result.returncode == 1, result.stderr
        _one_error_line(result.stderr, f"cannot write {what}: No space left on device")
        assert result.stdout == ""
        assert _snapshot(work) == before


# -- 4. an output DATA's glob matches ----------------------------------------------------------
@pytest.mark.parametrize("pattern, output, option", [
    ("g1/*", "g1/zlabels.csv", "--labels"),
    ("g1/*.csv", "g1/zlabels.csv", "--labels"),
    ("g1/part-?.csv", "g1/part-9.csv", "--summary"),
    ("g1/[pq]*", "g1/q.npz", "-o"),
    ("./g1/../g1/*", "g1/zz.txt", "--labels"),
    ("g*/*", "g1/new.csv", "--labels"),
])
def test_an_output_that_data_glob_matches_is_a_usage_error(work, pattern, output, option):
    (work / "g1").mkdir()
    X, _ = blobs(n=30, d=2, k=3)
    write_csv(work / "g1" / "part-0.csv", X)
    before = _snapshot(work)
    args = ["fit", "--kernel", "rbf", pattern, "-k", "3", *FAST]
    args += ["--no-model"] if option != "-o" else []
    result = run_process(args + [option, output, "-q"], work)
    assert result.returncode == 2, result.stderr
    shown = "-o/--model" if option == "-o" else option
    _one_error_line(result.stderr, f"{shown} {output} is matched by DATA '{pattern}': the "
                                   f"next run would read it as data")
    assert _snapshot(work) == before


def test_an_output_onto_a_part_of_data_would_replace_an_input(work, monkeypatch):
    monkeypatch.chdir(work)
    (work / "g1").mkdir()
    X, _ = blobs(n=30, d=2, k=3)
    write_csv(work / "g1" / "part-0.csv", X)
    before = _snapshot(work)
    result = run(["fit", "--kernel", "rbf", "g1/*", "-k", "3", *FAST, "--no-model", "--labels", "g1/part-0.csv"])
    assert result.exit_code == 2
    assert result.stderr.startswith("kkmeans: error: --labels names the input DATA")
    assert _snapshot(work) == before


def test_an_output_beside_the_glob_but_not_matched_is_fine(work):
    from kkmeans_cli.io.outputs import _glob_matches

    (work / "g1").mkdir()
    assert not _glob_matches(str(work / "g1" / "*.csv"), str(work / "g1" / "labels.txt"))
    assert not _glob_matches(str(work / "g1" / "*"), str(work / "g1" / ".hidden.csv"))
    assert not _glob_matches(str(work / "g1" / "*"), str(work / "g1" / "sub" / "x.csv"))
    assert not _glob_matches(str(work / "g1" / "*"), str(work / "labels.txt"))
    os.symlink(work / "g1", work / "alias")
    assert _glob_matches(str(work / "g1" / "*"), str(work / "alias" / "x.csv"))


# -- 5. a closed standard output, a reader that went away -------------------------------------
@pytest.mark.parametrize("args, what", [
    (["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "-o", "new.npz"], "the labels to standard output"),
    (["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "--no-model", "--json"],
     "the JSON summary to standard output"),
    (["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "-o", "new.npz", "--labels", "/dev/stdout"],
     "the labels to /dev/stdout"),
    (["predict", "model.npz", "data.csv", "--distances", "new.csv"],
     "the labels to standard output"),
    (["sweep", "--kernel", "rbf", "data.csv", "--k", "2..3", *FAST, "-o", "new.npz"],
     "the table to standard output"),
    (["info", "model.npz"], "the model information to standard output"),
])
def test_a_closed_stdout_is_an_error_found_before_any_work(work, args, what):
    before = _snapshot(work)
    line = "kkmeans " + " ".join(args) + " -q >&-"
    if args[0] == "info":
        line = line.replace(" -q", "")
    proc = _shell(line, work)
    assert proc.returncode == 1, proc.stderr
    _one_error_line(proc.stderr, f"cannot write {what}: standard output is closed")
    assert _snapshot(work) == before


@pytest.mark.parametrize("args", [
    ["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "-o", "new.npz", "--summary", "new.json"],
    ["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "-o", "new.npz", "--json"],
    ["predict", "model.npz", "data.csv", "--labels", "new.txt", "--distances", "/dev/stdout"],
    ["predict", "model.npz", "data.csv", "--with-data", "--distances", "new.csv"],
    ["sweep", "--kernel", "rbf", "data.csv", "--k", "2..3", *FAST, "-o", "new.npz"],
    ["info", "model.npz", "--json"],
])
def test_a_reader_that_went_away_ends_the_command_as_sigpipe_would(work, args):
    """The Unix convention (docs/cli.md): exit code 141 (128 + SIGPIPE), no message, and no
    output file committed, whichever output the pipe was."""
    before = _snapshot(work)
    proc = subprocess.Popen(kkmeans_command() + args, cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert err == b""
    assert _snapshot(work) == before


@pytest.mark.parametrize("unbuffered", ["1", None])
@pytest.mark.parametrize("args", [
    ["predict", "model.npz", "big.csv", "--with-data", "--distances", "new.npy"],
    ["fit", "--kernel", "rbf", "big.csv", "-k", "3", *FAST, "-o", "new.npz", "--with-data"],
])
def test_a_reader_that_goes_away_after_the_first_bytes_is_the_same_rule(work, args, unbuffered):
    """Far more than a pipe holds (64 KiB) on standard output, one byte read, then the reader
    goes: also with PYTHONUNBUFFERED, where a write to the pipe may take part of a chunk."""
    write_csv(work / "big.csv", np.random.default_rng(3).standard_normal((6000, 2)))  # model's
    before = _snapshot(work)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    proc = subprocess.Popen(kkmeans_command() + args + ["-q"], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert os.read(proc.stdout.fileno(), 1)
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert err == b""
    assert _snapshot(work) == before


def test_a_non_blocking_stdout_that_fills_gets_all_of_the_output(work):
    """Standard output a non-blocking pipe (its writes answer 'would block' when full), read
    slowly, under PYTHONUNBUFFERED: every byte arrives, in order, and the command succeeds."""
    import time

    write_csv(work / "big.csv", np.random.default_rng(5).standard_normal((12000, 2)))
    args = ["predict", "model.npz", "big.csv", "--with-data", "-q"]
    want = subprocess.run(kkmeans_command() + args, cwd=work, capture_output=True,
                          timeout=120)
    assert want.returncode == 0 and len(want.stdout) > 2 ** 17
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(kkmeans_command() + args, cwd=work, env=env, stdout=write_end,
                            stderr=subprocess.PIPE)
    os.close(write_end)
    got = []
    while True:
        time.sleep(0.01)
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        got.append(chunk)
    os.close(read_end)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert b"".join(got) == want.stdout


def test_a_pipe_given_as_dev_fd_whose_reader_went_away_is_the_same_rule(work):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command starts
    try:
        proc = subprocess.run(kkmeans_command() + ["predict", "model.npz", "data.csv",
                                                   "--labels", f"/dev/fd/{write_end}",
                                                   "--distances", "new.csv", "-q"],
                              cwd=work, stderr=subprocess.PIPE, pass_fds=(write_end,),
                              timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == b""
    assert not (work / "new.csv").exists()
    assert not [name for name in os.listdir(work) if name.endswith((".tmp", ".bak"))]


def test_a_broken_stderr_does_not_change_the_outcome(work):
    """Reports are for people: a closed stderr or one whose reader went away is not an error
    of the command, whose outputs are complete."""
    proc = subprocess.Popen(kkmeans_command() + ["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "-o",
                                                 "new.npz", "--labels", "new.txt"],
                            cwd=work, stderr=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stderr.close()
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert (work / "new.npz").is_file() and len((work / "new.txt").read_text().split()) == 30
    proc = _shell(f"kkmeans fit data.csv -k 3 {' '.join(FAST)} -o new2.npz 2>&- | wc -l", work)
    assert proc.returncode == 0 and proc.stdout.strip() == "30"
    assert (work / "new2.npz").is_file()


def test_the_broken_pipe_rule_is_documented():
    from helpers import ROOT

    with open(os.path.join(ROOT, "docs", "cli.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert "141" in text and "broken pipe" in text.lower()


@pytest.mark.parametrize("args, option", [
    (["fit", "--kernel", "rbf", "-", "-k", "3"], "DATA"),
    (["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--weights", "-"], "--weights"),
    (["predict", "model.npz", "-"], "DATA"),
])
def test_a_closed_stdin_is_named(work, args, option):
    before = _snapshot(work)
    proc = _shell("kkmeans " + " ".join(args) + " --labels new.txt -q <&-", work)
    assert proc.returncode == 1, proc.stderr
    _one_error_line(proc.stderr, f"{option} -: standard input is closed; give a file instead")
    assert _snapshot(work) == before


@pytest.mark.parametrize("args, what", [(["--version"], "the version"),
                                        (["fit", "--help"], "the help")])
def test_version_and_help_follow_the_stdout_rules_too(work, args, what):
    proc = _shell("kkmeans " + " ".join(args) + " >&-", work)
    assert proc.returncode == 1
    _one_error_line(proc.stderr, f"cannot write {what} to standard output: standard output "
                                 f"is closed")
    if args == ["--version"]:
        proc = _shell("kkmeans --version > /dev/full", work)
        assert proc.returncode == 1
        _one_error_line(proc.stderr, "cannot write the version to standard output: No space "
                                     "left on device")
