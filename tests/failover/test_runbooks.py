"""The runbooks in docs/runbooks/ are executed: every ``sh step`` block, in order, against a
real two-site appliance, with the output and exit code each block's ``# expect:`` and
``# exit:`` lines state. A runbook that drifts from the code fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.failover.appliance import (
    LINK,
    create_topic,
    failover,
    kill_site,
    revive_site,
    start_appliance,
    wait_mirrored,
)
from tests.node.harness import wait_for

RUNBOOKS = Path(__file__).resolve().parents[2] / "docs" / "runbooks"
STEP = re.compile(r"^```sh step\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass
class Step:
    runbook: str
    number: int
    script: str
    expect: list[str] = field(default_factory=list)
    exit_code: int = 0


def steps(runbook: str) -> list[Step]:
    """The step blocks of ``docs/runbooks/<runbook>``, in order."""
    text = (RUNBOOKS / runbook).read_text()
    found = []
    for number, match in enumerate(STEP.finditer(text), start=1):
        step = Step(runbook, number, match.group(1))
        for line in step.script.splitlines():
            if line.startswith("# expect: "):
                step.expect.append(line.removeprefix("# expect: "))
            elif line.startswith("# exit: "):
                step.exit_code = int(line.removeprefix("# exit: "))
        found.append(step)
    return found


def run_runbook(runbook: str, env: dict[str, str], cwd: Path) -> None:
    for step in steps(runbook):
        done = subprocess.run(
            ["bash", "-c", step.script], env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False
        )
        output = done.stdout + done.stderr
        where = f"{runbook} step {step.number}:\n{step.script}\n--- output (exit {done.returncode}) ---\n{output}"
        assert done.returncode == step.exit_code, where
        for pattern in step.expect:
            assert re.search(pattern, output, re.MULTILINE), f"expected /{pattern}/ in {where}"


def test_every_runbook_has_steps_and_each_step_states_what_it_expects() -> None:
    books = sorted(p.name for p in RUNBOOKS.glob("*.md") if p.name != "README.md")
    assert books == ["dr-drill.md", "failback.md", "planned-switchover.md", "unplanned-failover.md"]
    for book in books:
        found = steps(book)
        assert found, book
        for step in found:
            assert step.expect or "# exit:" in step.script, f"{book} step {step.number} asserts nothing"


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.chaos
def test_the_runbooks_work_on_a_real_appliance(tmp_path: Path) -> None:
    app = start_appliance(tmp_path, nodes=1)
    try:
        east, west = app.bootstrap("east"), app.bootstrap("west")
        create_topic(east, "orders", 2)
        producer = Producer({"bootstrap.servers": east, "acks": "all"})
        for i in range(100):
            producer.produce("orders", value=b"%d" % i)
        assert producer.flush(30) == 0
        wait_mirrored(app, "orders", 100)
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "STRAIT_TOPOLOGY": str(app.topology),
            "EAST": east,
            "WEST": west,
            "EXPORT_DIR": str(tmp_path / "export-1"),
        }

        run_runbook("planned-switchover.md", env, tmp_path)
        run_runbook("failback.md", env, tmp_path)

        kill_site(app, "east")
        run_runbook("unplanned-failover.md", env, tmp_path)
        revive_site(app, "east")

        def fenced() -> bool:
            code, status, _ = failover(app, "status", LINK)
            return code == 0 and (status["links"][0]["mirror"].get("fence") or {}).get("state") == "fenced"

        wait_for("the mirror to fence east once it is back", fenced, 90, interval=1)
        run_runbook("failback.md", {**env, "EXPORT_DIR": str(tmp_path / "export-2")}, tmp_path)
    finally:
        app.stop()


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.chaos
def test_the_drill_runbook_passes(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DRILL_DIR": str(tmp_path / "drill"),
    }
    run_runbook("dr-drill.md", env, tmp_path)


def test_a_step_whose_output_drifts_from_the_runbook_fails(tmp_path: Path) -> None:
    book = tmp_path / "book.md"
    book.write_text("```sh step\necho 'link state: active'\n# expect: link state: stopped\n```\n")
    with pytest.raises(AssertionError, match="expected /link state: stopped/"):
        run_runbook(str(book), dict(os.environ), tmp_path)
    book.write_text("```sh step\nfalse\n# expect: .*\n```\n")
    with pytest.raises(AssertionError, match="exit 1"):
        run_runbook(str(book), dict(os.environ), tmp_path)
