"""dbtier from Python: run a workload or compare layouts with the command line's arguments, and read
any run directory as pandas DataFrames.

    import dbtier
    result = dbtier.run("random-index", device="hdd=hdd-sata-7200", rows=2000)
    result.devices[["device", "r/s", "r_await", "%util"]]
    dbtier.load("results/random-index-20261125-120000").wait_events
"""

from dbtier.api.calls import advise, compare, predict, run
from dbtier.api.results import Result, load

__all__ = ["Result", "advise", "compare", "load", "predict", "run"]
