"""sd_notify: tell systemd (Type=notify) that the daemon is ready or stopping.

systemd passes the path of a unix datagram socket in $NOTIFY_SOCKET; the
caller reads it with the other settings (config.py is the one reader of the
environment) and hands it in. A path that starts with "@" names a socket in
the abstract namespace. Without a path there is nobody to tell, and nothing
is sent. The protocol is one datagram of `KEY=VALUE` lines (sd_notify(3)).
"""

from __future__ import annotations

import logging
import socket

logger = logging.getLogger(__name__)

READY = "READY=1"
STOPPING = "STOPPING=1"


def sd_notify(socket_path: str | None, message: str) -> bool:
    """Send one notification to systemd.

    Args:
        socket_path: the value of $NOTIFY_SOCKET; empty or None when not
            running under systemd.
        message: newline-separated `KEY=VALUE` lines, e.g. "READY=1".

    Returns:
        True if the datagram was sent; False without a socket, or when it
        could not be sent (logged: a daemon does not stop over it).
    """
    if not socket_path:
        return False
    address = "\0" + socket_path[1:] if socket_path.startswith("@") else socket_path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(message.encode(), address)
    except OSError as error:
        logger.warning("sd_notify %r to %s failed: %s", message, socket_path, error)
        return False
    return True
