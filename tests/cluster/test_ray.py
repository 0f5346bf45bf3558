"""`dbtier sweep --cluster` and `dbtier cluster status` on Ray's own multi-node test cluster (a head
and two nodes on this machine, each offering dbtier_node): every result comes back, each node runs one
at a time, a node lost mid-run re-queues its run exactly once, a killed driver resumes with only what
is missing, a node of another dbtier is refused by name, and Ctrl-C leaves nothing on any node."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import dbtier
from tests.engines.postgres.test_lifecycle import postgres_pids, wait_for

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

NODE = {"num_cpus": 1, "resources": {"dbtier_node": 1}, "object_store_memory": 80 << 20}
NODE_FOLDERS = "dbtier-node-"

SWEEP = """workload = "random-index"
[options]
rows = {rows}
[[layout]]
name = "ssd"
device = ["d=ssd-sata-mlc"]
[[layout]]
name = "hdd"
device = ["d=hdd-sata-7200"]
[axes]
cache = ["16MB", "32MB"]
"""


def node_folders() -> list[Path]:
    """This cluster's nodes' workspaces (another test session's cluster may run beside it)."""
    ours = {n["NodeID"][:12] for n in ray.nodes()}
    return sorted(p for p in Path("/dev/shm").glob(f"{NODE_FOLDERS}*") if p.name.rsplit("-", 1)[1] in ours)


def node_servers() -> list[int]:
    shm = Path("/dev/shm")
    return [pid for n in ray.nodes() for pid in postgres_pids(shm / f"{NODE_FOLDERS}{os.geteuid()}-{n['NodeID'][:12]}")]


@pytest.fixture(scope="module", autouse=True)
def ray_address_folder(tmp_path_factory):
    """Ray's test cluster writes its address into <RAY_TMPDIR or /tmp>/ray/, which only `ray start` makes:
    on a machine that never ran it, a folder of the module's own (and no machine-wide file written)."""
    folder = tmp_path_factory.mktemp("ray-address")
    (folder / "ray").mkdir()
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("RAY_TMPDIR", None)
    else:
        os.environ["RAY_TMPDIR"] = before


@pytest.fixture(scope="module")
def cluster():
    # Ray's socket paths must stay short (107 bytes): not under pytest's own folders, which a worker's
    # name lengthens
    short = tempfile.mkdtemp(prefix="ray-")
    # a node's death is noticed in a second or two (Ray's default health check takes 15 s or more)
    fast_health_check = {"health_check_period_ms": 500, "health_check_failure_threshold": 3,
                         "health_check_initial_delay_ms": 500}
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 80 << 20,
                                                      "include_dashboard": False,
                                                      "_system_config": fast_health_check,
                                                      "temp_dir": short})
    for _ in range(2):
        c.add_node(**NODE)
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="ERROR", log_to_driver=False)  # to see the nodes as Ray does
    yield c
    left = node_folders()  # what a test that failed may have left
    ray.shutdown()
    c.shutdown()
    for folder in (*left, short):
        shutil.rmtree(folder, ignore_errors=True)


def sweep_file(tmp_path: Path, rows: int = 300) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(SWEEP.format(rows=rows))
    return path


def ledger(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "ledger.jsonl").read_text().splitlines()]


def start_sweep(cluster, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dbtier", "sweep", *args, "--cluster", cluster.address],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def the_sweep(out: Path, proc: subprocess.Popen) -> Path:
    def made():
        if proc.poll() is not None:
            raise AssertionError(f"the sweep ended ({proc.returncode}): {proc.stderr.read()}")
        return next((p for p in out.glob("sweep-*") if (p / "ledger.jsonl").exists()), None)

    return wait_for(made, 60, "the sweep's folder")


def test_every_result_comes_back_each_node_one_run_at_a_time(cluster, tmp_path):
    proc = dbtier("sweep", str(sweep_file(tmp_path)), "--cluster", cluster.address, "-o", str(tmp_path / "out"),
                  "--json", str(tmp_path / "sweep.json"), check=True)
    doc = json.loads((tmp_path / "sweep.json").read_text())
    folder = Path(doc["sweep_dir"])
    assert [p["runs"] for p in doc["points"]] == [1, 1, 1, 1]
    # each run directory came back, with the facts of the node that made it
    ran_on = set()
    for p in doc["points"]:
        (run_dir,) = p["run_dirs"]
        facts = json.loads((folder / run_dir / "node.json").read_text())
        assert facts["dbtier"] and facts["postgres"] and facts["cpus"] >= 1
        assert json.loads((folder / run_dir / "result.json").read_text())["elapsed_s"] > 0
        ran_on.add(facts["node_id"])
    # two nodes took runs, and each made the same reference run first: its offset is shown
    assert len(doc["nodes"]) == 2 and len(ran_on) == 2
    assert abs(sum(n["offset"] for n in doc["nodes"])) < 1e-9  # two nodes: about their median
    assert "reference elapsed s" in proc.stdout and "offset" in proc.stdout
    # one run at a time on each node: its runs' intervals never overlap
    records = ledger(folder)
    for node in {r["node"] for r in records if r["event"] == "started"}:
        spans = {}
        for r in records:
            if r.get("node") == node and r["event"] in ("started", "done"):
                spans.setdefault((r["key"], r["run"]), []).append(r["at"])
        intervals = sorted(spans.values())
        assert all(len(s) == 2 for s in intervals)
        assert all(a[1] <= b[0] for a, b in zip(intervals, intervals[1:])), intervals
    assert not node_folders() and not node_servers()


def test_a_node_of_another_dbtier_is_refused_by_name(cluster, tmp_path):
    """A node whose Python finds another dbtier (a copy whose version says 0.0.1) is named and refused;
    a sweep refuses to start, and nothing is made."""
    import dbtier as installed

    fake = tmp_path / "site"
    shutil.copytree(Path(installed.__file__).parent, fake / "dbtier",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (fake / "dbtier" / "version.py").write_text('__version__ = "0.0.1"\n')
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(fake)  # what the new node's processes import
    try:
        odd = cluster.add_node(**NODE)
    finally:
        os.environ.pop("PYTHONPATH") if before is None else os.environ.update(PYTHONPATH=before)
    try:
        cluster.wait_for_nodes()
        proc = dbtier("cluster", "status", "--cluster", cluster.address, "--wide")
        assert proc.returncode == 2, proc.stderr
        assert "dbtier 0.0.1 (the driver has" in proc.stderr and proc.stderr.count("\n") == 1
        assert proc.stdout.count("takes runs") == 2 and "0.0.1" in proc.stdout
        proc = dbtier("sweep", str(sweep_file(tmp_path)), "--cluster", cluster.address, "-o", str(tmp_path / "out"))
        assert proc.returncode == 2 and "dbtier 0.0.1" in proc.stderr
        assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    finally:
        cluster.remove_node(odd)


def test_a_node_lost_mid_run_reruns_its_run_once(cluster, tmp_path):
    third = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    third_id = third.node_id
    out = tmp_path / "out"
    proc = start_sweep(cluster, str(sweep_file(tmp_path, rows=600)), "-o", str(out), "-q")
    try:
        folder = the_sweep(out, proc)
        lost = wait_for(lambda: next((r for r in ledger(folder) if r["event"] == "started"
                                      and third_id[:8] in r["node"]), None), 120, "a run on the third node")
        cluster.remove_node(third, allow_graceful=False)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        # until Ray marks it dead, a new driver would wait for it to answer
        wait_for(lambda: not any(n["NodeID"] == third_id and n["Alive"] for n in ray.nodes()), 120,
                 "Ray to mark the lost node dead")
        for left in Path("/dev/shm").glob(f"{NODE_FOLDERS}*-{third_id[:12]}"):  # its machine's, gone with it
            shutil.rmtree(left)
    assert proc.returncode == 0, err
    records = ledger(folder)
    assert [(r["key"], r["attempt"]) for r in records if r["event"] == "lost"] == [(lost["key"], 1)], records
    again = [r for r in records if r["key"] == lost["key"] and r["event"] == "done"]
    assert [r["attempt"] for r in again] == [2] and third_id[:8] not in again[0]["node"]
    doc = json.loads((folder / "result.json").read_text())
    assert [p["runs"] for p in doc["points"]] == [1, 1, 1, 1]
    assert next(p for p in doc["points"] if p["key"] == lost["key"])["attempts"] == 2
    assert "attempts: a run made again after its node was lost" in (folder / "report.html").read_text()
    wait_for(lambda: not node_servers(), 30, "the lost node's server to stop")


def test_a_killed_driver_resumes_with_only_the_missing_runs(cluster, tmp_path):
    out = tmp_path / "out"
    proc = start_sweep(cluster, str(sweep_file(tmp_path, rows=600)), "-o", str(out), "-q")
    try:
        folder = the_sweep(out, proc)
        wait_for(lambda: any(r["event"] == "done" and r["key"] != "reference" for r in ledger(folder)), 120,
                 "a finished run")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finished = {r["key"] for r in ledger(folder) if r["event"] == "done"}
    # Ray ends a dead driver's runs; their servers die with them
    wait_for(lambda: not node_servers(), 60, "the killed driver's servers to stop")
    count = len(ledger(folder))
    dbtier("sweep", "--resume", str(folder), "--cluster", cluster.address, "-q", check=True)
    started_again = {r["key"] for r in ledger(folder)[count:] if r["event"] == "started"}
    assert started_again and not started_again & finished
    doc = json.loads((folder / "result.json").read_text())
    assert all(p["runs"] == 1 for p in doc["points"])
    assert not node_folders() and not node_servers()


def test_ctrl_c_leaves_nothing_on_any_node(cluster, tmp_path):
    out = tmp_path / "out"
    proc = start_sweep(cluster, str(sweep_file(tmp_path, rows=2000)), "-o", str(out))
    try:
        folder = the_sweep(out, proc)
        wait_for(lambda: len(node_servers()) >= 2, 120, "a server on each node")
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    wait_for(lambda: not node_servers(), 30, "every node's server to stop")
    assert not node_folders()
    assert not [r for r in ledger(folder) if r["event"] == "done" and r["key"] != "reference"]


def test_compare_on_the_cluster_is_the_same_report_with_the_nodes(cluster, tmp_path):
    """Each layout's run on a node, loaded there; the comparison as here, with each node's reference."""
    proc = dbtier("compare", "random-index", "--rows", "300", "--config", "ssd:d=ssd-sata-mlc",
                  "--config", "hdd:d=hdd-sata-7200", "--cluster", cluster.address, "-o", str(tmp_path / "out"),
                  "--json", str(tmp_path / "c.json"), check=True)
    doc = json.loads((tmp_path / "c.json").read_text())
    assert [c["name"] for c in doc["configurations"]] == ["ssd", "hdd"]
    assert doc["speedups"][0] == 1.0 and doc["speedups"][1] < 1  # the disk is slower than the SSD
    assert len(doc["nodes"]) == 2 and all(n["reference"] > 0 for n in doc["nodes"])
    for run_dir, name in zip(doc["run_dirs"], ("ssd", "hdd")):
        result = json.loads((Path(run_dir) / "result.json").read_text())
        assert result["configuration"]["name"] == name and (Path(run_dir) / "node.json").exists()
    assert "reference elapsed s" in proc.stdout
    assert "cluster&#39;s nodes" in (Path(doc["run_dir"]) / "report.html").read_text()
    assert not list((tmp_path / "out").glob(".dbtier-reference-*"))
    assert not node_folders() and not node_servers()


def test_advise_verifies_on_the_cluster(cluster, tmp_path, shm_dir):
    dbtier("run", "random-index", "--rows", "300", "-d", "hdd=hdd-sata-7200", "--trace", "-q", "-o",
           str(tmp_path / "rec"), "--workspace", str(shm_dir), check=True)
    (recorded,) = (tmp_path / "rec").iterdir()
    dbtier("advise", str(recorded), "--fast", "ssd=ssd-sata-mlc", "--budget", "100MB", "--verify", "1",
           "--cluster", cluster.address, "-o", str(tmp_path / "out"), "--json", str(tmp_path / "a.json"),
           "--workspace", str(shm_dir), check=True)
    (verified,) = json.loads((tmp_path / "a.json").read_text())["verify"]
    assert verified["label"] == "advised" and verified["measured"] > 0
    assert (Path(verified["run_dir"]) / "node.json").exists()
    assert not node_folders() and not node_servers()


def test_reproduce_on_the_cluster_calibrates_and_runs_each_article_on_its_node(cluster, tmp_path):
    """Seed 001 (quick) on a node: its runs' folders and figures come back as a reproduction made here
    would write them, with the node that made them; on MariaDB too, a job of its own (whose runs InnoDB
    cannot lay out: its figures say so, as here)."""
    proc = dbtier("reproduce", "--quick", "--only", "001", "--engine", "postgres,mariadb", "--cluster", cluster.address,
                  "-o", str(tmp_path / "out"), check=True)
    (folder,) = (tmp_path / "out").glob("reproduce-*")
    doc = json.loads((folder / "result.json").read_text())
    art, maria = doc["articles"]
    assert doc["engines"] == ["postgres", "mariadb"] and (art["engine"], maria["engine"]) == ("postgres", "mariadb")
    assert maria["node"] and set(maria["not_run"]) == {"index-on-raid", "index-on-ssd"}
    assert json.loads((folder / "seed001-mariadb" / "node.json").read_text())["node_id"]
    assert art["seed"] == "001" and art["figures"] and not art["failures"] and art["node"]
    assert json.loads((folder / "seed001" / "node.json").read_text())["node_id"]
    assert all((folder / "seed001" / "-".join(r["key"].split()) / "server.log").exists() for r in art["runs"])
    assert len(doc["nodes"]) == 2 and "reference elapsed s" in proc.stdout
    assert not node_folders() and not node_servers()


def test_a_cluster_without_a_node_that_takes_runs_says_how_to_start_one():
    with tempfile.TemporaryDirectory(prefix="ray-") as short:  # Ray's socket paths must stay short
        head_only = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 80 << 20,
                                                                  "include_dashboard": False, "temp_dir": short})
        try:
            proc = dbtier("cluster", "status", "--cluster", head_only.address)
        finally:
            head_only.shutdown()
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and not proc.stdout
    assert "no node offers the resource dbtier_node; start each node with ray start" in proc.stderr


def test_an_unreachable_cluster_is_one_line(tmp_path):
    proc = dbtier("sweep", str(sweep_file(tmp_path)), "--cluster", "127.0.0.1:9", "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "nothing answers there" in proc.stderr and not (tmp_path / "out").exists()
