"""The learning loop: a rating campaign whose labels train a model, run in rounds.

    services.py   loop_create, loop_update, round_start (one open round per loop), maybe_auto_round, sweep_stale
    rounds.py     run_round: aggregate, train, compare on the hold-out, activate if better, re-score, re-prioritise
    holdout.py    the hold-out: gold items or a fixed random share spread through the queue
    samplers.py   random, uncertainty (margin), hybrid (the default)
    rescore.py    scores and priorities of the open tasks; the source curation run's scores
    random_arm.py what random sampling gives on the same pool (the learning curve's comparison)
    charts.py     the learning curve as SVG
"""
