"""``strait site revive`` and what is under it, without processes: the request and answer files
(strait._control), ``strait up``'s handling of them (Appliance.tick), the exit codes, and how a
site reports its loss (LocalSite.poll with stand-in processes)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import strait._site
from strait._appliance import Appliance
from strait._control import ANSWER_SUFFIX, REQUEST_SUFFIX, Inbox, LauncherStopped, control_dir, launcher_running
from strait._processes import exit_reason, join_subjects, port_free, port_of
from strait._site import LocalSite, NothingToRevive, SiteError
from strait.cli import main

pytestmark = pytest.mark.unit

Revive = Callable[[Callable[[], bool], Callable[[str], None]], list[str]]


@contextmanager
def running(appliance: Appliance, *, answering: bool = True) -> Iterator[list[str]]:
    """``strait up``'s side of the files: appliance.json and the inbox, and (``answering``) its loop
    calling tick; yields what it printed."""
    printed: list[str] = []

    def echo(message: str = "", err: bool = False) -> None:
        printed.append(message)

    appliance.ready(echo)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.02):
            appliance.tick(stop.is_set, echo)

    thread = threading.Thread(target=loop, daemon=True)
    if answering:
        thread.start()
    try:
        yield printed
    finally:
        stop.set()
        if answering:
            thread.join(10)
        appliance.removed()


def revive_cli(directory: Path, *args: str, timeout: float = 10) -> Result:
    return CliRunner().invoke(main, ["site", "revive", *args, "--dir", str(directory), "--timeout", str(timeout)])


def with_revive(appliance: Appliance, monkeypatch: pytest.MonkeyPatch, revive: Revive) -> None:
    monkeypatch.setattr(appliance.east, "revive", revive)


def test_no_strait_up_in_the_directory_is_bad_usage(tmp_path: Path) -> None:
    result = revive_cli(tmp_path, "east")
    assert result.exit_code == 2, result.output
    assert f"no `strait up` is running with --dir {tmp_path}" in result.output
    # An appliance that stopped (its lock released, files left) is the same.
    appliance = Appliance(tmp_path / "a", nodes=1)
    with running(appliance):
        assert launcher_running(tmp_path / "a")
    assert not launcher_running(tmp_path / "a")
    assert revive_cli(tmp_path / "a", "east").exit_code == 2


def test_an_unknown_site_is_bad_usage_naming_the_known_ones(tmp_path: Path) -> None:
    appliance = Appliance(tmp_path, nodes=1)
    with running(appliance):
        result = revive_cli(tmp_path, "north")
    assert result.exit_code == 2, result.output
    assert "unknown site 'north'; this appliance's sites are east, west" in result.output
    assert not list(control_dir(tmp_path).glob(f"*{REQUEST_SUFFIX}"))
    assert not list(control_dir(tmp_path).glob(f"*{ANSWER_SUFFIX}"))  # the asker removed its answer


def test_a_site_that_is_not_lost_is_bad_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    appliance = Appliance(tmp_path, nodes=1)

    def not_lost(stop_requested: Callable[[], bool], begin: Callable[[str], None]) -> list[str]:
        raise NothingToRevive("site east is not lost: its ZooKeeper and node 1 run; there is nothing to bring back")

    with_revive(appliance, monkeypatch, not_lost)
    with running(appliance):
        result = revive_cli(tmp_path, "east")
    assert result.exit_code == 2, result.output
    assert "site east is not lost" in result.output


def test_a_site_that_never_started_has_nothing_to_revive(tmp_path: Path) -> None:
    with pytest.raises(NothingToRevive, match="site east is not running under this launcher"):
        LocalSite(tmp_path / "east", nodes=1).revive()


def test_a_revived_site_answers_done_and_the_command_prints_progress_and_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    appliance = Appliance(tmp_path, nodes=1)
    calls = []

    def revived(stop_requested: Callable[[], bool], begin: Callable[[str], None]) -> list[str]:
        begin("bringing site east back on its data: ZooKeeper on 127.0.0.1:2181")
        calls.append(stop_requested())
        return []

    with_revive(appliance, monkeypatch, revived)
    with running(appliance) as printed:
        result = revive_cli(tmp_path, "east")
        described = json.loads((tmp_path / "appliance.json").read_text())
    assert result.exit_code == 0, result.output
    assert calls == [False]
    assert "bringing site east back on its data: ZooKeeper on 127.0.0.1:2181" in result.stderr
    assert result.stdout.startswith("site east is back on its data: bootstrap")
    assert "site east is back, on the same addresses" in printed
    assert described["sites"]["east"]["state"] == "up"
    assert set(described["sites"]) == {"east", "west"}


def test_a_failed_revive_exits_1_with_strait_ups_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    appliance = Appliance(tmp_path, nodes=1)

    def port_taken(stop_requested: Callable[[], bool], begin: Callable[[str], None]) -> list[str]:
        raise SiteError("site east: cannot bring ZooKeeper back on port 40125: another process uses 127.0.0.1:40125")

    with_revive(appliance, monkeypatch, port_taken)
    with running(appliance) as printed:
        result = revive_cli(tmp_path, "east")
    assert result.exit_code == 1, result.output
    assert "cannot bring ZooKeeper back on port 40125" in result.output
    assert "site east is still lost" in result.output
    assert any("port 40125" in line for line in printed)  # strait up says it too


def test_no_answer_within_the_timeout_exits_1_and_withdraws_the_request(tmp_path: Path) -> None:
    appliance = Appliance(tmp_path, nodes=1)
    with running(appliance, answering=False):
        result = revive_cli(tmp_path, "east", timeout=1)
        assert not list(control_dir(tmp_path).glob(f"*{REQUEST_SUFFIX}"))
    assert result.exit_code == 1, result.output
    assert "no answer within 1 s; `strait up` did not take the request (withdrawn)" in result.output


def test_a_launcher_that_stops_before_answering_fails_the_request(tmp_path: Path) -> None:
    from strait._control import ask

    appliance = Appliance(tmp_path, nodes=1)
    appliance.ready(lambda *a, **k: None)
    threading.Timer(0.3, appliance.removed).start()
    with pytest.raises(LauncherStopped, match="stopped before it answered"):
        ask(tmp_path, "revive", "east", 10)


def test_the_inbox_clears_what_an_earlier_launcher_left_and_refuses_a_malformed_request(tmp_path: Path) -> None:
    where = control_dir(tmp_path)
    where.mkdir(parents=True)
    (where / f"old{REQUEST_SUFFIX}").write_text('{"action": "revive", "site": "east"}')
    (where / f"old{ANSWER_SUFFIX}").write_text('{"state": "done", "message": ""}')
    inbox = Inbox(tmp_path)
    inbox.open()
    try:
        assert sorted(p.name for p in where.iterdir()) == ["launcher.lock"]
        assert (where / "launcher.lock").read_text().startswith("pid ")
        (where / f"bad{REQUEST_SUFFIX}").write_text("{not json")
        (where / f"good{REQUEST_SUFFIX}").write_text('{"id": "good", "action": "revive", "site": "west"}')
        (taken,) = inbox.take()
        assert (taken.id, taken.action, taken.site) == ("good", "revive", "west")
        assert json.loads((where / f"bad{ANSWER_SUFFIX}").read_text())["state"] == "refused"
        assert inbox.take() == []
        with pytest.raises(BlockingIOError):  # one launcher per directory
            Inbox(tmp_path).open()
    finally:
        inbox.close()
    assert not launcher_running(tmp_path)


# -- how a site reports its loss -------------------------------------------------------------------


class Exited:
    """Stands in for a node's Child or the EmbeddedZooKeeper: a process that exited with ``code``."""

    def __init__(self, code: int | None, log_path: Path = Path("zookeeper.log")) -> None:
        self.code = code
        self.log_path = log_path
        self.port = 2181

    def poll(self) -> int | None:
        return self.code


def losing(site: LocalSite, zookeeper: int | None, *nodes: int | None) -> None:
    site._zookeeper = Exited(zookeeper)
    for node, code in zip(site.nodes, nodes, strict=True):
        node.child = Exited(code)  # type: ignore[assignment]


def test_a_lost_site_is_reported_once_in_one_line_naming_its_processes_and_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    appliance = Appliance(tmp_path, nodes=3)
    east = appliance.east
    losing(east, -9, -9, -9, -9)
    east._started = True
    assert east.poll() == []  # the exits settle first
    assert east.state == "lost"
    monkeypatch.setattr(strait._site, "EXIT_SETTLE_S", 0.0)
    (news,) = east.poll()
    assert news == (
        "site east is lost: ZooKeeper and nodes 1,2,3 exited (killed by SIGKILL); strait up keeps site west "
        f"and the mirror running; bring it back with: strait site revive east --dir {tmp_path}"
    )
    assert east.poll() == []  # once


def test_a_site_whose_nodes_died_but_not_its_zookeeper_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strait._site, "EXIT_SETTLE_S", 0.0)
    east = Appliance(tmp_path, nodes=2).east
    losing(east, None, -9, 1)
    (news,) = east.poll()
    assert news.startswith(
        "site east is lost: node 1 exited (killed by SIGKILL), node 2 exited (code 1); its ZooKeeper still runs; "
    )
    west = Appliance(tmp_path, nodes=2).west
    losing(west, -15, None, None)
    (news,) = west.poll()
    assert news.startswith(
        "site west is lost: ZooKeeper exited (killed by SIGTERM); nodes 1,2 still run without ZooKeeper; "
    )


def test_one_dead_node_is_not_a_lost_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strait._site, "EXIT_SETTLE_S", 0.0)
    east = Appliance(tmp_path, nodes=3).east
    losing(east, None, None, -9, None)
    east._started = True
    (news,) = east.poll()
    assert news.startswith("site east: node 2 exited on its own with code -9")
    assert east.state == "up"


def test_strait_site_up_still_stops_when_its_zookeeper_exits(tmp_path: Path) -> None:
    site = LocalSite(tmp_path / "east", nodes=1)  # no loss_advice: a loss is fatal
    losing(site, 3, None)
    with pytest.raises(SiteError, match="site east: ZooKeeper exited on its own with code 3"):
        site.poll()


def test_the_words_and_ports_helpers() -> None:
    assert join_subjects(["ZooKeeper", "node 1", "node 2"]) == "ZooKeeper and nodes 1,2"
    assert join_subjects(["node 3"]) == "node 3"
    assert exit_reason(-9) == "killed by SIGKILL"
    assert exit_reason(1) == "code 1"
    assert port_of("127.0.0.1:19092") == 19092
    assert port_of("http://127.0.0.1:8080") == 8080
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert not port_free(sock.getsockname()[1])
