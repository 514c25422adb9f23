"""``python -m kkmeans_cli``: the ``kkmeans`` command line."""
from .cli import main

main()
