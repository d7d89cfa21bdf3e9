"""Archive listings from the first bytes of an archive: RAR 4, RAR 5, 7z, zip.

`list_archive` tells the format by its signature and hands the data to its
reader (rar.py, sevenzip.py, ziplocal.py, each with its own theory of
operation). What a first segment can give differs by format:

- RAR (4 and 5): the file headers come before each file's data, so a first
  volume's first segment names its files up to the first big data area;
  complete at the end-of-archive block.
- zip: the local file headers, in order (the central directory is at the
  end); complete at the central directory; an entry with a data descriptor
  stops the listing.
- 7z: the names are in a header at the END of the archive. A first segment
  of a big 7z names nothing (`names=()`, complete False); only data that
  holds the end header (a small archive) is listed.
"""

from __future__ import annotations

from usenet_indexer.decode.errors import ArchiveError
from usenet_indexer.decode.listing import ArchiveListing
from usenet_indexer.decode.rar import RAR4_SIGNATURE, RAR5_SIGNATURE, list_rar4, list_rar5
from usenet_indexer.decode.sevenzip import SEVENZIP_SIGNATURE, list_7z
from usenet_indexer.decode.ziplocal import ZIP_SIGNATURES, list_zip

__all__ = ["ArchiveError", "ArchiveListing", "list_archive"]


def list_archive(data: bytes) -> ArchiveListing:
    """The files an archive's headers in `data` name.

    Args:
        data: the archive's first bytes (a first segment), or all of it.

    Returns:
        Its kind, the names as far as the headers in `data` go, whether the
        listing is complete, whether it is encrypted.

    Raises:
        ArchiveError: `reason` "no signature" when the data starts with no
            RAR, 7z or zip signature; "malformed" when the first header is
            (a bad CRC, a field out of range). Data that ends too soon, even
            inside the first header, is an incomplete listing, no error.
    """
    if data.startswith(RAR5_SIGNATURE):
        return list_rar5(data)
    if data.startswith(RAR4_SIGNATURE):
        return list_rar4(data)
    if data.startswith(SEVENZIP_SIGNATURE):
        return list_7z(data)
    if data.startswith(ZIP_SIGNATURES):
        return list_zip(data)
    raise ArchiveError("no signature", f"starts with {data[:8].hex() or 'nothing'}")
