"""Where the site is, as its users reach it: the start of every absolute URL uidx writes
(a feed's links, guids and enclosures; the X-DNZB headers of an NZB).

Three sources, the first that applies:

1. `public_url` (`UIDX_PUBLIC_URL`), when the operator set it: the one answer,
   whatever a request says.
2. `X-Forwarded-Proto` and `X-Forwarded-Host`, only when the request came
   straight from an address of `trusted_proxies` (a TLS proxy in front): the
   proxy says how the client reached it. From anyone else they are ignored,
   since a client could otherwise make the feed it is sent point elsewhere.
   A proxy that appends to them (a chain) puts the client's first: the first
   value is taken.
3. The request itself: its scheme and its Host header.

A Host or X-Forwarded-Host that is no host name or address (with an optional
port) is not written into a URL: the request's Host is then used, and
without a usable one, "localhost".

Who a request comes from (`client`: what failed key attempts are counted
against) is its peer's address, but behind a trusted proxy the client the
proxy names in X-Forwarded-For: the last address there that is not itself a
trusted proxy (a client may write any addresses before the ones its proxies
append; those after are the proxies' own). Without one, the proxy's.

No I/O: the adapter passes the request's parts in.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

import attrs

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# A host name (letters, digits, dots, hyphens, underscores) or a bracketed IPv6
# address, with an optional port: nothing that could end the authority of a URL.
_HOST = re.compile(r"^(?:[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?$")
_SCHEMES = ("http", "https")


@attrs.frozen
class Origin:
    """How the site's absolute URLs start (see the module docstring).

    Attributes:
        public_url: the operator's public URL, checked (empty: none).
        trusted: the networks whose requests' X-Forwarded-* headers are believed.
    """

    public_url: str = ""
    trusted: tuple[Network, ...] = ()

    @classmethod
    def of(cls, public_url: str, trusted_proxies: Sequence[str]) -> Origin:
        """The origin of the settings' values (config.py checked them: a mistake there
        names its key).

        Raises:
            ValueError: a trusted proxy that is no address or network.
        """
        networks = tuple(ipaddress.ip_network(p, strict=False) for p in trusted_proxies)
        return cls(public_url.rstrip("/"), networks)

    def base_url(
        self,
        *,
        scheme: str,
        host: str | None,
        peer: str,
        forwarded_proto: str | None = None,
        forwarded_host: str | None = None,
    ) -> str:
        """The site's root URL for one request ("https://indexer.example.org"), no "/" at
        the end.

        Args:
            scheme: the request's scheme as the server received it.
            host: its Host header (None: absent).
            peer: the address the request came from (the proxy's, behind one).
            forwarded_proto, forwarded_host: its X-Forwarded-* headers (None: absent).
        """
        if self.public_url:
            return self.public_url
        if self.trusts(peer):
            proto = _first(forwarded_proto)
            if proto is not None and proto.lower() in _SCHEMES:
                scheme = proto.lower()
            forwarded = _first(forwarded_host)
            if forwarded is not None and _HOST.match(forwarded):
                host = forwarded
        chosen = _first(host)
        if chosen is None or not _HOST.match(chosen):
            chosen = "localhost"
        return f"{scheme if scheme in _SCHEMES else 'http'}://{chosen}"

    def client(self, peer: str, forwarded_for: str | None) -> str:
        """Who sent a request: `peer`, or behind a trusted proxy the client its
        X-Forwarded-For names (see the module's docstring)."""
        if forwarded_for is None or not self.trusts(peer):
            return peer
        for value in reversed(forwarded_for.split(",")):
            candidate = _address(value.strip())
            if candidate is None:
                return peer  # not an address: the header is no proxy's
            if not self.trusts(candidate):
                return candidate
        return peer

    def trusts(self, peer: str) -> bool:
        """Whether `peer` is one of the trusted proxies."""
        if not self.trusted:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:  # a Unix socket's peer, or none
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.trusted)


def _address(value: str) -> str | None:
    """An X-Forwarded-For entry's address, without the port some proxies add
    (`203.0.113.5:4711`, `[2001:db8::1]:4711`); None when it is no address."""
    if value.startswith("[") and "]" in value:
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:
        value = value.split(":", 1)[0]
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def _first(value: str | None) -> str | None:
    """The first of a header's comma-separated values, stripped (None: none)."""
    if value is None:
        return None
    first = value.split(",", 1)[0].strip()
    return first or None
