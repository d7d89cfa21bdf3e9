"""`uidx coordinator`: orchestration of the coordinator's parts.

stores.py     the stores the node API works with, opened on one pool
stream.py     a leased range's spool chunks as frames, with keepalives
landings.py   LISTEN for spool chunks landed: wakes waiting streams
server.py     the HTTP App on hypercorn's trio worker (`serve`)
daemon.py     the database, migrations, pool and signals around `serve`
http/         the HTTP side: asgi.py (what every API shares: the App that
              dispatches by path prefix, responses, body caps, errors to
              4xx/5xx) and one module per API (node.py: /api/v1/node/)
"""
