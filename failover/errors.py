"""The failover package's errors, and the exit code each one means for ``strait failover``.

| exit | meaning |
|---|---|
| 0 | done (or already done: every command is idempotent) |
| 1 | a step failed (a site or the mirror refused or timed out); re-running the same command resumes from the journal |
| 2 | bad input: the topology file (or a ZooKeeper credential it lacks), an unknown link or site, a bad option value |
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


class ZooKeeperSecured(FailoverError):
    """A site's ZooKeeper refused a change with NoAuth: the site secures its znodes
    (``zookeeper.set.acl``) and the topology gives no credential for it, or not the one its
    nodes use. Running the command again cannot help until the topology's
    ``sites.<site>.zookeeper_digest_file`` is right."""

    exit_code = 2

    def __init__(self, site: str, connect: str, action: str, *, with_credential: bool) -> None:
        key = f"sites.{site}.zookeeper_digest_file"
        if with_credential:
            message = (
                f"site {site}'s ZooKeeper ({connect}) refused to {action} with the credential in the topology's "
                f"{key} (NoAuth): it is not the one the site's nodes use (their strait.zookeeper.digest.file)"
            )
        else:
            message = (
                f"site {site}'s ZooKeeper ({connect}) is secured (its nodes set zookeeper.set.acl) and refused to "
                f"{action} (NoAuth): give its credential in the topology as {key} (a file holding one line "
                f"user:password, as the nodes' strait.zookeeper.digest.file)"
            )
        super().__init__(message)
        self.site = site
        self.connect = connect
        self.action = action
        self.with_credential = with_credential


class WrongState(FailoverError):
    """The link is not in a state this command applies to; the message says what to run instead."""

    exit_code = 3


class LinkBusy(FailoverError):
    """Another failover command holds the link's lock."""

    exit_code = 4
