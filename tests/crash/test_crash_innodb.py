"""`dbtier crash oltp --engine mariadb` on a real MariaDB server at a small size (TPC-C, 1 warehouse of
2,000 items, 2 terminals of dbtier's own, 2 s), each state recovered by InnoDB and checked: the server
starts and logs no error, the ledger keeps every acknowledged commit, TPC-C's consistency conditions
hold, CHECK TABLE and innochecksum find every page whole.

- the defaults on honest devices keep every commit and leave no damage, torn pages included (the
  doublewrite buffer), with two tables placed on a device of their own;
- innodb_flush_log_at_trx_commit = 0 loses the last commits, in commit order;
- without the doublewrite buffer a torn page is found (InnoDB cannot apply its log to it), and the
  page it names is told as the torn copy of a write;
- dbtier's own terminals keep the same ledger on PostgreSQL.
No figure here is timed: the losses' spans are in the closing notes, not judged."""

from __future__ import annotations

import pytest

from dbtier.crash import recover_innodb, safety
from dbtier.crash.run import run_crash, verdict
from dbtier.engines.mariadb import PAGE_BYTES
from dbtier.engines.mariadb.server import OWN_DATA_DIRECTORY, PLACES
from dbtier.errors import UserError
from dbtier.experiments.experiment import Experiment

TPCC = dict(warehouses=1, items=2000, customers=300, clients=2, duration=2, warmup=0)


def crash(workspace, sets=(), cuts: int = 4, kinds=("random",), engine: str = "mariadb", fsync_error: bool = False,
          devices=("ssd=ssd-sata-mlc",), **kw) -> dict:
    exp = Experiment.from_options("oltp", engine=engine, device=list(devices), set=list(sets), **{**TPCC, **kw})
    return run_crash(exp, cuts, seed=1, kinds=kinds, workspace=workspace, recoveries=2, fsync_error=fsync_error)


def test_innodb_with_its_defaults_keeps_every_commit(module_shm_dir):
    # a buffer pool of 6 MB: the tables' pages are written during the run, so a torn cut can tear them;
    # the two largest tables on a disk of their own: each state recovers its own copy of their files
    # (recovered from the lab's, newer than any cut, InnoDB finds pages "in the future" in every state)
    r = crash(module_shm_dir, cuts=8, kinds=("flush", "random", "torn", "reorder"), cache="6MB",
              devices=("ssd=ssd-sata-mlc", "hdd=hdd-sata-7200"), place=["stock=hdd", "order_line=hdd"])
    s = r["summary"]
    assert s["lost_commits"] == 0 and s["damaged"] == 0, [x for x in r["states"] if x["lost"] or x["problems"]]
    assert all(x["started"] for x in r["states"])
    assert r["run"]["transactions"] > 100, "New-Order, Payment and Delivery are counted"
    assert sum(x["acknowledged"] for x in r["states"]) > 100, "the cuts fell where commits had been acknowledged"
    timed = [x["recovery_s"] for x in r["states"] if x["recovery_s"] is not None]
    assert len(timed) == 1 and r["states"][0]["recovery_s"] is not None and timed[0] > 0, timed
    assert verdict(r).startswith("0 of 8 cuts lost an acknowledged commit or left damage; recovery took")


def test_a_redo_log_flushed_once_a_second_loses_the_last_commits(module_shm_dir):
    r = crash(module_shm_dir, ["innodb_flush_log_at_trx_commit=0"], cuts=3)
    lost = [x for x in r["states"] if x["lost"]]
    assert lost, "commits acknowledged before the log was written are lost at a cut"
    assert all(x["suffix"] for x in lost), "what is lost is the last commits, in commit order"
    assert r["summary"]["damaged"] == 0, [x["problems"] for x in r["states"]]


def test_torn_pages_without_the_doublewrite_buffer_are_found(module_shm_dir):
    # a tear damages a page when its device loses some of its 4 KiB units and keeps others: most torn
    # cuts fall on a tablespace's page (3 in 4 by design), and 6 of 12 were found so; 20 cuts miss
    # every one with odds below 1 in 10,000 even were it 2 in 5
    r = crash(module_shm_dir, ["innodb_doublewrite=0"], cuts=20, kinds=("torn",), cache="6MB")
    damaged = [x for x in r["states"] if x["problems"]]
    assert damaged, r["states"]
    assert any("corrupted page" in p or "innochecksum" in p or "CHECK TABLE" in p
               for x in damaged for p in x["problems"]), [x["problems"] for x in damaged]
    # the page the server names has its story told: the cut tore the write that carried it
    told = [x["page"] for x in damaged if x.get("page")]
    assert told and all(p["torn"] and "a torn copy of the write sent" in p["text"] for p in told), \
        [(x["problems"], x.get("page")) for x in damaged]


def test_a_failed_fsync_stops_innodb_which_recovers_and_o_direct_loses_nothing(module_shm_dir):
    """InnoDB ends the server on a table file's failed fsync; started again, it recovers and checkpoints.
    With O_DIRECT (the default) its page writes never were the page cache's: nothing is lost. With
    buffered data files (fsync) the failure drops the pages waiting in the cache, if the file had any;
    whether a later write of the same pages covers them is the workload's (docs/crash.md counts them)."""
    r = crash(module_shm_dir, cuts=3, kinds=("random", "flush"), fsync_error=True)
    fault = r["run"]["fsync_error"]
    assert fault["file"].endswith(".ibd") and fault["panicked"], fault
    assert "returned 5" in fault["server_said"], fault  # EIO, in InnoDB's words
    assert fault["pages"] == 0 and fault["lost_writes"] == 0 and fault["never_written_bytes"] == 0, fault
    s = r["summary"]
    assert s["lost_commits"] == 0 and s["damaged"] == 0, [x for x in r["states"] if x["lost"] or x["problems"]]
    assert all(x["at_ns"] >= fault["at_ns"] for x in r["states"]), r["states"]  # every cut after the failure
    assert "the server aborted and, started again, recovered" in verdict(r)
    # buffered: the same answer (whether the failed file had pages waiting in the cache is the run's)
    buffered = crash(module_shm_dir, cuts=1, fsync_error=True, io_mode="buffered")["run"]["fsync_error"]
    assert buffered["file"].endswith(".ibd") and buffered["panicked"] and "returned 5" in buffered["server_said"]


def test_dbtiers_own_terminals_keep_the_ledger_on_postgres_too(module_shm_dir):
    r = crash(module_shm_dir, ["synchronous_commit=off"], cuts=3, engine="postgres", driver="python")
    lost = [x for x in r["states"] if x["lost"]]
    assert r["run"]["transactions"] > 100 and lost and all(x["suffix"] for x in lost), r["states"]
    assert r["summary"]["damaged"] == 0, [x["problems"] for x in r["states"]]


def test_a_table_placed_apart_is_recovered_from_the_states_own_copy(tmp_path):
    """A placed table's file is named through the server's own data directory (its .isl, its redo
    records), so a state's recovery finds the state's copy on its device's folder; a path that leads
    out of the state (a workload's own DATA DIRECTORY) is refused before a server opens it."""
    state = tmp_path / "state-again"
    data, tables, undo = state / "0" / "data", state / "1" / "tables" / "dbtier", state / "0" / "undo"
    for folder in (data / "dbtier", data / PLACES, tables, undo):
        folder.mkdir(parents=True)
    (data / PLACES / "hdd").symlink_to(state / "1" / "tables")
    (tables / "stock.ibd").write_bytes(b"\0" * 4 * PAGE_BYTES)
    (undo / "undo001").write_bytes(b"\0" * 4 * PAGE_BYTES)
    (data / "dbtier" / "stock.isl").write_text(f"{OWN_DATA_DIRECTORY}/{PLACES}/hdd/dbtier/stock.ibd\n")
    roles = {"data": 0, "log": 0, "undo": 0, "temp": 0}
    named = recover_innodb.damaged_page(
        [f"the server did not start: InnoDB: Unable to apply log to corrupted page 3 in file "
         f"{OWN_DATA_DIRECTORY}/{PLACES}/hdd/dbtier/stock.ibd"], state, roles)
    assert named == ("1/tables/dbtier/stock.ibd", 3 * PAGE_BYTES, PAGE_BYTES,
                     f"page 3 in file {OWN_DATA_DIRECTORY}/{PLACES}/hdd/dbtier/stock.ibd")
    # an undo tablespace, named by the absolute path of the folder the state was first recovered in
    named = recover_innodb.damaged_page(["InnoDB: Unable to apply log to corrupted page 2 in file "
                                         "/somewhere/crash-scratch/state-0/0/undo/undo001"], state, roles)
    assert named is not None and named[:2] == ("0/undo/undo001", 2 * PAGE_BYTES), named
    recover_innodb.check_links_within(data)
    (data / "dbtier" / "stock.isl").write_text("/var/lib/elsewhere/dbtier/stock.ibd\n")
    with pytest.raises(UserError, match="table dbtier.stock was put at /var/lib/elsewhere/dbtier/stock.ibd by the "
                                        "workload's own DATA DIRECTORY"):
        recover_innodb.check_links_within(data)


def test_innodb_risks_in_words():
    hdd = {"name": "hdd", "kind": "hdd", "params": {"atomic_write_kib": 0.5}}
    assert safety.risks({"engine": "mariadb", "settings": {}, "devices": [hdd]}) == []
    said = safety.risks({"engine": "mariadb", "settings": {"innodb-flush-log-at-trx-commit": "2",
                                                           "innodb-doublewrite": "OFF"}, "devices": [hdd]})
    assert said == ["innodb_flush_log_at_trx_commit = 2: the redo log is flushed once a second, so a power cut loses "
                    "up to about a second of acknowledged commits",
                    "innodb_doublewrite = off on hdd, which can tear a 16 KiB page: a power cut can leave pages half "
                    "written, which InnoDB cannot recover"]
