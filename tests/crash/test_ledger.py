"""The judgement of a crash state's ledger against what the clients saw acknowledged: what is lost,
over how long, and whether it is the last commits."""

from __future__ import annotations

from dbtier.crash.ledger import Acknowledged, judge

MS = 1_000_000


def acked(took_ms: float = 0.5, **ends_ms) -> Acknowledged:
    """Each client's acknowledgements (ms), each transaction having taken took_ms."""
    rows = [("t", int(c[1:]), int(t * MS), int(took_ms * 1000)) for c, ts in ends_ms.items() for t in ts]
    return Acknowledged.from_recording(rows)


def test_a_state_that_kept_everything_acknowledged_lost_nothing():
    loss = judge(acked(c0=[1, 2, 3], c1=[1.5, 2.5]), {0: 3, 1: 2}, at_ns=4 * MS)
    assert (loss.lost, loss.clients, loss.span_ms, loss.suffix) == (0, 0, 0.0, True)


def test_the_last_commits_lost_are_a_suffix_and_their_span_runs_to_the_cut():
    loss = judge(acked(c0=[1, 2, 3], c1=[1.5, 2.5]), {0: 2, 1: 1}, at_ns=4 * MS)
    assert (loss.lost, loss.clients, loss.suffix) == (2, 2, True)
    assert loss.span_ms == 4 - 2.5  # the first lost acknowledgement (client 1's at 2.5 ms) to the cut


def test_a_commit_kept_while_an_earlier_one_of_another_client_was_lost_is_not_a_suffix():
    loss = judge(acked(c0=[1, 2, 30], c1=[1.5, 10]), {0: 3, 1: 1}, at_ns=40 * MS)
    assert loss.lost == 1 and not loss.suffix


def test_commits_whose_transactions_overlapped_are_not_held_to_an_order():
    """Client 0's commit kept and acknowledged 6 ms after client 1's lost one, its transaction begun
    before that acknowledgement: its client may have seen it late (a terminal thread waits for Python's
    lock), so nothing says which committed first (CI: a loss judged out of order so)."""
    loss = judge(acked(took_ms=8, c0=[1, 2, 16], c1=[1.5, 10]), {0: 3, 1: 1}, at_ns=40 * MS)
    assert loss.lost == 1 and loss.suffix
    # the same kept commit, its transaction begun after the lost one was seen: out of order
    loss = judge(acked(took_ms=5, c0=[1, 2, 16], c1=[1.5, 10]), {0: 3, 1: 1}, at_ns=40 * MS)
    assert loss.lost == 1 and not loss.suffix


def test_a_transactions_start_is_its_acknowledgement_less_its_latency():
    a = Acknowledged.from_recording([("t", 0, 20 * MS, 3000), ("t", 0, 10 * MS, 2000), ("u", 1, 5 * MS, 1000)],
                                    counted=("t",))
    assert list(a.ends) == [0] and a.ends[0].tolist() == [10 * MS, 20 * MS]
    assert a.starts[0].tolist() == [8 * MS, 17 * MS]


def test_a_commit_kept_but_acknowledged_after_the_cut_is_no_kept_acknowledgement():
    """Its WAL reached the media before the cut, its client saw it after: the state keeps it, and it
    must not count as a kept commit later than the one another client lost (a false 'not a suffix')."""
    loss = judge(acked(c0=[1, 2, 50], c1=[1.5, 10]), {0: 3, 1: 1}, at_ns=40 * MS)
    assert loss.lost == 1 and loss.clients == 1 and loss.suffix
    assert loss.span_ms == 30
