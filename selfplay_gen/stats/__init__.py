"""The statistics every game's evaluation is built from, knowing no game and no command: bootstrap
intervals over instances and paired differences (`metrics`), Bradley–Terry ratings (`ratings`), and
report cells, markdown tables, plots and run-level report rows (`report`). Games, the league and the
`eval` command import it; it imports none of them."""
