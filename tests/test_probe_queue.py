"""The probe queue in a real PostgreSQL: one candidate per release, leased, retried, capped,
and what a probe found is in the catalog at the next build."""

from __future__ import annotations

from test_catalog_build import batches_of_generated

from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.drain import Queue
from usenet_indexer.store.catalog import Search
from usenet_indexer.store.probes import MAX_ATTEMPTS, Outcome, ProbeStore


def probes(stores: Stores) -> ProbeStore:
    return ProbeStore(stores.catalog.pool)


def rows(stores: Stores, sql: str) -> list[tuple[object, ...]]:
    with stores.catalog.pool.connection() as conn:
        return list(conn.execute(sql).fetchall())


def test_candidates_are_leased_once_and_the_outcome_renames_the_release(stores: Stores) -> None:
    for _ in batches_of_generated(stores, 12_000, seed=7, every=3_000, profile="posting-tools"):
        pass
    stores.build.everything(quiet_seconds=0)
    queue = probes(stores)
    due = queue.due()
    assert due > 3
    first = queue.take(2, 60.0, server="a", servers=1)
    second = queue.take(1_000, 60.0, server="a", servers=1)
    assert len(first) == 2
    assert {(j.release_key, j.message_id) for j in first}.isdisjoint(
        (j.release_key, j.message_id) for j in second
    )
    assert len(first) + len(second) == due
    assert queue.due() == 0
    job = first[0]
    key = f"'\\x{job.release_key.hex()}'::bytea"
    ((before,),) = rows(stores, f"SELECT name FROM catalog WHERE sources @> ARRAY[{key}]")
    assert queue.record(
        job, Outcome.RENAMED, detail="par2: 2 files", name="Real.Name.S01E01.1080p.WEB-GRP",
        files=("Real.Name.S01E01.1080p.WEB-GRP.mkv",), sizes=(1,),
    )  # fmt: skip
    assert not queue.record(job, Outcome.RENAMED, detail="twice")  # the lease is used up
    stores.build.drain(quiet_seconds=0)
    # Broken ones too: the rename is what is asked here, and the release probed
    # first may miss more than its par2 repairs (then searches leave it out).
    _total, page = stores.catalog.search(Search(words="real name s01e01", broken=True))
    assert [row.item.name for row in page] == ["Real.Name.S01E01.1080p.WEB-GRP"]
    # The name it had before is still found.
    _, page = stores.catalog.search(Search(words=str(before), broken=True))
    assert "Real.Name.S01E01.1080p.WEB-GRP" in [row.item.name for row in page]
    counts = {(c.state, c.outcome): c.candidates for c in queue.counts()}
    assert counts[("done", "renamed")] == 1


def test_a_missing_article_is_tried_on_another_server_then_given_up(stores: Stores) -> None:
    for _ in batches_of_generated(stores, 6_000, seed=8, every=3_000, profile="posting-tools"):
        pass
    queue = probes(stores)
    (job,) = queue.take(1, 60.0, server="a", servers=2)
    with stores.catalog.pool.connection() as conn:
        conn.execute("UPDATE probe_candidates SET next_at = now() - interval '1 day'")
    assert queue.retry(job, Outcome.ARTICLE_MISSING, "430 on a", server="a", pause_seconds=0)
    with stores.catalog.pool.connection() as conn:
        conn.execute("UPDATE probe_candidates SET next_at = now() - interval '1 day'")
    # Server a answered 430: its slots pass over it while b is left.
    assert job.release_key not in {
        j.release_key for j in queue.take(1_000, 60.0, server="a", servers=2)
    }
    with stores.catalog.pool.connection() as conn:
        conn.execute("UPDATE probe_candidates SET state = 'new', deadline = NULL")
    again = [
        j
        for j in queue.take(1_000, 60.0, server="b", servers=2)
        if j.release_key == job.release_key
    ]
    assert again
    assert again[0].attempts == 2
    for attempt in range(2, MAX_ATTEMPTS):
        assert queue.retry(
            again[0], Outcome.ARTICLE_MISSING, "430 on b", server="b", pause_seconds=0
        )
        with stores.catalog.pool.connection() as conn:
            conn.execute("UPDATE probe_candidates SET next_at = now() - interval '1 day'")
        taken = [
            j
            for j in queue.take(1_000, 60.0, server="b", servers=2)
            if j.release_key == job.release_key
        ]
        assert taken[0].attempts == attempt + 1
        again = taken
    assert queue.retry(again[0], Outcome.ARTICLE_MISSING, "430 on b", server="b", pause_seconds=0)
    (state,) = rows(
        stores,
        f"SELECT state, outcome FROM probe_candidates WHERE release_key = '\\x{job.release_key.hex()}'",
    )
    assert state == ("failed", "article_missing")


def test_a_prober_that_dies_gives_its_candidates_back_by_expiry(stores: Stores) -> None:
    for _ in batches_of_generated(stores, 6_000, seed=9, every=3_000, profile="posting-tools"):
        pass
    queue = probes(stores)
    # A lease whose deadline is behind it already: its prober is gone.
    taken = queue.take(1_000, -1.0, server="a", servers=1)
    assert taken
    assert {j.message_id for j in queue.take(1_000, 60.0, server="a", servers=1)} == {
        j.message_id for j in taken
    }
    queue.give_back(taken)
    assert queue.due() == len(taken)


def test_the_queue_says_what_a_one_shot_run_still_waits_for(stores: Stores) -> None:
    for _ in batches_of_generated(stores, 6_000, seed=10, every=3_000, profile="posting-tools"):
        pass
    queue = probes(stores)
    due = queue.due()
    assert due > 2
    # The batches' keys wait for a build, their candidates for a prober.
    looked = queue.queue()
    assert (looked.candidates, looked.retrying) == (due, 0)
    assert looked.pending > 0
    assert not looked.drained
    stores.build.drain(quiet_seconds=0)
    assert queue.queue().pending == 0
    missing, *probed = queue.take(1_000, 60.0, server="a", servers=1)
    assert queue.retry(missing, Outcome.ARTICLE_MISSING, "430 on a", pause_seconds=60)
    rounds = 0
    while probed:
        for job in probed:
            assert queue.record(job, Outcome.NO_NAMES, detail="nothing")
        # Probed: their keys wait for the build that applies what they found ...
        keys = len({job.release_key for job in probed})
        assert queue.queue() == Queue(candidates=1, retrying=1, pending=keys)
        stores.build.drain(quiet_seconds=0)
        # ... which may ask for more (a par2 where an nfo named nothing, an archive).
        probed = queue.take(1_000, 60.0, server="a", servers=1)
        assert queue.queue() == Queue(candidates=1 + len(probed), retrying=1, pending=0)
        rounds += 1
    assert rounds >= 1
    # Given up at its attempt cap: nothing is left to wait for.
    with stores.catalog.pool.connection() as conn:
        conn.execute(
            "UPDATE probe_candidates SET attempts = %s, state = 'probing' WHERE message_id = %s",
            (MAX_ATTEMPTS, missing.message_id),
        )
    assert queue.retry(missing, Outcome.ARTICLE_MISSING, "430 on a", pause_seconds=60)
    assert queue.queue() == Queue(candidates=0, retrying=0, pending=0)
    assert queue.queue().drained
