"""Sweeps and searches over a scenario's fields: many cases at once, on Ray or a local process pool.

`cases` (the combinations, validated before anything runs), `worker` (one case in a worker process),
`backends` (Ray, or the local pool), `store` (the sweep's folder, the table), `run` (a sweep end to end),
`optimize` (a search instead of every combination).
"""
