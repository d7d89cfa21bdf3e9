"""NNTP: the sans-IO protocol core (protocol.py, replies.py), the trio client
(client.py), their errors (errors.py), and a private INN2 for tests (newsd.py)."""
