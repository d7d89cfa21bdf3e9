"""uidx: a distributed usenet binary indexer."""

__version__ = "0.1.0"
