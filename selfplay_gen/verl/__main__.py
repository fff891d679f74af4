"""`python -m selfplay_gen.verl --config-path`: print where the agent-loop registration file is
installed, so scripts never hard-code it."""

import click

from . import config_path


@click.command()
@click.option(
    "--config-path",
    "show_path",
    is_flag=True,
    required=True,
    help="Print the path of agent_loops.yaml (for actor_rollout_ref.rollout.agent.agent_loop_config_path).",
)
def main(show_path: bool) -> None:
    click.echo(config_path())


if __name__ == "__main__":
    main()
