"""Test data for probes: uploads with real bodies, posted the way the posting tools post them.

Each upload is made of real files: a video of random bytes, an NFO naming
the release, a PAR2 set made by par2cmdline (`par2 create`) over them, or,
for a flood, a real zip or 7z archive (Python's zipfile, p7zip's `7z`)
holding an executable under a film's name. The files are yEnc-encoded
(testing/yenc.py) into articles of `part_bytes` and given the subjects,
From headers and message-ids of the tools whose obfuscation modes real
groups show. The formats follow the tools' own source (as synth/generator.py
documents them; re-done here, no code copied):

- `nyuu`: animetosho/Nyuu lib/uploadmgr.js's default subject
  `[0i/M] - "name" yEnc (k/N)`, lib/article.js's message-id (24 letters,
  `-`, a 13-digit ms time, `@nyuu`); the video posted under 32 random
  letters and digits, the par2 set under the real name (what SABnzbd's
  obfuscated test posts carry), a random From per upload.
- `newsup`: demanuel/NewsUP lib/NewsUP/Utils.pm `_obfuscate_files`: every
  file renamed to 12 random characters and the par2 index to
  `rename.with.this.par2`; the subject `[i/M] - "name" (k/N)` of
  lib/NewsUP/Article.pm; the default From `NewsUP <NewsUP@somewhere.cbr>`.
- `ngpost`: mbruel/ngPost `--gen_name`: every file, par2 too, under 17
  random characters (src/NgPost.h LENGTH_NAME), subject `[0i/M] "name"
  (k/N)` (src/nntp/NntpArticle.cpp), From 13 letters or digits
  `@ngPost.com` (randomStdFrom).
- `plain`: the same upload under its real names (any tool's default): a
  probe must leave it as it is.
- any of these with `volumes=N`: the video cut into N volumes, all of one
  size but the last, about half as long, `name.mkv.001` ... (HJSplit's
  and 7-Zip's split naming), each posted as a file of its own, the par2
  set made over them: its lengths cannot tell the equal volumes apart.
- `zip_flood`, `7z_flood`: the flood bots' `Movie.Title.2024.1080p.BluRay
  .x264-GRP.zip` holding `setup.exe` only: the headers look like a film,
  the archive says otherwise.

Which bodies a candidate's probe reads, and what it must find, is the
truth (`Built.real_name`, `Built.data_files`, `Built.flood`); what a
downloader must come to is in `Built.originals` (the files as made).

An upload may lose articles on the way, as real ones do (a server that
never got them, a takedown): `leave_out` names segments of the video that
are made but not posted (`Built.left_out`), and `redundancy` is the share
of recovery data par2 makes (`par2 create -rN`). Whether what is left can
be repaired is par2's arithmetic, and the caller chooses the two so that
the answer is plain: tests/test_download.py has NZBGet repair a video
that lost one article of 8-20 with 30% of recovery data, and fail on one
that lost five with 5%.

`scripts/post-obfuscated DIR` (`main`) posts a showcase of them to the
private INN2 that `scripts/newsd start DIR` runs, and writes their truth:
scripts/demo does, and says afterwards how many the catalog names.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import string
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Collection, Sequence
from email.utils import formatdate
from pathlib import Path

import attrs

from usenet_indexer.errors import UidxError
from usenet_indexer.testing.newsd import PostedArticle, post_articles
from usenet_indexer.testing.yenc import yenc_articles

KINDS = ("nyuu", "newsup", "ngpost", "plain", "zip_flood", "7z_flood")
OBFUSCATED = ("nyuu", "newsup", "ngpost")
# Uploads of one From (NewsUP's default) are told apart by time, as in real groups.
SHOWCASE_GAP_SECONDS = 2 * 3600
_SHOWS = ("Fallout", "Severance", "Andor", "Shogun", "Slow.Horses", "The.Bear", "Silo", "Dune")
_GROUPS = ("Kitsune", "NTb", "FLUX", "SiGMA", "playWEB", "EDITH")


class ToolMissing(UidxError):
    """par2 or 7z is not installed (scripts/ensure-probe-tools installs them)."""


@attrs.frozen
class Built:
    """One upload: its articles, and what probing it must come to.

    Attributes:
        kind: one of KINDS.
        real_name: the release's real name.
        data_files: the real names of its data files (video or its volumes, nfo), as the
            par2 lists them.
        flood: an archive of executables only.
        articles: in posting order.
        posted_as: (name posted under, real name) of each file.
        originals: the files as made, under their real names (video, nfo, par2 set;
            a flood's archive): a downloader's output must equal them.
        left_out: the articles made but not posted (`leave_out`).
    """

    kind: str
    real_name: str
    data_files: tuple[str, ...]
    flood: bool
    articles: tuple[PostedArticle, ...]
    posted_as: tuple[tuple[str, str], ...] = ()
    originals: tuple[Path, ...] = ()
    left_out: tuple[PostedArticle, ...] = ()


def build(
    folder: Path,
    kind: str,
    n: int,
    seed: int,
    *,
    posted: int,
    part_bytes: int = 60_000,
    volumes: int = 1,
    redundancy: int = 10,
    leave_out: Collection[int] = (),
    name: str | None = None,
    links: Sequence[str] = (),
) -> Built:
    """Upload number `n` of a kind, its files made in `folder`, posted at unix time `posted`
    (uploads of one tool's default From are told apart by time, as in real groups); the
    video whole, or cut into `volumes` volumes.

    Args:
        folder: where its files are made (a folder of its own inside).
        kind: one of KINDS.
        n: the upload's number (its episode number comes from it).
        seed: the seed of its random names and bytes, with `kind` and `n`.
        posted: the unix time of its Date headers.
        part_bytes: the bytes of one article (the video's 150-400 kB in 3-7 at 60 kB).
        redundancy: par2's recovery data, in percent of the files it covers.
        leave_out: the numbers (1-based) of the video's segments not posted.
        name: the release's name (a film's, say); else a show's episode, from `n`.
        links: lines the NFO carries below its release line, as scene and P2P NFOs
            write a film's or a show's pages (`IMDb  : https://www.imdb.com/title/tt...`).

    Raises:
        ToolMissing: par2 (or, for a 7z flood, 7z) is not installed.
        ValueError: `leave_out` names a segment the video does not have, or is
            asked of a flood.
    """
    rng = random.Random(f"{seed}-{kind}-{n}")
    work = folder / f"{kind}-{n}"
    work.mkdir(parents=True)
    date = formatdate(posted, usegmt=True)
    if kind.endswith("_flood"):
        if leave_out:
            raise ValueError("leave_out is for uploads with a video, not floods")
        return _flood(work, kind, rng, part_bytes, date)
    show = rng.choice(_SHOWS)
    episode = f"{show}.S0{rng.randint(1, 9)}E{n % 99 + 1:02}.1080p.WEB.H264-{rng.choice(_GROUPS)}"
    name = name or episode
    video = rng.randbytes(rng.randint(150_000, 400_000))
    data = _cut(work, f"{name}.mkv", video, volumes)
    nfo = work / f"{name}.nfo"
    nfo.write_bytes(_nfo(name, links).encode("cp437"))
    par2 = _par2(work, name, [*data, nfo], redundancy)
    real = [*data, nfo, *par2]
    posted_names = _posted_names(kind, rng, name, real)
    poster = _poster(kind, rng)
    articles = _articles(kind, rng, poster, [(p, posted_names[p]) for p in real], part_bytes, date)
    # The video (its first volume) is posted first: its segment k is article k.
    segments = -(-data[0].stat().st_size // part_bytes)
    if not set(leave_out) <= set(range(1, segments + 1)):
        raise ValueError(f"leave_out {sorted(leave_out)}: the video has segments 1-{segments}")
    left_out = [a for k, a in enumerate(articles, 1) if k in leave_out]
    kept = [a for k, a in enumerate(articles, 1) if k not in leave_out]
    data_files = (*(d.name for d in data), nfo.name)
    posted_as = tuple((posted_names[p], p.name) for p in real)
    return Built(
        kind, name, data_files, False, tuple(kept), posted_as, tuple(real), tuple(left_out)
    )


def _cut(work: Path, name: str, data: bytes, volumes: int) -> list[Path]:
    """The file `name` of `data` written whole, or cut into volumes of one size, the last
    about half as long."""
    if volumes == 1:
        (work / name).write_bytes(data)
        return [work / name]
    size = math.ceil(len(data) / (volumes - 0.5))
    paths = [work / f"{name}.{i + 1:03}" for i in range(volumes)]
    for i, path in enumerate(paths):
        path.write_bytes(data[i * size : (i + 1) * size])
    return paths


def _par2(work: Path, name: str, files: list[Path], redundancy: int) -> list[Path]:
    if shutil.which("par2") is None:
        raise ToolMissing("par2 (par2cmdline) is not installed")
    subprocess.run(
        ["par2", "create", "-q", "-q", f"-r{redundancy}", "-n2", f"{name}.par2",
         *(f.name for f in files)],
        cwd=work, check=True, capture_output=True,
    )  # fmt: skip
    return sorted(work.glob("*.par2"), key=lambda p: (".vol" in p.name, p.name))


def _posted_names(kind: str, rng: random.Random, name: str, files: list[Path]) -> dict[Path, str]:
    if kind == "plain":
        return {f: f.name for f in files}
    if kind == "nyuu":
        # One random name for the upload, the real extension kept (a volume's too).
        hidden = _random(rng, 32)
        return {f: f.name if f.suffix == ".par2" else f"{hidden}{_kept(f)}" for f in files}
    if kind == "newsup":
        out = {}
        for f in files:
            if f.suffix != ".par2":
                out[f] = _random(rng, 12)
            elif ".vol" in f.name:
                out[f] = "rename.with.this" + f.name[len(name) :]
            else:
                out[f] = "rename.with.this.par2"
        return out
    assert kind == "ngpost"
    return {f: f"{_random(rng, 17)}{f.suffix}" for f in files}


def _kept(path: Path) -> str:
    """The suffix a tool keeps: `.mkv`, or `.mkv.001` for a volume."""
    return "".join(path.suffixes[-2:]) if path.suffix[1:].isdigit() else path.suffix


def _poster(kind: str, rng: random.Random) -> str:
    if kind == "newsup":
        return "NewsUP <NewsUP@somewhere.cbr>"
    if kind == "ngpost":
        return f"{_random(rng, 13)}@ngPost.com"
    user = _random(rng, 8).lower()
    return f"{user} <{user}@{_random(rng, 6).lower()}.localdomain>"


def _articles(
    kind: str,
    rng: random.Random,
    poster: str,
    files: list[tuple[Path, str]],
    part_bytes: int,
    date: str,
) -> list[PostedArticle]:
    total = len(files)
    articles: list[PostedArticle] = []
    for i, (path, posted) in enumerate(files, 1):
        bodies = yenc_articles(path.read_bytes(), posted.encode(), part_bytes)
        for k, body in enumerate(bodies, 1):
            if kind == "ngpost":
                subject = f'[{i}/{total}] "{posted}" ({k}/{len(bodies)})'
            elif kind == "newsup":
                subject = f'[{i}/{total}] - "{posted}" ({k}/{len(bodies)})'
            else:
                subject = f'[{i:02}/{total:02}] - "{posted}" yEnc ({k}/{len(bodies)})'
            articles.append(PostedArticle(_message_id(kind, rng), subject, poster, date, body))
    return articles


def _message_id(kind: str, rng: random.Random) -> str:
    if kind == "ngpost":
        return f"<{rng.randbytes(16).hex()}@ngPost>"
    if kind == "newsup":
        return f"<{rng.randint(10**9, 2 * 10**9)}{rng.randint(0, 999_999)}.{_random(rng, 6).lower()}@{_random(rng, 4).lower()}.newsup>"
    letters = "".join(
        rng.choice(string.ascii_uppercase if i % 2 else string.ascii_lowercase) for i in range(24)
    )
    return f"<{letters}-{rng.randint(10**12, 10**13 - 1)}@nyuu>"


def _flood(work: Path, kind: str, rng: random.Random, part_bytes: int, date: str) -> Built:
    name = f"{rng.choice(_SHOWS).split('.')[0]}.{rng.randint(1990, 2025)}.1080p.BluRay.x264-{rng.choice(_GROUPS)}"
    exe = work / "setup.exe"
    exe.write_bytes(b"MZ" + rng.randbytes(30_000))
    if kind == "zip_flood":
        archive = work / f"{name}.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
            out.write(exe, exe.name)
    else:
        if shutil.which("7z") is None:
            raise ToolMissing("7z (p7zip-full) is not installed")
        archive = work / f"{name}.7z"
        subprocess.run(
            ["7z", "a", "-bd", "-y", archive.name, exe.name],
            cwd=work,
            check=True,
            capture_output=True,
        )
    poster = f"{_random(rng, 10)}@{_random(rng, 5).lower()}.com"
    articles = _articles("plain", rng, poster, [(archive, archive.name)], part_bytes, date)
    return Built(kind, name, (), True, tuple(articles), originals=(archive,))


def _random(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(length))


def _nfo(name: str, links: Sequence[str] = ()) -> str:
    group = name.rsplit("-", 1)[-1]
    return (
        "\u2554" + "\u2550" * 60 + "\u2557\n"
        f"\u2551   {group:^54}   \u2551\n"
        "\u255a" + "\u2550" * 60 + "\u255d\n\n"
        f"  Release : {name}\n"
        + "".join(f"  {line}\n" for line in links)
        + "  Source  : WEB\n  Video   : H264 1080p\n  Audio   : EAC3 5.1\n\n"
        "  Greetings to all the groups out there.\n"
    )


def showcase(folder: Path, count: int, seed: int, *, end: int) -> list[Built]:
    """`count` obfuscated uploads (Nyuu's, NewsUP's and ngPost's styles in turn, every
    second round with the video in 4 volumes) and 2 zip floods, posted
    SHOWCASE_GAP_SECONDS apart, the last before `end` (unix time).

    Raises:
        ToolMissing: par2 is not installed.
    """
    at = end - (count + 2) * SHOWCASE_GAP_SECONDS
    made = []
    for n in range(count):
        kind = OBFUSCATED[n % len(OBFUSCATED)]
        volumes = 4 if (n // len(OBFUSCATED)) % 2 else 1
        posted = at + n * SHOWCASE_GAP_SECONDS
        made.append(build(folder, kind, n, seed, posted=posted, volumes=volumes))
    for n in range(2):
        posted = at + (count + n) * SHOWCASE_GAP_SECONDS
        made.append(build(folder, "zip_flood", n, seed, posted=posted))
    return made


def main(argv: Sequence[str] | None = None) -> int:
    """`post-obfuscated DIR --group G [--uploads N] [--seed S] --truth FILE`: the showcase
    posted to the INN2 under DIR, its truth written to FILE (a JSON object a line)."""
    parser = argparse.ArgumentParser(prog="post-obfuscated", description=main.__doc__)
    parser.add_argument("dir", help="the folder `scripts/newsd start` ran in")
    parser.add_argument("--group", required=True)
    parser.add_argument("--uploads", type=int, default=12, help="obfuscated uploads (default 12)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--truth", required=True, help="where the truth goes (JSON lines)")
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="uidx-obfuscated-") as work:
            made = showcase(Path(work), args.uploads, args.seed, end=int(time.time()))
    except ToolMissing as error:
        print(f"post-obfuscated: {error} (scripts/ensure-probe-tools installs it)", file=sys.stderr)
        return 2
    articles = [article for upload in made for article in upload.articles]
    posted = post_articles(Path(args.dir), args.group, articles)
    Path(args.truth).write_text(
        "".join(
            json.dumps(
                {"kind": u.kind, "real_name": u.real_name, "flood": u.flood,
                 "data_files": list(u.data_files), "posted_as": [list(p) for p in u.posted_as]}
            ) + "\n"
            for u in made
        )
    )  # fmt: skip
    print(json.dumps({"uploads": len(made), "articles": posted["articles"]}))
    return 0
