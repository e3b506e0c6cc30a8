"""``subagents ray status`` and ``subagents ray down``: the Ray cluster's subagents hosts."""

from __future__ import annotations

import click

from subagents.cli.app import main, print_json
from subagents.core.paths import working_dir

address_option = click.option(
    "--ray-address",
    help="The Ray cluster (default: config ray_address, else $RAY_ADDRESS, else a local"
    " `ray start` cluster).",
)


def _address(given: str | None) -> str | None:
    """The cluster to ask (Ray missing: one line, exit 2, as for `run --launcher ray`)."""
    from subagents.launchers import launcher_named

    launcher_named("ray").check()
    if given:
        return given

    from subagents.config import load_settings

    return load_settings(working_dir()).ray_address


@main.group(name="ray")
def ray_group() -> None:
    """The subagents hosts of a Ray cluster (docs/cluster.md)."""


@ray_group.command()
@address_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(ray_address: str | None, as_json: bool) -> None:
    """The nodes (what each offers, what is free), the hosts and the runs they hold."""
    from subagents.launchers import describe_ray_status, ray_status

    found = ray_status(_address(ray_address))
    if as_json:
        print_json(found)
    else:
        click.echo(describe_ray_status(found))


@ray_group.command()
@address_option
@click.option("--force", is_flag=True, help="Also when runs are running: they are aborted.")
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
def down(ray_address: str | None, force: bool, as_json: bool) -> None:
    """Remove the subagents hosts (a run's next start makes them again)."""
    from subagents.launchers import ray_down

    gone = ray_down(_address(ray_address), force=force)
    if as_json:
        print_json(gone)
        return
    hosts = len(gone["hosts"])
    line = f"removed {hosts} host{'s' if hosts != 1 else ''}"
    if gone["aborted"]:
        line += f", aborting {len(gone['aborted'])} run(s)"
    click.echo(line)
