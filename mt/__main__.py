"""`python -m mt ...` (and `torchrun -m mt ...`) runs the same command line as `mt`."""

from mt.cli.main import entry_point

entry_point()
