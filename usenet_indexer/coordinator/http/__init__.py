"""The coordinator's HTTP side: the ASGI app and its APIs, one module each."""
