"""dbtier: will faster storage help this database, by how much, and where should it go?"""

from dbtier.version import __version__

__all__ = ["Experiment", "Result", "UserError", "WorkloadError", "advise", "compare", "load", "predict", "run",
           "__version__"]


def __getattr__(name: str):
    """The Python API (dbtier.api), loaded on first use: the command line does not pay for pandas."""
    if name in ("Result", "advise", "compare", "load", "predict", "run"):
        from dbtier import api

        return getattr(api, name)
    if name == "Experiment":
        from dbtier.experiments.experiment import Experiment

        return Experiment
    if name == "UserError":
        from dbtier.errors import UserError

        return UserError
    if name == "WorkloadError":
        from dbtier.workloads.base import WorkloadError

        return WorkloadError
    raise AttributeError(f"module 'dbtier' has no attribute {name!r}")
