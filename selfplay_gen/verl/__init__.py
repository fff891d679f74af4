"""The verl plugin: two agent loops for verl 0.9.1's agent-loop rollout, a trainer for each (`replay_trainer`:
verl's sync trainer without a rollout engine; `online_trainer`: verl's sync trainer that logs the games' measures
per step), a training set whose rows arrive one part
per iteration (`arriving_rows`, for a trainer started once per run; `parts` is what the loop writes), and,
in `worker_setup`, what its training processes set up (chunked log-probs, the attention backend choice).

- `selfplay_replay` (`replay_loop.ReplayAgentLoop`): trains on games already played: a row written by
  `selfplay-convert --format grpo` is one GRPO group, the K games of one instance from one seat, and
  trajectory j replays game j's stored tokens. Run with `rollout.n=K` (`rollout_n` in
  `convert_summary.json`), under `trainer.v1.trainer_mode=replay` (`replay_trainer`), which starts no
  rollout engine.
- `selfplay_online` (`selfplay_loop.SelfPlayAgentLoop`): plays fresh games with the policy being
  trained in both seats, from rows written by `selfplay-gen init`. Run with `rollout.n>1`: the n
  games of one (instance, seat) row form a group, under `trainer.v1.trainer_mode=selfplay_online`
  (`online_trainer`: verl's sync trainer, which also logs what each step's games did).

verl finds them through the registration file `agent_loops.yaml` (entries `{name, _target_}`)
and picks one per row by the row's `agent_name` column. The Hydra overrides that wire it in:

    actor_rollout_ref.rollout.mode=async
    actor_rollout_ref.rollout.agent.agent_loop_config_path=$(python -m selfplay_gen.verl --config-path)
    algorithm.adv_estimator=grpo
    actor_rollout_ref.rollout.n=K           # replay: one row holds a group of K games (convert_summary.json)
    trainer.v1.trainer_mode=replay          # replay, with the module that registers it in verl's processes:
    +ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES=selfplay_gen.verl.replay_trainer
    actor_rollout_ref.rollout.n=8           # online: n games per (instance, seat) row form a group
    +selfplay.max_moves=30 +selfplay.max_invalid=3 +selfplay.max_new_tokens=512   # online, optional

`data.return_raw_chat` is not needed: verl's dataset always hands `raw_prompt` to agent loops.
This module imports nothing from verl, so the path helper works in any environment.
"""

from __future__ import annotations

from pathlib import Path

AGENT_LOOPS_YAML = Path(__file__).with_name("agent_loops.yaml")
REPLAY_AGENT, ONLINE_AGENT = "selfplay_replay", "selfplay_online"
# verl's V1 trainer mode of replayed games, and the module that registers it in verl's processes
REPLAY_MODE, REPLAY_TRAINER = "replay", "selfplay_gen.verl.replay_trainer"
# the same for games played online, whose trainer logs each step's game measures as STEP_MEASURES/<measure>/mean
ONLINE_MODE, ONLINE_TRAINER, STEP_MEASURES = "selfplay_online", "selfplay_gen.verl.online_trainer", "games"


def data_source(game: str) -> str:
    """verl's `data_source` column of a game's rows, offline (`selfplay-convert`) and online alike."""
    return f"selfplay_{game}"


def config_path() -> str:
    """The installed registration file, for `actor_rollout_ref.rollout.agent.agent_loop_config_path`."""
    return str(AGENT_LOOPS_YAML)
