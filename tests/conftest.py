"""Fixtures and hooks only (plain helpers are in helpers/): the fixtures shared by the test modules
(single_thread, trained_experiment), and the CI guard on skips: with CI=true a skipped test fails
unless its reason starts with "hardware:".

This is the rootmost conftest: pytest_plugins may only be declared here."""

import os

import pytest
import torch

from mt.experiment.paths import Experiment

# The `mt` processes the tests start run on the C library's malloc: with tcmalloc installed, each would
# start twice (mt restarts itself with it preloaded), ~0.1 s apiece. tests/system/test_allocator.py tests
# that restart with its own environment.
os.environ.setdefault("MT_ALLOCATOR", "system")

pytest_plugins = ["pytester"]  # tests/unit/test_skip_guard.py runs pytest on tiny test files

# The one skip CI lets pass: a machine without the hardware a test needs (a GPU, CUDA, a CPU feature, a
# second process-group backend), e.g. skipif(..., reason="hardware: no CUDA device"). Missing data or
# software is CI's own fault: there such a skip fails, so a green run never hides tests that did not run.
HARDWARE = "hardware:"


def refused_skip(report: pytest.TestReport | pytest.CollectReport) -> str | None:
    """The reason of a skip that CI=true does not allow (None for any other report, or without CI=true)."""
    if os.environ.get("CI") != "true" or not report.skipped or hasattr(report, "wasxfail"):
        return None
    longrepr = report.longrepr  # a skip's is (path, line, "Skipped: REASON")
    reason = (longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)).removeprefix("Skipped: ")
    return None if reason.startswith(HARDWARE) else reason


def _fail_refused_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = refused_skip(report)
    if reason is not None:
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI=true: {reason}\nIn CI only a skip for missing hardware passes (its "
                           f"reason starting {HARDWARE!r}, tests/conftest.py); give the test what it needs instead.")


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: xfail's report already says it was one
def pytest_runtest_makereport(item, call):
    report = yield
    _fail_refused_skip(report)
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_make_collect_report(collector):
    """A module skipped as a whole (a module-level importorskip) is refused too, as a collection error."""
    report = yield
    _fail_refused_skip(report)
    return report


@pytest.fixture
def single_thread():
    """Tiny tensors on a shared 2-core machine: extra intra-op threads only add synchronisation and
    make a step up to ten times slower; one thread is fastest (and deterministic)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def trained_experiment(tmp_path_factory) -> Experiment:
    """A tiny experiment trained on the toy corpus, shared by the tests that only read it: 1+2 layers,
    2 heads, 40 steps; validation every 15, periodic checkpoints at 20 and 40, and the log's last
    training record (step 36) before last.pt's step (40). Copy it to change it."""
    from helpers import one_thread, tiny_experiment

    from mt.training.loop import train

    exp, cfg = tiny_experiment(
        tmp_path_factory.mktemp("trained"), {"train": 400, "valid": 20, "test": 20},
        model=dict(enc_layers=1, dec_layers=2, dropout=0.0),
        train=dict(max_steps=40, max_tokens=600, lr_peak=3e-3, warmup_steps=10, log_every=6, valid_every=15,
                   save_every=20),
        decode=dict(max_len_b=10),
    )
    with one_thread():
        train(exp, cfg)
    return exp


@pytest.fixture(scope="module")
def translator(trained_experiment):
    """The trained experiment's Translator, loaded once a module (a module that needs another defines its own)."""
    from mt.decoding.translator import Translator

    return Translator.load(trained_experiment, trained_experiment.load_config())


@pytest.fixture(scope="module")
def units(translator):
    """The text layer's units over `translator` (mt.documents.units), as `mt translate --input` asks for them."""
    from mt.decoding.options import DecodeOptions
    from mt.documents.units import TranslatorUnits

    return TranslatorUnits(translator, DecodeOptions())
