"""Where things are: TESTS (tests/), REPO (the repository) and FIXTURES (tests/fixtures)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]  # tests/, where conftest.py is
REPO = TESTS.parent  # the repository: recipes/, docs/, tools/, bench/, data/
FIXTURES = TESTS / "fixtures"  # the experiment written by an earlier mt (integration/test_saved_experiment.py)
