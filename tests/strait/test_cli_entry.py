"""The `strait` executable's process settings, and the command group that must not make them."""

from __future__ import annotations

import signal
import subprocess
import sys

from click.testing import CliRunner

from strait.cli import main


def test_the_command_group_leaves_the_callers_signals_alone() -> None:
    before = signal.getsignal(signal.SIGPIPE)
    result = CliRunner().invoke(main, ["topics", "--help"])
    assert result.exit_code == 0, result.output
    assert signal.getsignal(signal.SIGPIPE) == before == signal.SIG_IGN


def test_the_executable_stops_quietly_when_its_reader_goes_away() -> None:
    # run() restores SIGPIPE's default: a `strait ... | head` ends without a BrokenPipeError trace.
    probe = (
        "import signal\n"
        "from strait import cli\n"
        "cli.main = lambda: print(signal.getsignal(signal.SIGPIPE) == signal.SIG_DFL)\n"
        "cli.run()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "True"
