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

from .._version import __version__
from ..errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE, ConfigError, KKMeansError
from .fit import fit
from .info import info
from .predict import predict
from .sweep import sweep_command


# -- the command group and its error handling ----------------------------------------------
class KKMeansGroup(click.Group):
    """The ``kkmeans`` group: maps every error to one line on stderr and an exit code."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        # ``prog_name`` is always kkmeans (CliRunner would pass the function's name).
        argv = sys.argv[1:] if args is None else list(args)
        try:
            rv = super().main(argv, "kkmeans", complete_var,
                              standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else EXIT_ERROR
        except BaseException as exc:  # noqa: BLE001 -- the one place errors become exit codes
            code = _report_error(exc, debug=_debug_wanted(argv))
        if standalone_mode:
            sys.exit(code)
        return code

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


def _debug_wanted(argv):
    return "--debug" in argv or os.environ.get("KKMEANS_DEBUG", "") not in ("", "0")


def _report_error(exc, debug):
    """Print ``kkmeans: error: ...`` (and the traceback when debugging); return the exit code."""
    if isinstance(exc, (click.exceptions.Abort, KeyboardInterrupt)):
        click.echo("kkmeans: interrupted", err=True)
        return EXIT_INTERRUPTED
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

        # A config error names the config's own keys (max_iter, n_init): no rewording.
        message = str(exc) if isinstance(exc, ConfigError) else cli_wording(str(exc))
        code = exc.exit_code
    elif isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EIO, errno.EDQUOT,
                                                    errno.EFBIG):
        message, code = f"cannot write the output: {exc.strerror}", EXIT_ERROR  # e.g. a full disk
    elif isinstance(exc, MemoryError):
        message, code = ("not enough memory (try --dtype float32, --approx nystroem or fewer "
                         "rows)"), EXIT_ERROR
    else:
        message, code = f"unexpected {type(exc).__name__}: {exc}", EXIT_ERROR
        if not debug:
            message += " (run again with --debug for the traceback)"
    message = " ".join(message.split())
    click.echo(f"kkmeans: error: {message}", err=True)
    return code


def _print_version(ctx, value):
    """``kkmeans --version``: the version, and whether the engine runs threads (OpenMP)."""
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"kkmeans {__version__}\n{engine_description()}")
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
    """Entry point of the ``kkmeans`` console script."""
    cli(prog_name="kkmeans")
