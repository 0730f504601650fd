"""The CI guard on skips (tests/conftest.py): with CI=true a skip fails unless its reason starts with
"hardware:"; without CI=true every skip stays a skip."""

import pytest
from helpers import TESTS

CONFTEST = TESTS / "conftest.py"

SKIPS = """
import pytest

def test_runs():
    pass

@pytest.mark.skipif(True, reason="hardware: no CUDA device")
def test_needs_a_gpu():
    pass

@pytest.mark.skipif(True, reason="data/multi30k not found")
def test_needs_data_mark():
    pass

def test_needs_data_in_the_body():
    pytest.skip("corpus not downloaded")

@pytest.mark.xfail(reason="a known bug, not a skip")
def test_known_bug():
    assert False
"""


@pytest.fixture
def guarded(pytester):
    pytester.makeconftest(CONFTEST.read_text())  # the real guard, in a run of its own
    return pytester


def test_ci_fails_a_skip_for_missing_data_and_passes_one_for_missing_hardware(guarded, monkeypatch):
    monkeypatch.setenv("CI", "true")
    guarded.makepyfile(test_skips=SKIPS)
    result = guarded.runpytest("-rs")
    # The mark's skip happens at setup (an error), the body's during the call (a failure).
    result.assert_outcomes(passed=1, skipped=1, errors=1, failed=1, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*skipped under CI=true: data/multi30k not found*",
                                 "*skipped under CI=true: corpus not downloaded*",
                                 "SKIPPED*hardware: no CUDA device"])


def test_without_ci_every_skip_is_a_skip(guarded, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    guarded.makepyfile(test_skips=SKIPS)
    result = guarded.runpytest()
    result.assert_outcomes(passed=1, skipped=3, xfailed=1)
    assert result.ret == pytest.ExitCode.OK


def test_ci_fails_a_module_skipped_whole_for_a_missing_package(guarded, monkeypatch):
    monkeypatch.setenv("CI", "true")
    guarded.makepyfile(test_module_skip="""
import pytest
pytest.importorskip("a_package_that_is_not_installed")

def test_never_collected():
    pass
""")
    result = guarded.runpytest()
    result.assert_outcomes(errors=1)
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*skipped under CI=true: could not import 'a_package_that_is_not_installed'*"])
