"""`python -m mt ...` (and `torchrun -m mt ...`) runs the same command line as `mt`."""

from mt.cli.main import entry_point

if __name__ == "__main__":  # not when a search process (mt.decoding.processes) imports it
    entry_point()
