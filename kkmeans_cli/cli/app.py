"""The ``kkmeans`` command group: the one place where errors become a line on stderr and an
exit code (:func:`_report_error`, codes named in ``kkmeans_cli.errors``), ``--version``, and the
list of commands (one module each: fit, predict, sweep, info).

NumPy, h5py, rich and the engine are imported inside the commands, so ``kkmeans --help`` is
quick.
"""
import errno
import os
import sys
import traceback

import click

from .. import _signals, _streams
from .._text import one_line
from .._streams import CLOSED_STREAMS, guard_standard_streams, silence_stream
from .._version import __version__
from ..io.config import ORIGINS, cut, origin_note
from ..memory import OPTION_NAMES
from ..errors import (EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_USAGE, BrokenPipeOutput,
                      ConfigError, KKMeansError, OutputError)
from .fit import fit
from .info import info
from .predict import predict
from .sweep import sweep_command


# -- the command group and its error handling ----------------------------------------------
#: Characters of an error message at most (the longest real ones, the memory plan's and the
#: list of config keys, are under 1,000).
MAX_MESSAGE = 2000


class KKMeansGroup(click.Group):
    """The ``kkmeans`` group: maps every error to one line on stderr and an exit code, and
    installs the one handler of SIGINT, SIGTERM and SIGHUP (``kkmeans_cli._signals``) for
    the run."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        guard_standard_streams()
        ORIGINS.clear()  # the config values of this run (a test runs many in one process)
        # ``prog_name`` is always kkmeans (CliRunner would pass the function's name).
        argv = sys.argv[1:] if args is None else list(args)
        if 1 in CLOSED_STREAMS and any(arg in ("-h", "--help") for arg in argv):
            # click prints the help itself: a closed stdout would swallow it with exit 0
            code = _report_error(OutputError("cannot write the help to standard output: "
                                             "standard output is closed"), debug=False)
            if standalone_mode:
                sys.exit(code)
            return code
        words = OPTION_NAMES.set("cli")   # memory messages name options, not parameters
        with _signals.handled():
            try:
                rv = super().main(argv, "kkmeans", complete_var,
                                  standalone_mode=False, **extra)
                code = rv if isinstance(rv, int) else 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else EXIT_ERROR
            except BaseException as exc:  # noqa: BLE001 -- the one place errors become codes
                if isinstance(exc, _Stopped):
                    exc = exc.interrupt
                if not isinstance(exc, KeyboardInterrupt) and _signals.raised() is not None:
                    exc = _signals.raised()     # the signal, turned into another error
                try:
                    code = _report_error(exc, debug=_debug_wanted(argv))
                except KeyboardInterrupt:  # a second signal while the error is printed
                    code = _signals.exit_code(exc) if isinstance(
                        exc, KeyboardInterrupt) else EXIT_ERROR
            code = _flush_standard_streams(code)
        OPTION_NAMES.reset(words)
        if standalone_mode:
            if _streams.WHOLE_PROCESS:      # the command's own process (main): its code is
                _signals.ignored_to_the_end()   # decided; the teardown (0.2–0.3 s) keeps it
            sys.exit(code)
        return code

    def invoke(self, ctx):
        # click's own main would print an empty line for a KeyboardInterrupt (a signal) and
        # turn a broken pipe into exit code 1; both are reported here instead.
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Stopped(exc) from None
        except OSError as exc:
            if exc.errno == errno.EPIPE and not isinstance(exc, KKMeansError):
                raise BrokenPipeOutput("standard output: its reader went away") from None
            raise

    def parse_args(self, ctx, args):
        # Bare ``kkmeans``: the usage and the commands on stderr, exit 2 (as git and pip do).
        if not args and not ctx.resilient_parsing:
            formatter = ctx.make_formatter()
            self.format_usage(ctx, formatter)
            self.format_commands(ctx, formatter)
            formatter.write_paragraph()
            formatter.write_text("Run 'kkmeans COMMAND --help' for the options of a command, "
                                 "'kkmeans --help' for more.")
            click.echo(formatter.getvalue().rstrip("\n"), err=True)
            ctx.exit(EXIT_USAGE)
        return super().parse_args(ctx, args)


class _Stopped(BaseException):
    """A KeyboardInterrupt (Ctrl-C or another signal) carried past click's own handling."""

    def __init__(self, interrupt):
        super().__init__()
        self.interrupt = interrupt


def _flush_standard_streams(code):
    """Flush stdout and stderr before exit; a stream whose reader went away is pointed at
    /dev/null (Python's own flush at exit would fail and exit with 120). A stdout that
    cannot take what was printed makes the command fail (141 for a broken pipe)."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        stream = getattr(sys, name, None)
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError) as exc:
            silence_stream(fd)
            if fd == 1 and code == 0:
                code = EXIT_BROKEN_PIPE if getattr(exc, "errno", None) == errno.EPIPE \
                    else EXIT_ERROR
    return code


def _debug_wanted(argv):
    return "--debug" in argv or os.environ.get("KKMEANS_DEBUG", "") not in ("", "0")


def _report_error(exc, debug):
    """Print ``kkmeans: error: ...`` (and the traceback when debugging); return the exit code.

    A signal is ``kkmeans: interrupted`` (naming the signal unless it is Ctrl-C), exit code
    128 + its number. A broken pipe on an output is said nothing about, as SIGPIPE ends a
    Unix program: exit code 141 (docs/cli.md)."""
    if isinstance(exc, (click.exceptions.Abort, KeyboardInterrupt)):
        if isinstance(exc, click.exceptions.Abort) and isinstance(exc.__cause__,
                                                                   KeyboardInterrupt):
            exc = exc.__cause__
        name = getattr(exc, "name", "SIGINT")
        _echo_err("kkmeans: interrupted" + ("" if name == "SIGINT" else f" ({name})"))
        return _signals.exit_code(exc)
    if isinstance(exc, BrokenPipeOutput) or (isinstance(exc, OSError)
                                             and exc.errno == errno.EPIPE):
        silence_stream(1)
        return EXIT_BROKEN_PIPE
    if debug:
        traceback.print_exception(exc)
    if isinstance(exc, click.UsageError):
        message, code = exc.format_message(), EXIT_USAGE
        if exc.ctx is not None:
            message += f" (see '{exc.ctx.command_path} --help')"
    elif isinstance(exc, click.ClickException):
        message, code = exc.format_message(), exc.exit_code
    elif isinstance(exc, KKMeansError):
        from .report import cli_wording

        # A config error names the config's own keys (max_iter, n_init): no rewording. Another
        # error naming an option a config set says so.
        message = str(exc) if isinstance(exc, ConfigError) else cli_wording(str(exc))
        if not isinstance(exc, ConfigError):
            message = cut(one_line(message), MAX_MESSAGE) + origin_note(message)
        code = exc.exit_code
    elif isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EIO, errno.EDQUOT,
                                                    errno.EFBIG):
        where = f" {exc.filename}" if exc.filename else ""
        message, code = f"cannot write{where}: {exc.strerror}", EXIT_ERROR  # e.g. a full disk
    elif isinstance(exc, MemoryError):
        message, code = ("not enough memory (try fewer rows; with a dense kernel --dtype "
                         "float32 or --approx nystroem; with knn fewer --n-neighbors)"), \
            EXIT_ERROR
    else:
        message, code = f"unexpected {type(exc).__name__}: {exc}", EXIT_ERROR
        if not debug:
            message += " (run again with --debug for the traceback)"
    # One line, and a bounded one whatever a value in it holds.
    message = cut(one_line(message), MAX_MESSAGE + 200)
    _echo_err(f"kkmeans: error: {message}")
    return code


def _echo_err(line):
    """One line on stderr; a stderr that is closed or whose reader went away is ignored
    (the exit code still tells)."""
    try:
        click.echo(line, err=True)
    except (OSError, ValueError):
        silence_stream(2)


def _print_version(ctx, value):
    """``kkmeans --version``: the version, and whether the engine runs threads (OpenMP)."""
    if not value or ctx.resilient_parsing:
        return
    from ..io.outputs import AtomicOutputs, check_outputs

    check_outputs([("-", "version", "stdout")])  # the one way to stdout (docs/cli.md)
    with AtomicOutputs() as out:
        out.open("-", "version").write(f"kkmeans {__version__}\n{engine_description()}\n"
                                       .encode())
    ctx.exit()


def engine_description():
    """``engine: OpenMP, 2 threads by default`` or that it was built without OpenMP."""
    from ..engine import _openmp

    if not _openmp.openmp_enabled():
        return "engine: built without OpenMP (serial: 1 thread, same results)"
    n = max(1, _openmp.max_threads() or os.cpu_count() or 1)
    return (f"engine: built with OpenMP, {n} thread{'' if n == 1 else 's'} by default "
            f"(--threads or OMP_NUM_THREADS to change)")


CLI_EPILOG = """\b
Shell completion of commands, options and choices (add the line to the shell start-up file):
  bash:  eval "$(_KKMEANS_COMPLETE=bash_source kkmeans)"      (~/.bashrc)
  zsh:   eval "$(_KKMEANS_COMPLETE=zsh_source kkmeans)"       (~/.zshrc)
  fish:  _KKMEANS_COMPLETE=fish_source kkmeans | source       (~/.config/fish/config.fish)
"""


@click.group(cls=KKMeansGroup, epilog=CLI_EPILOG,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, param, value: _print_version(ctx, value),
              help="Show the version and how the engine was built, and exit.")
def cli():
    """Kernel k-means clustering.

    \b
    Examples:
      kkmeans fit examples/moons.csv -k 2 > labels.txt
      kkmeans fit data.csv -k 5 --kernel rbf --gamma median -o model.npz
      kkmeans fit data.h5:/features -k 3 --config configs/rbf.yaml --summary run.json
      kkmeans predict model.npz new.csv | sort | uniq -c
      kkmeans sweep data.csv --k 2..10 -o best.npz > sweep.csv
      kkmeans info model.npz --json

    DATA is delimited text (.csv, .tsv, .txt; also .gz), .npy, HDF5 (file.h5:/dataset),
    Parquet or Feather (with pyarrow), a quoted glob of such files ('parts/*.csv', taken in
    sorted order as one file) or - for CSV on stdin. Labels and tables go to stdout, reports to stderr. Exit codes: 0 ok, 1 data or
    runtime error, 2 usage error, 130 interrupted.
    """


# One module per command (fit.py, predict.py, sweep.py, info.py), registered here.
for _command in (fit, predict, sweep_command, info):
    cli.add_command(_command)


def main():
    """Entry point of the ``kkmeans`` console script (and ``python -m kkmeans_cli``): the
    process ends with the command (``_streams.WHOLE_PROCESS``)."""
    _streams.WHOLE_PROCESS = True
    cli(prog_name="kkmeans")
