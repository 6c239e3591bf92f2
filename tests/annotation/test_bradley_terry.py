"""annotation/bradley_terry.py: Bradley-Terry strengths by Hunter's MM algorithm, numpy only.

The sets are comparisons as the platform derives them: two captions of one photo that one rater
rated differently (best_caption.comparisons), or two candidates rated together."""
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from annotation import bradley_terry as bt

ROOT = Path(__file__).resolve().parents[2]

# Five captions of one photo, rated by six raters; c0 is the careful one, c4 the careless one.
PLANTED = {"c0": 4.0, "c1": 2.0, "c2": 1.5, "c3": 1.0, "c4": 0.5}


def planted(seed: int, n: int) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed)
    names = list(PLANTED)
    rows = []
    for _ in range(n):
        a, b = rng.choice(len(names), 2, replace=False)
        left, right = names[a], names[b]
        rows.append((left, right, left if rng.random() < PLANTED[left] / (PLANTED[left] + PLANTED[right]) else right))
    return rows


def expected_wins(rows, strengths, item):
    return sum(strengths[item] / (strengths[a] + strengths[b]) for a, b, _w in rows if item in (a, b))


def test_the_estimate_is_the_maximum_likelihood_one():
    rows = planted(7, 120)
    fitted = bt.fit(rows, prior=0.0)
    assert math.isclose(sum(fitted.values()), 1.0)
    for item in PLANTED:  # the likelihood's stationary point: observed wins = expected wins
        assert expected_wins(rows, fitted, item) == pytest.approx(sum(1 for *_, w in rows if w == item), abs=1e-6)
    best = bt.log_likelihood(rows, fitted)
    for factor in (0.9, 1.1):  # any other strengths fit worse
        moved = {**fitted, "c2": fitted["c2"] * factor}
        assert bt.log_likelihood(rows, moved) < best
    assert max(fitted, key=fitted.get) == "c0" and min(fitted, key=fitted.get) == "c4"


def test_it_fits_at_least_as_well_as_crowd_kit_which_stops_after_two_steps():
    pd = pytest.importorskip("pandas")
    from crowdkit.aggregation import BradleyTerry

    rows = planted(26, 40)
    frame = pd.DataFrame([(0, *r) for r in rows], columns=["worker", "left", "right", "label"])
    two = BradleyTerry(n_iter=2).fit(frame).scores_.to_dict()
    hundred = BradleyTerry(n_iter=100).fit(frame).scores_.to_dict()
    assert two == pytest.approx(hundred, abs=1e-12)  # its loop ends after the second step
    ours = bt.fit(rows, prior=0.0)
    assert bt.log_likelihood(rows, ours) > bt.log_likelihood(rows, hundred) + 1e-3
    assert (max(ours, key=ours.get), max(hundred, key=hundred.get)) == ("c1", "c0")  # here they disagree


def test_an_unbeaten_caption_stays_finite_and_separate_photos_stay_unlinked():
    rows = [("a", "b", "a"), ("a", "b", "a"), ("a", "c", "a"), ("b", "c", "b"),  # photo 1: a never loses
            ("x", "y", "y"), ("y", "x", "x")]  # photo 2: one win each
    fitted = bt.fit(rows)
    assert all(math.isfinite(v) and v > 0 for v in fitted.values())
    assert fitted["a"] > fitted["b"] > fitted["c"]
    assert fitted["a"] + fitted["b"] + fitted["c"] == pytest.approx(1.0)
    assert fitted["x"] == pytest.approx(0.5) and fitted["y"] == pytest.approx(0.5)
    assert bt.fit([]) == {} and bt.fit([("a", "a", "a")]) == {}


def test_a_winner_that_is_neither_item_is_refused():
    with pytest.raises(ValueError, match="neither"):
        bt.fit([("a", "b", "c")])


def test_twenty_thousand_captions_rank_in_seconds_on_pairs_not_a_matrix():
    rng = np.random.default_rng(3)
    left, right = rng.integers(0, 20000, 100000), rng.integers(0, 20000, 100000)
    rows = [(int(a), int(b), int(a) if rng.random() < 0.5 else int(b)) for a, b in zip(left, right)]
    fitted = bt.fit(rows, max_iter=200)
    assert len(fitted) > 19000 and all(v > 0 for v in fitted.values())


def test_the_best_caption_page_ranks_without_crowd_kit_pandas_or_scipy():
    script = """
import sys
from annotation.best_caption import bradley_terry_strengths
print(sorted(bradley_terry_strengths([(1, 10, 11, 10), (2, 10, 11, 10), (1, 11, 12, 11), (2, 10, 12, 12)]).items())[0][0],
      sorted(m for m in ("crowdkit", "pandas", "scipy", "sklearn") if m in sys.modules))
"""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "config.settings"}
    code = "import django; django.setup()\n" + script
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, "DATABASE_URL": "sqlite:///:memory:"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "10 []"
