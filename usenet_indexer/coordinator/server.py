"""The coordinator's HTTP server: hypercorn's trio worker serving one `asgi.App`.

The App is where the coordinator's APIs are mounted, each with who may
call it (`coordinator_app`: the one table of routes and their access
levels); this module only builds it, binds (or takes the supervisor's
socket, for several coordinator processes on one port), and says where
edges connect.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from urllib.parse import urlsplit

import attrs
import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_builder import CatalogDue
from usenet_indexer.coordinator.http.access import StoreGate
from usenet_indexer.coordinator.http.asgi import (
    Access,
    ApiCounts,
    App,
    Denied,
    Exchange,
    Response,
    Route,
)
from usenet_indexer.coordinator.http.login import LOGIN_PATH, LOGOUT_PATH, LoginApi, refused_page
from usenet_indexer.coordinator.http.newznab import PATH as NEWZNAB_PATH
from usenet_indexer.coordinator.http.newznab import NewznabApi, NewznabOptions, is_public
from usenet_indexer.coordinator.http.node import PREFIX, ApiOptions, NodeApi
from usenet_indexer.coordinator.http.node import refused as node_refused
from usenet_indexer.coordinator.http.status_page import HealthApi, MetricsApi, StatusPage
from usenet_indexer.coordinator.landings import Landings, listen_for_landings
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.errors import ConfigError, sole_error
from usenet_indexer.store.status import StatusStore

logger = logging.getLogger(__name__)

# Request heads of the node API are a request line and a few short headers;
# h11 refuses a head that grows past this before it ends.
MAX_HEAD_BYTES = 16 * 1024

# On shutdown, requests in flight get this long to finish (a batch being
# stored finishes anyway: its worker thread is not cancelled); streams are
# then cut, and their edges resume from the last stored batch.
GRACEFUL_SECONDS = 10.0
# A stopping server that has answered every request, and been given none more
# for this long, ends its connections at once (`_end_once_answered`).
ANSWERED_SECONDS = 0.25


def hypercorn_config(listen: str, options: ApiOptions) -> Config:
    """The hypercorn configuration of the node API.

    Args:
        listen: host:port to bind (port 0: any free port).
        options: the idle timeout.

    Returns:
        The configuration: plain HTTP, no access log (the app logs what
        matters, and never a header).
    """
    config = Config()
    config.bind = [listen]
    # Not hypercorn's read timeout: it times every read of the socket, also
    # while a response is sent, so it would cut every stream (and every slow
    # batch store) whose client rightly sends nothing for that long. A slow
    # head is cut by the keep-alive timeout (a connection is idle until its
    # request head is complete), a slow body by the app (408).
    config.read_timeout = None
    config.keep_alive_timeout = options.idle_timeout_seconds
    config.h11_max_incomplete_size = MAX_HEAD_BYTES
    config.graceful_timeout = GRACEFUL_SECONDS
    config.include_server_header = False
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    return config


async def serve(
    settings: Settings,
    stores: Stores,
    *,
    options: ApiOptions | None = None,
    shutdown: trio.Event | None = None,
    landings: Landings | None = None,
    catalog_due: CatalogDue | None = None,
    listen_fd: int | None = None,
    metrics_fd: int | None = None,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the node API on `settings.listen` until cancelled or `shutdown` is set.

    Args:
        settings: where to listen, body caps, lease TTL, home (for the spool).
        stores: the open stores.
        options: the API's options; None for `ApiOptions.from_settings(settings)`.
        shutdown: set it to stop accepting and finish requests in flight
            (for at most GRACEFUL_SECONDS); without it, cancel the task.
        landings: where the spool's landings are counted (None: a new one).
        catalog_due: poked when keys are marked pending (a batch stored through any
            coordinator process, a probe's outcome); None: a new one that no builder
            takes, only the edges' held build asks wait on it.
        listen_fd: a listening socket to accept on (shared by several coordinator
            processes) instead of binding `settings.listen`.
        metrics_fd: the same for `settings.metrics_listen`.
        task_status: gets the bound (host, port) once the socket listens.

    Raises:
        ConfigError: `settings.listen` or `settings.metrics_listen` cannot be
            bound (inside the nursery's exception group; see `sole_error`).
    """
    options = options or ApiOptions.from_settings(settings)
    if catalog_due is None:
        # Nobody builds: a batch's answer never waits for a build.
        options = attrs.evolve(options, catalog_max_lag_seconds=0.0)
    landings = landings or Landings()
    # Poked by keys marked pending in any process, builder or not: the edges' held
    # build asks wait on it too.
    due = CatalogDue() if catalog_due is None else catalog_due
    landings.on_pending.append(due.due)
    node = NodeApi(stores, options, landings, due)
    app = coordinator_app(
        stores,
        node,
        metrics_token=settings.metrics_token,
        newznab=NewznabOptions.from_settings(settings),
        offer_broken=settings.offer_broken_releases,
    )
    config = hypercorn_config(
        settings.listen if listen_fd is None else f"fd://{listen_fd}", options
    )
    trigger = partial(_stopping, shutdown, node) if shutdown is not None else None
    serving = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        # Streams wake when a chunk lands; the listener ends with the server.
        await nursery.start(listen_for_landings, stores.spool.pool.conninfo, landings)
        with _bind_errors("listen", settings.listen):
            binds: list[str] = await nursery.start(
                partial(_serve_then_cancel, app, config, trigger, serving, nursery.cancel_scope)
            )
        if shutdown is not None:
            nursery.start_soon(_end_once_answered, shutdown, app, serving)
        if settings.metrics_listen:
            where = settings.metrics_listen if metrics_fd is None else f"fd://{metrics_fd}"
            # Its own server: ended by the same shutdown, it never ends the main one's
            # graceful drain (nor the landings' listener): the main server does that.
            metrics = partial(
                hypercorn_serve,
                metrics_app(app),
                hypercorn_config(where, options),
                shutdown_trigger=shutdown.wait if shutdown is not None else None,
            )
            with _bind_errors("metrics_listen", settings.metrics_listen):
                metrics_binds: list[str] = await nursery.start(metrics)
            logger.info("metrics listening on %s/metrics", metrics_binds[0])
        logger.info("node API listening on %s%s", binds[0], PREFIX)
        host, port = bound_address(binds[0])
        logger.info("%s", edges_connect_with(host, port, socket.gethostname()))
        task_status.started((host, port))


@contextlib.contextmanager
def _bind_errors(key: str, listen: str) -> Iterator[None]:
    """A failed bind as the ConfigError of the setting `key`."""
    try:
        yield
    except BaseExceptionGroup as group:
        error = sole_error(group)
        if not isinstance(error, OSError):
            raise
        # Address in use, no such address, no permission: the setting is wrong.
        problem = f"cannot listen on {listen}: {error.strerror or error}"
        raise ConfigError(key, problem) from group


async def _stopping(shutdown: trio.Event, node: NodeApi) -> None:
    # Hypercorn's shutdown trigger: lease calls that wait for work end first.
    await shutdown.wait()
    node.stop_waiting()


def coordinator_app(
    stores: Stores,
    node: NodeApi,
    *,
    metrics_token: str = "",
    newznab: NewznabOptions | None = None,
    offer_broken: bool = False,
) -> App:
    """The ASGI app of the coordinator: its routes, each with who may call it.

    Args:
        stores: the open stores.
        node: the node API (its options give the App its body timeout and Retry-After).
        metrics_token: the bearer token of /metrics (empty: /metrics is closed).
        newznab: the newznab API's options (public URL, trusted proxies, daily
            limits); None: the defaults (the request's own URL, no limits).
        offer_broken: the newznab API lists broken releases too (offer_broken_releases).

    Returns:
        The App hypercorn serves.
    """
    options = node.options
    newznab = newznab or NewznabOptions()
    counts = ApiCounts()
    api = NewznabApi(
        stores.catalog,
        stores.users,
        stores.build,
        counts,
        options=newznab,
        offer_broken=offer_broken,
    )
    status = StatusStore(stores.catalog.pool)
    login = LoginApi(stores.users, newznab.origin.public_url)
    return App(
        {PREFIX: Route(node, Access.NODE, refusal=node_refused)},
        gate=StoreGate(stores.nodes, stores.users, metrics_token),
        body_timeout_seconds=options.body_timeout_seconds,
        retry_after_seconds=options.retry_after_seconds,
        paths={
            # t=caps is anyone's; every other call needs an API user's key.
            NEWZNAB_PATH: Route(api, Access.API_USER, is_public, api.refused),
            # An API user sees the search and NZB links, an operator all of it.
            "/": Route(
                StatusPage(status, stores.catalog, api.daily, offer_broken=offer_broken),
                Access.API_USER,
                refusal=refused_page,
            ),
            LOGIN_PATH: Route(login, Access.PUBLIC, guarded=True),
            LOGOUT_PATH: Route(login, Access.PUBLIC),
            "/healthz": Route(HealthApi(status), Access.PUBLIC),
            "/metrics": Route(
                MetricsApi.of(status, stores.catalog, counts),
                Access.METRICS,
                refusal=_metrics_refused,
            ),
        },
        origin=newznab.origin,
    )


def metrics_app(app: App) -> App:
    """The App of `metrics_listen`: /metrics (and /healthz) of `app`, nothing else, public.

    Whoever reaches that address may scrape: it is meant for a Prometheus on the
    same host (127.0.0.1:9750) or a private network, so it asks no token.
    """
    return App(
        {},
        gate=app.gate,
        body_timeout_seconds=app.body_timeout_seconds,
        retry_after_seconds=app.retry_after_seconds,
        paths={
            "/metrics": Route(app.paths["/metrics"].api, Access.PUBLIC),
            "/healthz": app.paths["/healthz"],
        },
    )


def _metrics_refused(exchange: Exchange, denied: Denied) -> Response:
    # Without a metrics_token, /metrics is not there at all.
    if denied is Denied.CLOSED:
        return Response.error(404, f"no such call: {exchange.path}")
    return Response.error(
        401,
        "a bearer token is required (metrics_token)",
        headers=((b"www-authenticate", b"Bearer"),),
    )


async def _serve_then_cancel(
    app: App,
    config: Config,
    trigger: Callable[[], Awaitable[None]] | None,
    serving: trio.CancelScope,
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    # Hypercorn returns after a graceful shutdown (or `serving` is cancelled once every
    # request is answered): the listener goes with it.
    with serving:
        await hypercorn_serve(app, config, shutdown_trigger=trigger, task_status=task_status)
    scope.cancel()


async def _end_once_answered(shutdown: trio.Event, app: App, serving: trio.CancelScope) -> None:
    """Cancel `serving` once the server stops and every request is answered.

    Hypercorn's graceful drain lasts until every connection has closed (at most
    GRACEFUL_SECONDS); it closes idle keep-alive connections at once. But hypercorn
    0.18 never closes one on which the edge's next request (its release of a range
    whose stream ended at the stop) came in before the previous request's cycle
    ended: its reader waits for a next cycle that a stopping server never starts
    (h11's PAUSED). With edges streaming, the stop took the whole GRACEFUL_SECONDS.
    Once no request is being answered, and none is being answered again after
    ANSWERED_SECONDS, nothing is left to drain (such a request is never read
    anyway; one that came and was answered within those seconds is not noticed).
    """
    await shutdown.wait()
    while True:
        await app.wait_answered()
        await trio.sleep(ANSWERED_SECONDS)
        if not app.answering:
            break
    logger.debug("every request answered: the server's connections end")
    serving.cancel()


def edges_connect_with(host: str, port: int, hostname: str) -> str:
    """The log line that tells the operator which COORDINATOR_URL edges must use.

    Args:
        host: the address the node API is bound to (without brackets).
        port: its port.
        hostname: this machine's name (for a bind to every interface).

    Returns:
        "edges connect with COORDINATOR_URL=http://...:port", with where
        that URL works from: a loopback bind only from this machine.
    """
    if host in ("0.0.0.0", "::"):
        return (
            f"edges connect with COORDINATOR_URL=http://{hostname}:{port} "
            f"(listening on every interface: any address of {hostname} works)"
        )
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        loopback = False
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    if loopback:
        return (
            f"edges connect with COORDINATOR_URL={url}, only from this machine "
            f"(UIDX_LISTEN=0.0.0.0:{port} listens on every interface)"
        )
    return f"edges connect with COORDINATOR_URL={url}"


def bound_address(bind: str) -> tuple[str, int]:
    """The (host, port) of one of hypercorn's binds ("http://127.0.0.1:8750").

    Args:
        bind: a URL hypercorn reports once it listens.

    Returns:
        The host (without brackets) and the port.
    """
    parts = urlsplit(bind)
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"hypercorn reported an odd bind: {bind!r}")
    return parts.hostname, parts.port
