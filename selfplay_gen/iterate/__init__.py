"""The self-play loop in Python (`selfplay-gen iterate`): typed settings with one set of defaults
(config), the decisions a run makes (decisions), SGLang servers as context managers (server), the
command lines of games and evaluations (plays) and of verl (verl_jobs), trainers by name (trainers),
the stages on disk (stages), the loop that runs them (loop), the league inside a run (competition)
and the run report (report). The run_selfplay_*.sh scripts call its commands."""
