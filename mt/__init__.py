"""mt: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) and the pipeline around it."""

__version__ = "0.1.0"
