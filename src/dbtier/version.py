"""dbtier's version, in a module of its own: the command line reads it without the package's API."""

__version__ = "0.1.0"
