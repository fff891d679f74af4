"""Evaluation of self-play models: metrics with bootstrap intervals over instances, cross-play,
Bradley–Terry ratings, and a report directory (`selfplay-gen eval`)."""
