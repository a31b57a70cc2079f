"""``strait``: the command router. Each area registers its own subcommands, imported lazily."""

from __future__ import annotations

import contextlib
import faulthandler
import io
import logging
import signal

import click

from ._audit_commands import audit_group
from ._chaos_commands import chaos_group
from ._doctor_command import doctor
from ._failover_commands import failover_group
from ._groups_commands import groups_group
from ._log_commands import log_group
from ._mirror_commands import mirror_group
from ._node_commands import node_group
from ._quotas_commands import quotas_group
from ._reassign_command import reassign
from ._security_commands import acls_group
from ._site_commands import site_group
from ._topics_commands import topics_group
from ._up_command import up
from ._users_commands import users_group
from ._zookeeper_commands import zookeeper


@click.group(
    help="strait: Kafka-compatible brokers with cross-site mirroring and tested DR failover.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG level to stderr.")
@click.version_option(package_name="strait")
def main(verbose: bool) -> None:
    # Process-wide settings (signal dispositions) belong to run(), the `strait` executable: this
    # group is also invoked in-process (tests, CliRunner), where they would change the caller.
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


main.add_command(acls_group)
main.add_command(audit_group)
main.add_command(chaos_group)
main.add_command(doctor)
main.add_command(failover_group)
main.add_command(groups_group)
main.add_command(log_group)
main.add_command(mirror_group)
main.add_command(node_group)
main.add_command(quotas_group)
main.add_command(site_group)
main.add_command(topics_group)
main.add_command(up)
main.add_command(users_group)
main.add_command(zookeeper)
topics_group.add_command(reassign)


def run() -> None:
    """The `strait` executable: the process's signal settings, then the command."""
    # Behave like other Unix tools when piped into `head`: stop quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # SIGUSR1 writes every thread's stack to stderr (a child's log): node.proc sends it to a
    # `strait` child that misses its stop deadline, just before killing it, to show where it hung.
    with contextlib.suppress(io.UnsupportedOperation, AttributeError, ValueError):
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # not when stderr is no file
    main()


if __name__ == "__main__":
    run()
