"""The one error hierarchy of uidx: every exception class it defines is below UidxError.

    UidxError
    ├── ConfigError              a setting is missing or wrong (names the key)
    ├── InputError               an input cannot be read (a dump, an NZB, a truth file)
    ├── OutputError              an output file or folder cannot be written (names the path)
    ├── DatabaseError            PostgreSQL cannot be run, reached or migrated
    ├── SchemaMismatch           store/migrate: another (newer) uidx migrated the database (exit 78)
    ├── SpoolStoreError          spool/s3: the object store refused a chunk or cannot be reached
    ├── ProtocolError            a peer or a wire format broke the rules
    │   ├── LocalProtocolError   we were about to break them (our bug)
    │   └── RemoteProtocolError  the peer (or the bytes it sent) broke them
    │       ├── InflateFailed        wire/inflate: corrupt, over its cap, truncated
    │       ├── FrameError           wire/frames: a spool stream frame
    │       ├── BadFragment          wire/fragments: a packed release chunk
    │       ├── BatchWireError       wire/batchwire: a batch body (its http_status)
    │       │   ├── BodyTooLarge         413
    │       │   ├── UnsupportedEncoding  415
    │       │   └── MalformedBatch       422
    │       │       └── CorruptBody          400: a truncated or corrupt gzip stream
    │       ├── BuildWireError       wire/buildjob: an edge's build job or rows (400)
    │       │   ├── NotTheJobs           coordinator/catalog_build: rows not the job's (422)
    │       │   └── OtherKeys            wire/buildjob: a job of a coordinator keying otherwise
    │       ├── ChunkError           edge/chunks: a spool chunk's payload
    │       ├── LineTooLong          nntp/errors: a line over the cap
    │       ├── MalformedResponse    nntp/errors: not RFC 3977
    │       ├── IncompleteResponse   nntp/errors: closed mid-reply
    │       └── CompressionError     nntp/errors: DEFLATE, GZIP or XZVER data
    ├── NNTPError                nntp/errors: a command failed (names the server)
    │   ├── ConnectionLost
    │   ├── Timeout
    │   └── ReplyError           an error status (its code)
    │       ├── AuthRequired         480
    │       ├── Unavailable          400, 502
    │       ├── NoSuchGroup          411
    │       └── NoSuchArticle        420-430
    ├── NodeApiError             edge/client: the node API refused or failed
    │   ├── LeaseLostError       409: the range is not this node's any more
    │   └── UnreadableLink       edge/range_runner: a chunk's link answered 404
    ├── Refused                  coordinator/http/asgi: a request answered 4xx as is
    ├── ClientGone               coordinator/http/asgi: the client went away mid-request
    ├── LeaseLost                store/batches: not held with that epoch there (409)
    ├── BatchRejected            store/batches: the batch cannot belong to its range (422)
    ├── WrongGroup               store/batches: the batch is of another group than its range (422)
    ├── PlanOverlap              store/ranges: a plan over ranges planned before
    ├── NotParked                store/ranges: `ranges retry` of a range not parked
    ├── NodeExists               store/nodes
    ├── UnknownNode              store/nodes: `nodes rotate` of no live node
    ├── UserExists               store/users
    ├── UnknownUser              store/users
    ├── NewznabError             core/newznab: a request the newznab API refuses (its code)
    ├── GroupExists              store/groups
    ├── SpooledAlready           commands/spool: articles of a dump are in the spool already
    ├── DecodeError              decode/errors: a probe's body does not decode (its reason)
    │   ├── YencError            decode/yenc: no =ybegin, truncated, CRC mismatch, bad field
    │   ├── Par2Error            decode/par2: not one valid PAR2 packet
    │   └── ArchiveError         decode/archives: no archive signature, malformed at the start
    ├── UnknownGroup             store/groups
    ├── StartupStopped           supervisor/startup: a stop signal during a supervisor's start-up
    ├── NewsdError               testing/newsd: the private INN2 cannot run
    │   └── CannotInstall        INN2 is missing and cannot be installed here
    ├── ObjectStoreError         testing/objectstore: the private S3 server cannot run
    │   └── WeedMissing          weed (SeaweedFS) is not installed
    ├── ToolMissing              testing/obfuscated: par2 or 7z is not installed
    └── NzbgetError              testing/nzbget: NZBGet exited, refused or took too long
        └── NzbgetMissing        nzbget is not installed

tests/test_errors.py holds this tree to the code: every exception class
defined in the package is a UidxError and is named here.

Malformed overview lines are not errors: the indexer counts and skips them.

A shortage of this host's own (no descriptor, no memory: `HOST_LIMITS`) is an
OSError with that errno wherever it is met (a folder spool's open, an S3
request's socket): never counted against the data (a range) being handled.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

# What a call fails with when the process or the host is out of descriptors or memory:
# this host's own state (too many edges connected for a coordinator's open-file limit),
# never the data's, so not counted on a range.
HOST_LIMITS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


class UidxError(Exception):
    """Base of every error uidx raises on purpose."""


class ConfigError(UidxError):
    """A setting is missing or has a wrong value; the message names the key."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


class InputError(UidxError):
    """An input file cannot be read at all (not a line of it: the whole file)."""


class OutputError(UidxError):
    """An output file or folder cannot be written; the message names it and says why.

    Args:
        path: the file or folder (a str or a Path).
        reason: why, as the system says it (`OutputError.of` takes it from an OSError).
    """

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"cannot write {path}: {reason}")
        self.path = str(path)
        self.reason = reason

    @classmethod
    def of(cls, path: object, error: OSError) -> OutputError:
        """The error for an OSError met writing `path`."""
        return cls(path, error.strerror or str(error))


class DatabaseError(UidxError):
    """The database cannot be run, reached or migrated; the message says what to do."""


class SchemaMismatch(UidxError):
    """The database's schema is not this uidx's: a newer uidx (or another build)
    migrated it. The message names the migration's file and says to upgrade uidx.

    Not a DatabaseError: nothing waits for it to pass (a prefetcher waiting for
    the coordinator's database, a supervisor restarting a worker); the command
    line exits 78 (EX_CONFIG), which systemd and uidx's supervisor do not restart.
    """


class SpoolStoreError(UidxError):
    """The spool's object store refused a chunk or cannot be reached; names what
    ("spool chunk GROUP/FIRST-LAST.zlib", "spool s3://bucket/prefix")."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"{what}: {problem}")
        self.what = what
        self.problem = problem


class ProtocolError(UidxError):
    """A wire format or a peer broke the rules."""


class LocalProtocolError(ProtocolError):
    """We were about to send something the format does not allow."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the format does not allow."""


def sole_error(error: BaseException) -> BaseException:
    """The one exception inside nested exception groups of one, or `error` itself.

    Nurseries wrap whatever escapes them; a start-up error that escapes
    several is still one error, and the command line reports it as such.
    """
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def run_reporting(
    function: Callable[[], object],
    exit_status: Callable[[BaseException], int | None] = lambda error: None,
) -> int:
    """Run a worker's `trio.run(...)`, re-raising a sole UidxError bare (exit status, message).

    So is a sole OSError that names a file (the embedded cluster's folder
    refused): the command line reports it as one line, path and reason, as it
    does for every other command.

    Args:
        function: runs the worker.
        exit_status: for an error that ends the worker with an exit status of
            its own (logged there) rather than as an error: that status;
            None for the others.

    Returns:
        0, or what `exit_status` gave.
    """
    try:
        function()
    except BaseExceptionGroup as group:
        error = sole_error(group)
        status = exit_status(error)
        if status is not None:
            return status
        if isinstance(error, UidxError) or _names_a_file(error):
            raise error from group
        raise
    except Exception as error:
        status = exit_status(error)
        if status is None:
            raise
        return status
    return 0


def _names_a_file(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.filename is not None
