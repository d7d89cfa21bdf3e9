"""The faults-and-abuse harness that scripts/chaos runs; outside the installed package."""
