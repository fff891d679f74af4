"""The `selfplay-gen eval` command, above the games: playing self-play and cross-play games on the
development, test or human instances (`splits`), finding each game's own evaluation through
`protocol` (`Game.evaluation`, in the game's package; `generic` for a game that brings none), and
`selfplay-gen retention`. The statistics those evaluations share are `selfplay_gen.stats`."""
