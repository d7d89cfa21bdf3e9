"""`uidx coordinator`: orchestration of the coordinator's parts.

    stores.py   the stores the node API works with, opened on one pool
    stream.py   a leased range's spool chunks as frames, with keepalives
    server.py   the node API on hypercorn's trio worker (`serve`)
    daemon.py   the database, migrations, pool and signals around `serve`

The HTTP side itself (routing, auth, bodies) is `usenet_indexer.coordinator.http.node`.
"""
