"""The failover package's errors, and the exit code each one means for ``strait failover``.

| exit | meaning |
|---|---|
| 0 | done (or already done: every command is idempotent) |
| 1 | a step failed (a site or the mirror refused or timed out); re-running the same command resumes from the journal |
| 2 | bad input: the topology file, an unknown link or site, a bad option value |
| 3 | wrong state for this command: the message names the state and the command to run instead |
| 4 | another `strait failover` command holds the link (its host and pid are named) |
"""

from __future__ import annotations


class FailoverError(Exception):
    """Base of failover's own errors; the message names the values involved."""

    exit_code = 1


class TopologyError(FailoverError):
    """The topology file cannot be used, or names no such link or site."""

    exit_code = 2


class WrongState(FailoverError):
    """The link is not in a state this command applies to; the message says what to run instead."""

    exit_code = 3


class LinkBusy(FailoverError):
    """Another failover command holds the link's lock."""

    exit_code = 4
