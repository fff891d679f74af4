"""`selfplay-gen view`: a local web app to watch recorded games and to play a seat yourself.

The page is plain HTML, JS and CSS (`static/`), served by aiohttp beside a small JSON API
(`app.py`: `make_app(path, play_opts)`). What it shows comes from what a run already writes:
games files read through the checked record reader (`library.py`), each game turned into what
both seats saw (`replay.py`), and run reports rendered from their own `report.md` and
`metrics.json`. People play through the same runner and records as models do (`play.py`), so
their games are evaluated like any others. Nothing is imported here, so that `selfplay-gen
--help` does not load the web server.
"""
