"""The predictor's measured error, as advise uses it: the live figures a prediction stood for, their
range, and how many of them miss a target."""

import numpy as np
import pytest

from dbtier.prediction import error


def test_outcomes_interval_and_misses():
    model = error.ErrorModel(np.array([-0.10, 0.0, 0.0, 0.25]), "elapsed", "four cases")
    assert list(model.outcomes(10.0)) == pytest.approx([10 / 0.9, 10.0, 10.0, 8.0])
    lo, hi = model.interval(10.0)
    assert 8.0 < lo < 10.0 < hi < 10 / 0.9
    # a predicted elapsed of 10 s against 10.5 s: missed only where the prediction was 10% too fast
    assert model.misses(10.0, lambda v: v <= 10.5) == 1
    assert model.misses(10.0, lambda v: v <= 12.0) == 0


def test_the_shipped_errors_by_figure():
    """Elapsed has cases enough of its own; p99 has none measured, so every case is used, and said."""
    elapsed = error.for_figure("elapsed")
    assert elapsed.figure == "elapsed" and elapsed.cases >= error.SAME_FIGURE_MIN
    assert "bench/predict_accuracy.py" in elapsed.about
    pooled = error.for_figure("p99")
    assert pooled.figure == "all" and pooled.cases > elapsed.cases and "too few alone" in pooled.about
    assert error.for_figure("tps").about == error.for_figure("tpm").about
    # every error is a prediction against a live run, both positive
    assert np.all(np.isfinite(pooled.errors)) and np.all(pooled.errors > -1)
