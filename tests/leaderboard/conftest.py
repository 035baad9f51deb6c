from __future__ import annotations

import pytest

from tests.leaderboard import fixtures


@pytest.fixture(scope="package")
def fixture_db(tmp_path_factory) -> fixtures.FixtureDB:
    """The fixture results database (read-only in tests; built once)."""
    return fixtures.build(tmp_path_factory.mktemp("lb") / "results.duckdb")
