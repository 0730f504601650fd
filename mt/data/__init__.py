"""Parallel text in: corpora read and cleaned, the tokenizer trained, the splits binarized into arrays on
disk, and read back as training batches. Nothing here knows the model."""
