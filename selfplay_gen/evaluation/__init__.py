"""Evaluation of self-play models (`selfplay-gen eval`): playing self-play and cross-play games,
and what every game's evaluation shares (bootstrap intervals over instances, paired differences,
wording measures, Bradley–Terry ratings, report tables and plots). Each game's own metrics and
report live in its package (`Game.evaluation`, found through `protocol`)."""
