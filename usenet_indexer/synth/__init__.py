"""Synthetic overview data with ground truth (`uidx generate`), and its scorer."""
