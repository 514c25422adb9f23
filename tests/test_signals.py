"""SIGINT, SIGTERM, SIGHUP and SIGQUIT (and, while no one else handles them, the other signals
whose default action ends a process) end a command alike (one handler, ``kkmeans_cli._signals``): one
line on stderr, exit code 128 + the signal's number, temporary files removed and existing
outputs as they were (docs/cli.md, "Signals"). The commands run as subprocesses, stopped at a
point where they are known to wait: reading DATA from a pipe, or writing to a FIFO no one reads
yet while a staged file exists."""
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import FAST, blobs, run, start_kkmeans, write_csv

OLD = b"OLD CONTENT\n"
NAMES = {signal.SIGINT: "", signal.SIGTERM: " (SIGTERM)", signal.SIGHUP: " (SIGHUP)",
         signal.SIGQUIT: " (SIGQUIT)", signal.SIGUSR1: " (SIGUSR1)", signal.SIGALRM: " (SIGALRM)",
         signal.SIGXCPU: " (SIGXCPU)"}


@pytest.fixture
def work(tmp_path):
    X, _ = blobs(n=30, d=2, k=3)
    write_csv(tmp_path / "data.csv", X)
    result = run(["fit", "--kernel", "rbf", tmp_path / "data.csv", "-k", "3", "-o", tmp_path / "model.npz",
                  *FAST, "--quiet"])
    assert result.exit_code == 0, result.stderr
    return tmp_path


def _snapshot(folder):
    return {name: (folder / name).read_bytes() for name in os.listdir(folder)
            if (folder / name).is_file()}


def _wait_for(condition, proc, seconds=60):
    end = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the command never reached the point to stop it at"
        time.sleep(0.02)


def _ended_by(proc, signum):
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert err.decode() == f"kkmeans: interrupted{NAMES[signum]}\n"


def _start(args, cwd, **kwargs):
    return start_kkmeans(args, cwd, stderr=subprocess.PIPE, **kwargs)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT,
                                    signal.SIGQUIT, signal.SIGUSR1, signal.SIGALRM,
                                    signal.SIGXCPU])
def test_a_signal_while_outputs_are_staged_removes_them(work, signum):
    """The labels are staged (``.out.csv.XXXX.tmp`` exists) and the command waits to write the
    distances to a FIFO nobody reads yet: the signal leaves out.csv as it was. Ctrl-\\
    (SIGQUIT), and the signals whose default action ends a process without clean-up (a
    user's SIGUSR1, a timer's SIGALRM, a CPU limit's SIGXCPU), too."""
    (work / "out.csv").write_bytes(OLD)
    fifo = work / "dist.fifo"
    os.mkfifo(fifo)
    before = _snapshot(work)
    proc = _start(["predict", "model.npz", "data.csv", "--with-data", "--labels", "out.csv",
                   "--distances", fifo, "-q"], work)
    _wait_for(lambda: any(name.startswith(".out.csv.") for name in os.listdir(work)), proc)
    _ended_by(proc, signum)
    assert _snapshot(work) == before
    assert sorted(os.listdir(work)) == ["data.csv", "dist.fifo", "model.npz", "out.csv"]


def test_a_handler_of_the_caller_for_the_other_signals_is_kept(work):
    """In a process where something else handles SIGALRM (a timer), a command leaves its
    handler in place."""
    from kkmeans_cli import _signals

    def mine(signum, frame):
        pass

    before = signal.signal(signal.SIGALRM, mine)
    # SIGQUIT at its default action, whatever this pytest inherited (a job started in the
    # background by a shell has it ignored, and an ignored signal is rightly kept ignored)
    quit_before = signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    try:
        with _signals.handled():
            assert signal.getsignal(signal.SIGALRM) is mine
            assert signal.getsignal(signal.SIGQUIT) is _signals._handler
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getsignal(signal.SIGQUIT) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGALRM, before)
        signal.signal(signal.SIGQUIT, quit_before)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_reading_data_leaves_no_output(work, signum):
    """DATA is a FIFO: once this test's end of it is open, the command is reading it."""
    fifo = work / "data.fifo"
    os.mkfifo(fifo)
    before = _snapshot(work)
    proc = _start(["fit", "--kernel", "rbf", fifo, "-k", "3", *FAST, "-o", "new.npz", "--labels", "new.txt",
                   "--summary", "new.json"], work)
    with open(fifo, "wb") as writer:  # returns when the command opens it to read
        writer.write(b"x,y\n1,2\n")
        writer.flush()  # more is to come: the command waits for it
        _ended_by(proc, signum)
    assert _snapshot(work) == before


def test_an_ignored_signal_stays_ignored(work):
    """``nohup`` starts a command with SIGHUP ignored; kkmeans keeps it so."""
    fifo = work / "labels.fifo"
    os.mkfifo(fifo)
    proc = _start(["predict", "model.npz", "data.csv", "--labels", fifo, "--distances",
                   "dist.csv", "-q"], work,
                  preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    _wait_for(lambda: any(name.startswith(".dist.csv.") for name in os.listdir(work)), proc)
    proc.send_signal(signal.SIGHUP)
    with open(fifo, "rb") as stream:
        labels = stream.read()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert len(labels.split()) == 30 and (work / "dist.csv").is_file()


def test_a_signal_during_the_renames_undoes_them(work, monkeypatch):
    """A signal that comes while the staged files are renamed is held until the renames end,
    then undoes them: every file is as before, no staged file or backup is left."""
    from kkmeans_cli import _signals

    for name in ("old.npz", "old.txt"):
        (work / name).write_bytes(OLD)
    before = _snapshot(work)
    real_replace = os.replace

    def replace(src, dst):
        if str(src).endswith(".tmp"):
            _signals._handler(signal.SIGTERM, None)  # as if it came now
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    result = run(["fit", "--kernel", "rbf", work / "data.csv", "-k", "3", *FAST, "-o", work / "old.npz",
                  "--labels", work / "old.txt", "--summary", work / "new.json"])
    assert result.exit_code == 143
    assert result.stderr == "kkmeans: interrupted (SIGTERM)\n"
    assert _snapshot(work) == before


def test_a_signal_after_the_commit_does_not_undo_a_finished_command(work, monkeypatch):
    """Once the outputs are in place the command has done its work: a signal while the report
    is printed is noted, the exit code stays 0 and the outputs stay."""
    from kkmeans_cli import _signals
    from kkmeans_cli.cli import report

    real_table = report.Reporter.table

    def table(self, title, rows):
        _signals._handler(signal.SIGTERM, None)
        return real_table(self, title, rows)

    monkeypatch.setattr(report.Reporter, "table", table)
    result = run(["fit", "--kernel", "rbf", work / "data.csv", "-k", "3", *FAST, "-o", work / "new.npz",
                  "--labels", work / "new.txt"])
    assert result.exit_code == 0, result.stderr
    assert (work / "new.npz").is_file() and len((work / "new.txt").read_text().split()) == 30


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_while_the_process_ends_keeps_the_exit_code(work, signum):
    """After the command, while the process ends, the command's handler is gone: a signal
    there ended a complete run by the signal (143 for SIGTERM). An exit function of the
    process (run in the interpreter's teardown) sends the signal: it is ignored, the exit
    code is the command's and the outputs are complete."""
    script = (f"import atexit, os, signal, sys, time\n"
              f"atexit.register(lambda: (os.kill(os.getpid(), {int(signum)}), time.sleep(0.5)))\n"
              f"sys.argv = ['kkmeans'] + sys.argv[1:]\n"
              f"from kkmeans_cli.cli import main\n"
              f"main()\n")
    args = ["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "-o", "late.npz",
            "--labels", "late.txt", "--quiet"]
    def default():                      # the signal's default action, as a shell starts it
        signal.signal(signum, signal.SIG_DFL)

    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], cwd=work,
                          capture_output=True, text=True, timeout=120, preexec_fn=default)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert (work / "late.npz").is_file() and len((work / "late.txt").read_text().split()) == 30
    failed = subprocess.run([sys.executable, "-c", script, "fit", "missing.csv", "-k", "3"],
                            cwd=work, capture_output=True, text=True, timeout=120,
                            preexec_fn=default)
    assert failed.returncode == 1, failed.stderr
    assert failed.stderr == "kkmeans: error: missing.csv: no such file\n"


def test_a_signal_before_the_commit_of_another_run_is_not_carried_over(work):
    """The handler's state is per command: a run after one that was interrupted is normal."""
    from kkmeans_cli import _signals

    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(_signals.Interrupted):
        with _signals.handled():
            _signals._handler(signal.SIGTERM, None)
    result = run(["predict", work / "model.npz", work / "data.csv", "-q"])
    assert result.exit_code == 0 and len(result.stdout.split()) == 30
    assert signal.getsignal(signal.SIGTERM) == handler


TURNED = ("def turned(*args, **kwargs):\n"
          "    try:\n"
          "        os.kill(os.getpid(), {signum})\n"
          "        time.sleep(30)\n"
          "    except KeyboardInterrupt:\n"
          "        raise ImportError('initialization failed') from None\n")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_turned_into_another_error_still_ends_the_command_by_it(work, signum,
                                                                        monkeypatch):
    """An import turns a KeyboardInterrupt raised while an extension module initializes
    (NumPy's, SciPy's, the engine's: the commands import them late) into ``ImportError:
    initialization failed``; the command was ended by the signal all the same: 128 + its
    number, one line, no output written (before: ``unexpected ImportError``, exit code 1)."""
    from kkmeans_cli.model.estimator import KernelKMeans

    space = {"os": os, "time": time}
    exec(TURNED.format(signum=int(signum)), space)
    monkeypatch.setattr(KernelKMeans, "fit", space["turned"])
    before = _snapshot(work)
    # as a terminal starts a command: a background job or nohup starts this test's process
    # with the signal ignored, and kkmeans rightly keeps an ignored signal so
    previous = signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT
                             else signal.SIG_DFL)
    try:
        result = run(["fit", "--kernel", "rbf", work / "data.csv", "-k", "3", *FAST, "-o",
                      work / "new.npz", "--labels", work / "new.txt"])
    finally:
        signal.signal(signum, previous)
    assert (result.exit_code, result.stdout, result.stderr) == \
        (128 + signum, "", f"kkmeans: interrupted{NAMES[signum]}\n")
    assert _snapshot(work) == before


def _python(script, args, cwd):
    def default():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
    return subprocess.run([sys.executable, "-c", script, *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120, preexec_fn=default)


def test_a_ctrl_c_turned_into_another_error_ends_the_process_with_130(work):
    """The same as a process of its own, through the console script's entry point."""
    script = ("import os, sys, time\n" + TURNED.format(signum=int(signal.SIGINT))
              + "from kkmeans_cli.model.estimator import KernelKMeans\n"
              "KernelKMeans.fit = turned\n"
              "sys.argv = ['kkmeans'] + sys.argv[1:]\n"
              "from kkmeans_cli._entry import main\n"
              "main()\n")
    before = _snapshot(work)
    done = _python(script, ["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "-o",
                            "new.npz"], work)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "kkmeans: interrupted\n")
    assert _snapshot(work) == before


@pytest.mark.parametrize("turned", [False, True])
def test_a_ctrl_c_while_the_command_line_loads_is_one_line(work, turned):
    """Ctrl-C while the command line's modules load (``import click``, before the command's
    own handler is installed), raised as it is or turned into an ImportError: exit code 130,
    ``kkmeans: interrupted``, no traceback and nothing written (before: Python's traceback
    and the process ended by SIGINT, or an ImportError's traceback and exit code 1)."""
    script = ("import builtins, os, signal, sys, time\n"
              "real = builtins.__import__\n"
              "def hook(name, *args, **kwargs):\n"
              "    if name == 'click' and 'click' not in sys.modules:\n"
              "        try:\n"
              "            os.kill(os.getpid(), signal.SIGINT)\n"
              "            time.sleep(30)\n"
              "        except KeyboardInterrupt:\n"
              f"            if {turned}:\n"
              "                raise ImportError('initialization failed') from None\n"
              "            raise\n"
              "    return real(name, *args, **kwargs)\n"
              "from kkmeans_cli._entry import main\n"
              "builtins.__import__ = hook\n"
              "sys.argv = ['kkmeans'] + sys.argv[1:]\n"
              "main()\n")
    before = _snapshot(work)
    done = _python(script, ["fit", "--kernel", "rbf", "data.csv", "-k", "3", "-o", "new.npz"],
                   work)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "kkmeans: interrupted\n")
    assert _snapshot(work) == before


def test_an_import_that_fails_without_a_signal_is_not_called_an_interrupt(work):
    """A broken installation (an import failing with no Ctrl-C) keeps its own error."""
    script = ("import builtins, sys\n"
              "real = builtins.__import__\n"
              "def hook(name, *args, **kwargs):\n"
              "    if name == 'click':\n"
              "        raise ImportError('no module named click (broken)')\n"
              "    return real(name, *args, **kwargs)\n"
              "from kkmeans_cli._entry import main\n"
              "builtins.__import__ = hook\n"
              "sys.argv = ['kkmeans', '--help']\n"
              "main()\n")
    done = _python(script, [], work)
    assert done.returncode == 1 and "interrupted" not in done.stderr
    assert done.stderr.rstrip().endswith("ImportError: no module named click (broken)")


def test_signals_are_documented():
    from helpers import ROOT

    with open(os.path.join(ROOT, "docs", "cli.md"), encoding="utf-8") as handle:
        text = handle.read()
    for needle in ("SIGTERM", "SIGHUP", "143", "129"):
        assert needle in text
