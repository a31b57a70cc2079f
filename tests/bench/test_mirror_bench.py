"""The mirror benchmark's settings (bench/mirror_bench.py): link settings from ``--link``.

The benchmark itself runs two sites, a proxy and a mirror for minutes; it is run by hand
(bench/README.md), and these tests check what it hands the mirror.
"""

from __future__ import annotations

import pytest

from bench import mirror_bench as mb
from bench._mirror_topology import link_table

pytestmark = pytest.mark.unit


def test_link_settings_reach_the_link_table_and_cannot_replace_its_own_keys() -> None:
    settings = mb.parse_args(["--quick", "--link", "fetch_max_bytes=16777216", "--link", "pipeline_fetches=4"])
    assert settings.link_settings == {"fetch_max_bytes": 16777216, "pipeline_fetches": 4}
    link = link_table("bench-t", "east:1", "west:2", ["t"], settings.link_settings | {"name": 7})
    assert link["fetch_max_bytes"] == 16777216 and link["pipeline_fetches"] == 4
    assert link["name"] == "bench-t"  # the benchmark's own keys win
    assert "fetch_max_bytes" not in link_table("bench-t", "east:1", "west:2", ["t"])  # the mirror's defaults


@pytest.mark.parametrize("bad", ["fetch_max_bytes", "=4", "pipeline_fetches=four", "pipeline_fetches="])
def test_a_link_setting_that_is_not_key_equals_integer_is_refused(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        mb.parse_args(["--quick", "--link", bad])
    assert repr(bad) in capsys.readouterr().err
