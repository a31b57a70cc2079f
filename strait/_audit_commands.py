"""``strait audit reconcile|ledger|replicas|replay``: the Spark audit jobs (docs/audit.md).

Each job is a click command in ``spark_jobs.jobs.<job>``, the same one ``spark-submit`` runs;
this group imports it only when it is invoked (PySpark is the ``spark`` extra and slow to
import). ``strait audit reconcile`` also takes ``--topology FILE --link NAME`` (the failover
commands' topology): the link's source and target sites become ``--source``/``--target``, and
the mirror's admin API says whether the link is offset-preserving or MM2 (``--mode``,
``--source-alias``, ``--target-alias``), so an operator names a link instead of bootstrap lists.
``strait audit ledger`` and ``replay`` take ``--topology FILE`` too: their ``--site`` then names
a site of it. A topology site's ``tls`` and ``sasl`` (a secured appliance's CA and ``admin``
user) become the job's security settings, as its ``--command-config`` would give them; a
``--command-config`` given on the command line wins.

Exit status (every job): 0 clean, 1 something found, 2 bad input, 3 the job could not run.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from failover.topology import Site
    from node.client import ClientSecurity

#: The jobs and their one-line help (shown without importing PySpark).
JOBS = {
    "reconcile": "Compare a mirror link's source and target sites record by record.",
    "ledger": "Check a chaos history against what a site or its segments hold.",
    "replicas": "Check that a partition's replicas agree up to the high watermark (offline).",
    "replay": "Write a failover's divergence export back into the new primary (dry run by default).",
}


def _installed(name: str) -> bool:
    """The job's module is there (found without importing it, so without importing PySpark)."""
    try:
        return importlib.util.find_spec(f"spark_jobs.jobs.{name}") is not None
    except ModuleNotFoundError:
        return False


class _Jobs(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in JOBS if _installed(name)]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in JOBS or not _installed(name):
            return None
        try:
            module = importlib.import_module(f"spark_jobs.jobs.{name}")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] in {"pyspark", "pyarrow", "pandas"}:
                raise click.ClickException(
                    f"strait audit needs PySpark ({exc.name} is missing): pip install 'strait[spark]'"
                ) from None
            raise
        command: click.Command = module.command
        if name == "reconcile":
            return with_topology(command)
        return with_site_topology(command) if name in ("ledger", "replay") else command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, JOBS[name]) for name in self.list_commands(ctx)])


@click.group("audit", cls=_Jobs, help="Spark audit jobs: reconcile, ledger, replicas, replay (docs/audit.md).")
def audit_group() -> None:
    pass


def with_topology(job: click.Command) -> click.Command:
    """``job`` (reconcile) with ``--topology FILE``: ``--link NAME`` then names a link of it, and
    its sites and mode fill in ``--source``, ``--target``, ``--mode`` and ``--source-alias``
    where they were not given on the command line."""

    def callback(topology_path: Path | None, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        if topology_path is not None:
            given = {
                name
                for name in kwargs
                if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
            }
            kwargs.update(resolve_link(topology_path, kwargs.get("link"), given))
        assert job.callback is not None
        return ctx.invoke(job.callback, **kwargs)

    topology = click.Option(
        ["--topology", "topology_path"],
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="A failover topology (strait up's appliance.json or a TOML file): with --link, the link's "
        "sites and mode fill in --source, --target, --mode and --source-alias, and each site's tls and sasl "
        "its side's security (unless a --*command-config is given).",
    )
    return click.Command(
        job.name,
        params=[*job.params, topology],
        callback=callback,
        help=job.help,
        short_help=job.short_help,
        epilog=job.epilog,
        context_settings=job.context_settings,
    )


def resolve_link(topology_path: Path, name: str | None, given: set[str]) -> dict[str, Any]:
    """The options link ``name`` of the topology stands for, except those in ``given``."""
    from failover.errors import TopologyError
    from failover.topology import load_topology

    if not name:
        raise click.UsageError("--topology needs --link NAME (the mirror link to reconcile)")
    try:
        topology = load_topology(topology_path)
        link = topology.link(name)
        sites = {"source": topology.site(link.source), "target": topology.site(link.target)}
    except TopologyError as exc:
        raise click.UsageError(str(exc)) from None
    found: dict[str, Any] = {}
    for side, site in sites.items():
        if side in given:
            continue  # a side named on the command line: its security is the command line's too
        found[side] = site.bootstrap
        if (site.tls or site.sasl) and not {"command_config", f"{side}_command_config"} & given:
            found[f"{side}_command_config"] = site_security(site)
    mode = _link_mode(link.mirror_admin, name)
    if mode is not None:
        found["mode"] = mode
        if mode == "mm2":  # MM2's aliases are the sites' names: `<source>.topic`, its offset syncs' topic
            found["source_alias"] = link.source
            found["target_alias"] = link.target
    return {key: value for key, value in found.items() if key not in given}


def _link_mode(admin_url: str, name: str) -> str | None:
    """The link's mode (``offset`` or ``mm2``) from its mirror's admin API; None when the mirror
    cannot say (then --mode's own default applies)."""
    from mirror import MirrorAdminClient, MirrorError

    try:
        status = MirrorAdminClient(admin_url, timeout=5).link(name)
    except (MirrorError, OSError) as exc:
        click.echo(
            f"warning: the mirror at {admin_url} did not say link {name}'s mode ({exc}); using --mode's default",
            err=True,
        )
        return None
    mode = status.get("link", {}).get("mode")
    return "mm2" if mode == "mm2" else "offset" if mode else None


def with_site_topology(job: click.Command) -> click.Command:
    """``job`` (ledger, replay) with ``--topology FILE``: ``--site NAME`` then names a site of it,
    whose bootstrap servers and security (``tls``, ``sasl``) the job uses; ``--command-config``
    on the command line wins over the site's security."""

    def callback(topology_path: Path | None, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        if topology_path is not None:
            if not kwargs.get("site"):
                raise click.UsageError("--topology needs --site NAME (a site of the topology)")
            site = _topology_site(topology_path, kwargs["site"])
            kwargs["site"] = site.bootstrap
            given = ctx.get_parameter_source("security") not in (None, click.core.ParameterSource.DEFAULT)
            if (site.tls or site.sasl) and not given:
                kwargs["security"] = site_security(site)
        assert job.callback is not None
        return ctx.invoke(job.callback, **kwargs)

    def site_param(param: click.Parameter) -> click.Parameter:
        """``--site`` checks its value as host:port only without --topology (with it, a name)."""
        checked = param.callback
        if param.name != "site" or checked is None:
            return param
        unchecked = copy.copy(param)

        def check(ctx: click.Context, p: click.Parameter, value: Any) -> Any:
            if value is None or ctx.params.get("topology_path") is not None:
                return value
            return checked(ctx, p, value)

        unchecked.callback = check
        return unchecked

    topology = click.Option(
        ["--topology", "topology_path"],
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        is_eager=True,  # --site's check needs to know whether it names a site of it
        help="A failover topology (strait up's appliance.json or a TOML file): --site then names one of its "
        "sites, whose bootstrap servers and tls and sasl (unless --command-config is given) are used.",
    )
    return click.Command(
        job.name,
        params=[*(site_param(p) for p in job.params), topology],
        callback=callback,
        help=job.help,
        short_help=job.short_help,
        epilog=job.epilog,
        context_settings=job.context_settings,
    )


def _topology_site(topology_path: Path, name: str) -> Site:
    from failover.errors import TopologyError
    from failover.topology import load_topology

    try:
        return load_topology(topology_path).site(name)
    except TopologyError as exc:
        raise click.UsageError(f"--site: {exc}") from None


def site_security(site: Site) -> ClientSecurity:
    """A topology site's ``tls`` and ``sasl`` as a client's security settings, the password read
    now from its file. Raises UsageError naming the site (never the password)."""
    from mirror import MirrorError
    from node.client import ClientSecurity

    tls, sasl = site.tls, site.sasl
    settings: dict[str, Any] = {"protocol": ("SASL_" if sasl else "") + ("SSL" if tls else "PLAINTEXT")}
    if tls is not None:
        if tls.cert is not None and tls.key not in (None, tls.cert):
            raise click.UsageError(
                f"site {site.name}: tls.cert and tls.key are two files; the audit jobs take a client certificate as "
                "Kafka's ssl.keystore.location does, its key and chain in one PEM file: give that file as both"
            )
        settings |= {"truststore": tls.ca, "keystore": tls.cert, "check_hostname": tls.check_hostname}
    if sasl is not None:
        try:
            credentials = sasl.credentials()
        except MirrorError as exc:
            raise click.UsageError(f"site {site.name}: {exc}") from None
        settings |= {
            "sasl_mechanism": credentials.mechanism,
            "sasl_username": credentials.username,
            "sasl_password": credentials.password,
        }
    return ClientSecurity(**settings)
