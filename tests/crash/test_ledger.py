"""The judgement of a crash state's ledger against what the clients saw acknowledged: what is lost,
over how long, and whether it is the last commits."""

from __future__ import annotations

import numpy as np

from dbtier.crash.ledger import ORDER_SLACK_NS, Acknowledged, judge

MS = 1_000_000


def acked(**ends_ms) -> Acknowledged:
    return Acknowledged({int(c[1:]): np.array([t * MS for t in ts], dtype=np.int64) for c, ts in ends_ms.items()})


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


def test_acknowledgements_closer_than_the_clients_own_order_are_not_held_to_it():
    """Client 0's commit kept and acknowledged 1 ms after client 1's lost one: the client reads its
    connections in turn, so that order says nothing of the order they committed in."""
    assert ORDER_SLACK_NS >= 1 * MS
    loss = judge(acked(c0=[1, 2, 11], c1=[1.5, 10]), {0: 3, 1: 1}, at_ns=40 * MS)
    assert loss.lost == 1 and loss.suffix


def test_a_commit_kept_but_acknowledged_after_the_cut_is_no_kept_acknowledgement():
    """Its WAL reached the media before the cut, its client saw it after: the state keeps it, and it
    must not count as a kept commit later than the one another client lost (a false 'not a suffix')."""
    loss = judge(acked(c0=[1, 2, 50], c1=[1.5, 10]), {0: 3, 1: 1}, at_ns=40 * MS)
    assert loss.lost == 1 and loss.clients == 1 and loss.suffix
    assert loss.span_ms == 30
