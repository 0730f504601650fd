"""mt's benchmarks: one script a measurement, run from the repository's root as a module,
`python -m bench.translate --help`; what several scripts share is in bench/common.py. Not part of the
installed library: a script imports mt as installed (`pip install -e .`) and bench.common, nothing else.
"""
