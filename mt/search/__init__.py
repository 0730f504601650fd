"""Search over a model's encode()/decode(): greedy, sampling, beam, constrained and continuous beam
search, and ensembles; built from the shared steps in `mt.search.steps`."""
