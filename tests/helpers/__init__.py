"""The tests' shared helpers: plain functions, classes and constants (the fixtures are in conftest.py).
Import them as `from helpers import ...` (tests/ is on sys.path: pythonpath in pyproject.toml's
[tool.pytest.ini_options]); each lives in the module named below.

- paths: TESTS (tests/), REPO (the repository), FIXTURES (tests/fixtures);
- toy: a toy German-English(-French) corpus and tiny experiments: toy_corpus, toy_multiway, WORDS_DE,
  WORDS_EN, WORDS_FR, WORDS, tiny_experiment, tiny_config, one_thread;
- experiments: build_experiment (a tiny experiment built through the library), copy_experiment;
- models: tiny_model, sources, params, assert_params_close, assert_same;
- commands: mt (`mt ARGS` in this process), mt_process (`python -m mt ARGS` in another), one_line;
- ding: DING_SAMPLE, write, write_big_ding;
- markup: markup_tags, markup_text, balanced (a translated fragment read back);
- serve: LINES, load, Served (uvicorn in a thread on a loopback port), serve_process (`python -m mt serve`
  on the port it chose), call, ok, raw_http, Hook;
- formats: small document formats a test registers beside mt's own: registered, stand_in, escape_lines;
- argos: argos_translate (Argos Translate in a subprocess over a temporary home), argos_env, downloaded.
"""

from helpers.argos import argos_env, argos_translate, downloaded
from helpers.commands import mt, mt_process, one_line
from helpers.ding import DING_SAMPLE, write, write_big_ding
from helpers.experiments import build_experiment, copy_experiment
from helpers.formats import escape_lines, registered, stand_in
from helpers.markup import balanced, markup_tags, markup_text
from helpers.models import assert_params_close, assert_same, params, sources, tiny_model
from helpers.paths import FIXTURES, REPO, TESTS
from helpers.serve import LINES, Hook, Served, call, load, ok, raw_http, serve_process
from helpers.toy import (
    WORDS,
    WORDS_DE,
    WORDS_EN,
    WORDS_FR,
    one_thread,
    tiny_config,
    tiny_experiment,
    toy_corpus,
    toy_multiway,
)

__all__ = [
    "DING_SAMPLE", "FIXTURES", "LINES", "REPO", "TESTS", "WORDS", "WORDS_DE", "WORDS_EN", "WORDS_FR", "Hook",
    "Served", "argos_env", "argos_translate", "assert_params_close", "assert_same", "balanced", "build_experiment", "call", "copy_experiment", "downloaded", "escape_lines", "load", "markup_tags", "markup_text", "mt",
    "mt_process", "one_line", "one_thread", "ok", "params", "raw_http", "registered", "serve_process", "sources", "stand_in", "tiny_config", "tiny_experiment",
    "tiny_model", "toy_corpus", "toy_multiway", "write", "write_big_ding",
]
