"""The ``kkmeans`` console script and ``python -m kkmeans_cli``: the command line's modules
loaded, then the command run (``cli.app.main``).

The signals that end a command are handled once the command starts (``_signals``); a Ctrl-C
while its modules load, before that, ends it alike: ``kkmeans: interrupted`` and exit code
130, not Python's traceback of the import. SIGINT is watched for the loading: an import turns a
``KeyboardInterrupt`` raised while an extension module initializes into an ``ImportError``,
which a Ctrl-C seen then explains. (The interpreter's own start, before this module, is
Python's.)
"""
import signal
import sys


def main():
    seen = []

    def watch(signum, frame):
        seen.append(signum)
        raise KeyboardInterrupt

    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.default_int_handler:   # not ignored (a background job, nohup)
        signal.signal(signal.SIGINT, watch)
    try:
        from .cli.app import main as run_command
    except BaseException as exc:    # noqa: BLE001 -- a Ctrl-C whatever it was turned into
        if not seen and not isinstance(exc, KeyboardInterrupt):
            raise
        sys.stderr.write("kkmeans: interrupted\n")
        sys.exit(128 + signal.SIGINT)
    finally:
        if previous is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous)
    run_command()
