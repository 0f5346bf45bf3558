"""How far a prediction may be from the run it predicts: the predictor's error as measured by the
benches (measured_error.json: predictions of other layouts than the recorded one, each then run live).

A figure predicted as v would, live, have been v / (1 + e) for each measured error e (e = predicted /
live - 1); the range of those values is the interval shown beside a prediction, and the share of them
that misses a target is the risk that the target is missed. Errors are taken from cases of the same
figure (elapsed, tpm, p99) when the benches measured enough of them, else from every case, and say so."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

import numpy as np

#: cases of one figure needed to use them alone; fewer, and every case is used
SAME_FIGURE_MIN = 10
#: the interval: this share of the measured errors' outcomes each side left out
TAIL = 0.05


@dataclass(frozen=True)
class ErrorModel:
    errors: np.ndarray      # predicted / live - 1, one per measured case
    figure: str             # the figure they were measured on ("all" when every figure's are pooled)
    about: str              # where they come from, in words

    @property
    def cases(self) -> int:
        return len(self.errors)

    def outcomes(self, value: float) -> np.ndarray:
        """The live figures a prediction of `value` stood for, one per measured error."""
        return value / (1.0 + self.errors)

    def interval(self, value: float) -> tuple[float, float]:
        live = self.outcomes(value)
        return float(np.quantile(live, TAIL)), float(np.quantile(live, 1 - TAIL))

    def misses(self, value: float, met) -> int:
        """How many of the measured errors would have left a prediction of `value` short of the target
        (`met`: the target's test of one figure)."""
        return int(sum(1 for v in self.outcomes(value) if not met(float(v))))


def _cases() -> tuple[list[dict], dict]:
    doc = json.loads(resources.files("dbtier.prediction").joinpath("measured_error.json").read_text())
    return doc["cases"], doc["sources"]


def for_figure(figure: str) -> ErrorModel:
    """The measured errors a prediction of `figure` (elapsed, tps, tpm, p99) is judged by."""
    cases, sources = _cases()
    kind = "tpm" if figure == "tps" else figure  # a rate per second errs as the same rate per minute
    same = [c for c in cases if c["figure"] == kind]
    chosen = same if len(same) >= SAME_FIGURE_MIN else cases
    errors = np.array([c["predicted"] / c["live"] - 1 for c in chosen])
    benches = sorted({sources[c["source"]]["bench"] + " at " + sources[c["source"]]["commit"] for c in chosen})
    what = (f"{len(chosen)} predictions of {kind} measured live" if chosen is same
            else f"{len(chosen)} predictions measured live (elapsed and tpm; {len(same)} of {kind}, too few alone)")
    return ErrorModel(errors, kind if chosen is same else "all", f"{what}, by {', '.join(benches)}")
