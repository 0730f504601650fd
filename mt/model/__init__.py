"""The Transformer of Vaswani et al. (2017): its layers and attention. It knows nothing of search,
training or serving; search talks to it through encode(), decode() and its cache."""
