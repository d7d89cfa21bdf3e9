"""What can go wrong when talking NNTP.

    UidxError
    └── ProtocolError
    │   ├── LocalProtocolError          we were about to send something invalid
    │   └── RemoteProtocolError         the server broke RFC 3977
    │       ├── LineTooLong             a line over the cap (names the cap)
    │       ├── MalformedResponse       a status line or reply text we cannot read
    │       ├── IncompleteResponse      the server closed in the middle of a reply
    │       └── CompressionError        compressed data that does not inflate (`.scheme`)
    └── NNTPError                       raised by the client (server in `.server`)
        ├── ConnectionLost              the connection broke (dropped, reset, EOF)
        ├── Timeout                     a command made no progress in time
        └── ReplyError                  a reply the command does not allow (`.code`)
            ├── AuthRequired            480, or AUTHINFO refused (481/482 to AUTHINFO)
            ├── Unavailable             400 / 502 (to AUTHINFO too): too many connections, or closing
            ├── NoSuchGroup             411
            └── NoSuchArticle           430 (and 423 for a single article)

The protocol core (protocol.py) raises only the ProtocolError branch; the
client (client.py) raises both: a peer mistake stays a RemoteProtocolError.
"""

from __future__ import annotations

from usenet_indexer.errors import LocalProtocolError, RemoteProtocolError, UidxError

__all__ = [
    "AuthRequired",
    "CompressionError",
    "ConnectionLost",
    "IncompleteResponse",
    "LineTooLong",
    "LocalProtocolError",
    "MalformedResponse",
    "NNTPError",
    "NoSuchArticle",
    "NoSuchGroup",
    "RemoteProtocolError",
    "ReplyError",
    "Timeout",
    "Unavailable",
]


class LineTooLong(RemoteProtocolError):
    """The server sent a line longer than the cap; the message names the cap."""

    def __init__(self, max_line_bytes: int) -> None:
        super().__init__(f"the server sent a line longer than {max_line_bytes} bytes")
        self.max_line_bytes = max_line_bytes


class MalformedResponse(RemoteProtocolError):
    """A status line (or the text of a reply we parse) is not what RFC 3977 says."""


class IncompleteResponse(RemoteProtocolError):
    """The server closed the connection before a reply was complete."""


class CompressionError(RemoteProtocolError):
    """Compressed data that does not inflate, or whose framing we cannot follow.

    `scheme` says whose: "DEFLATE" (RFC 8054), "GZIP" (XFEATURE COMPRESS GZIP)
    or "XZVER"; the client reopens the connection without it.
    """

    def __init__(self, message: str, *, scheme: str = "DEFLATE") -> None:
        super().__init__(message)
        self.scheme = scheme


class NNTPError(UidxError):
    """A command failed; `server` says which server ("host:port")."""

    def __init__(self, message: str, *, server: str = "") -> None:
        super().__init__(f"{server}: {message}" if server else message)
        self.server = server


class ConnectionLost(NNTPError):
    """The connection broke (closed, reset, TLS failure); nothing of the reply is kept."""


class Timeout(NNTPError):
    """The server sent nothing for the command's timeout."""


class ReplyError(NNTPError):
    """The server answered with a code the command does not allow."""

    def __init__(self, code: int, text: str, *, command: str = "", server: str = "") -> None:
        what = f"{command}: " if command else ""
        super().__init__(f"{what}{code} {text}", server=server)
        self.code = code
        self.text = text
        self.command = command


class AuthRequired(ReplyError):
    """480 (authenticate first), or the server refused our AUTHINFO."""


class Unavailable(ReplyError):
    """400 or 502: too many connections, or the service is going away."""


class NoSuchGroup(ReplyError):
    """411: the server does not carry the group."""


class NoSuchArticle(ReplyError):
    """430 (no article with that message-id) or 423 (no article with that number)."""
