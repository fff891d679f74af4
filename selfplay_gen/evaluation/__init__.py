"""Evaluation of self-play models: metrics with bootstrap intervals over instances beside the
random-matching floor, grounding of the table values players state, cross-play, Bradley–Terry
ratings, and a report directory (`selfplay-gen eval`)."""
