"""dbtier advise --catalog: which volumes to buy. A run built so the answer is known (a table read in
whole scans, many commits each waiting for its WAL write) on a catalogue of two volumes made for it
(one of cheap IOPS and little throughput, one of cheap throughput and slow I/Os) gets that answer: the
WAL on a small volume with IOPS, the table on throughput. Prices, targets and every bad input."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from dbtier.advisor import catalog, volumes
from dbtier.errors import UserError
from tests.conftest import dbtier, retry_while_host_steals

IOPS_VOL = '''name = "iops-vol"
kind = "cloud"
summary = "quick small I/O, little throughput"
[params]
capacity_gb = 10.73741824
read_latency_us = 300
write_latency_us = 300
iops = 500
mb_s = 20
[provision.capacity_gb]
unit = "GiB"
factor = 1.073741824
min = 1
max = 1000
[provision.iops]
unit = "IOPS"
min = 500
max = 64000
'''
TPUT_VOL = '''name = "tput-vol"
kind = "cloud"
summary = "throughput, slow I/Os"
[params]
capacity_gb = 10.73741824
read_latency_us = 1000
write_latency_us = 1000
iops = 5000
mb_s = 50
io_unit_kib = 1024
[provision.capacity_gb]
unit = "GiB"
factor = 1.073741824
min = 1
max = 1000
[provision.mb_s]
unit = "MB/s"
min = 50
max = 2000
'''
CATALOG = '''name = "handmade"
title = "two volumes made for the test"
region = "-"
currency = "USD"
read = "2026-11-27"
[sources]
made = { title = "made for the test", url = "", date = "2026-11-27" }
[[offer]]
name = "iops"
profile = "iops-vol.toml"
source = "made"
price.capacity_gb = { month = 0.10 }
price.iops = { month = 0.01, free = 500 }
[[offer]]
name = "tput"
profile = "tput-vol.toml"
source = "made"
price.capacity_gb = { month = 0.05 }
price.mb_s = { month = 0.02, free = 50 }
'''


@pytest.fixture(scope="module")
def made(module_shm_dir, tmp_path_factory):
    """`big` (60 MB) scanned 4 times, 400 single-row inserts each committed: on memory, traced."""
    work = tmp_path_factory.mktemp("volumes")
    (work / "setup.sql").write_text(
        "CREATE TABLE big (id int, pad text);\n"
        "INSERT INTO big SELECT g, repeat('x', 900) FROM generate_series(1, 60000) g;\n"
        "CREATE TABLE log (id serial, note text);\n")
    (work / "run.sql").write_text("".join("SELECT count(*) FROM big;\n" + "".join(
        f"INSERT INTO log (note) VALUES ('n{i}-{j}');\n" for j in range(100)) for i in range(4)))
    (work / "iops-vol.toml").write_text(IOPS_VOL)
    (work / "tput-vol.toml").write_text(TPUT_VOL)
    (work / "handmade.toml").write_text(CATALOG)
    out = work / "runs"
    dbtier("run", "sql", "--setup", str(work / "setup.sql"), "--run", str(work / "run.sql"), "-d", "data=ram-san",
           "--trace", "-q", "--workspace", str(module_shm_dir), "-o", str(out), check=True)
    return work, next(out.glob("sql-*")), module_shm_dir


def advised(made, tmp_path, *args) -> dict:
    work, run, ws = made
    path = tmp_path / "a.json"
    proc = dbtier("advise", str(run), "--catalog", str(work / "handmade.toml"), *args, "-o", str(tmp_path), "--json",
                  str(path), "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    return json.loads(path.read_text())


def best_at_most(stderr: str) -> float:
    """The best elapsed the refusal printed, as an upper bound: the figure is rounded, so the best may be
    up to half its last digit above it, and a target a few % above the rounded figure could otherwise sit
    within the predictor's measured error of the true best (0.3% for 3% over: a failed CI run)."""
    printed = re.search(r"the best predicted: elapsed ([0-9.]+) s", stderr).group(1)
    return float(printed) + 0.5 * 10 ** -len(printed.partition(".")[2])


def test_the_wal_gets_iops_and_the_scans_throughput(made, tmp_path):
    """Asked for the best the catalogue reaches (within 3%), the advice splits the run: the WAL on the
    IOPS volume, provisioned above its baseline, as small as sold; the table on the throughput volume,
    provisioned above its baseline. Every answer named was predicted whole."""
    work, run, ws = made
    proc = dbtier("advise", str(run), "--catalog", str(work / "handmade.toml"), "--target", "elapsed<=0.01s",
                  "--volumes", "2", "-o", str(tmp_path), "--workspace", str(ws))
    assert proc.returncode == 2 and "no layout of catalogue handmade meets it at any price searched" in proc.stderr
    best = best_at_most(proc.stderr)
    doc = advised(made, tmp_path, "--target", f"elapsed<={best * 1.03:.3f}s", "--volumes", "2")
    rec = doc["recommended"]
    by_part = {p: v for v in rec["volumes"] for p in v["parts"]}
    assert by_part["wal"]["offer"] == "iops" and by_part["data"]["offer"] == "tput", rec
    assert by_part["wal"]["name"] == "wal" and by_part["wal"]["spec"].endswith("{capacity_gb=1,iops=%s}" % re.search(
        r"iops=(\d+)", by_part["wal"]["spec"]).group(1))
    assert int(re.search(r"iops=(\d+)", by_part["wal"]["spec"]).group(1)) > 500
    assert float(re.search(r"mb_s=([0-9.]+)", by_part["data"]["spec"]).group(1)) > 50
    # the run's own device was named data: the new volume for the data is new_data
    assert rec["met"] and rec["value"] <= best * 1.03 and rec["place"] == "data=new_data,wal=wal"
    # the live figure it likely stands for, from the predictor's measured error, and its risk of missing
    lo, hi = rec["interval"]
    assert lo < rec["value"] < hi and rec["risk"] <= 0.10 and re.search(r"\(live, likely [0-9.]+ s to [0-9.]+ s;", doc["finding"])
    assert doc["error"]["figure"] == "elapsed" and doc["error"]["cases"] >= 10
    assert rec["cost"] == pytest.approx(sum(v["monthly"] for v in rec["volumes"]))
    assert doc["search"]["predicted_whole"] >= 1 and doc["search"]["predictions"] > doc["search"]["predicted_whole"]
    # every answer listed meets the target and none is cheaper than the advice
    assert all(a["met"] and a["cost"] >= rec["cost"] - 1e-9 for a in doc["alternatives"])
    # the migration: two tablespaces; the database's default (the table and the catalogs) moved to
    # data in one move with nobody connected; the WAL's move said in shell steps, the server stopped
    (sql,) = tmp_path.glob("advise-sql-*/migration.sql")
    text = sql.read_text()
    assert "CREATE TABLESPACE dev_new_data LOCATION" in text and "CREATE TABLESPACE dev_wal LOCATION" not in text
    assert 'ALTER DATABASE :"target_db" SET TABLESPACE dev_new_data;' in text and "ln -s /mnt/wal/pg_wal" in text
    (move,) = doc["migration"]["moves"]
    assert move["kind"] == "database" and move["bytes"] > 60e6
    # the page: the cost against performance chart, every answer predicted whole on it
    page = (sql.parent / "report.html").read_text()
    assert "what each monthly price buys" in page and page.count("<svg") == 1
    assert len(doc["search"]["answers"]) == doc["search"]["predicted_whole"]
    # the advice's provisioning bisected down from its ladder's doubling step: a cheaper provisioning
    # of it was predicted whole, and missed the target (or its risk)
    cheaper = [a for a in doc["search"]["answers"] if a["cost"] < rec["cost"] - 1e-9]
    assert cheaper and not any(a["met"] and a["risk"] <= doc["max_risk"] for a in cheaper), cheaper


def test_a_loose_target_is_met_by_one_cheap_volume_verified_live(made, tmp_path):
    """Three times what the recorded run took on memory: one volume, the cheapest that does. --verify 1
    runs it live on its volume: measured beside predicted (the replay of this run predicts within 10%
    where its devices set the pace; 20% allowed), in the document and the page."""
    work, run, ws = made
    recorded = json.loads((run / "result.json").read_text())["elapsed_s"]

    def attempt():
        for old in tmp_path.glob("*"):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        return advised(made, tmp_path, "--target", f"elapsed<={recorded * 3:.3f}s", "--verify", "1")

    def check(doc):
        rec = doc["recommended"]
        assert rec["met"] and len(rec["volumes"]) == 1
        assert rec["cost"] == min([rec["cost"], *(a["cost"] for a in doc["alternatives"])])
        (v,) = doc["verify"]
        assert v["label"] == "advised" and v["devices"] == rec["devices"] and v["met"]
        assert v["measured"] == pytest.approx(v["predicted"], rel=0.20), v
        assert (tmp_path / v["run_dir"].rsplit("/", 1)[1] / "result.json").is_file()
    retry_while_host_steals(attempt, check)
    assert "Verified: run live" in (next(tmp_path.glob("advise-*")) / "report.html").read_text()


def test_a_target_met_only_at_a_greater_risk_is_said_so(made, tmp_path):
    """A target 1% above the best the catalogue reaches: predicted met, but missed under more of the
    predictor's measured errors than --risk allows (its negative errors, down to -5.8%): the advice is
    the least risky, and says to give --risk; with --risk above its risk, no caveat (and the answer, now
    within the risk, bisected down to the least provisioning that stays within it)."""
    work, run, ws = made
    proc = dbtier("advise", str(run), "--catalog", str(work / "handmade.toml"), "--target", "elapsed<=0.01s",
                  "--volumes", "2", "-o", str(tmp_path), "--workspace", str(ws))
    best = best_at_most(proc.stderr)
    target = f"elapsed<={best * 1.01:.4f}s"
    doc = advised(made, tmp_path, "--target", target, "--volumes", "2")
    rec = doc["recommended"]
    assert rec["met"] and 0.10 < rec["risk"] < 0.5, rec
    assert f"--risk {rec['risk']:.2f} to accept this one" in doc["finding"]
    accepted = advised(made, tmp_path, "--target", target, "--volumes", "2", "--risk", f"{rec['risk'] + 0.01:.2f}")
    got = accepted["recommended"]
    assert got["met"] and got["cost"] <= rec["cost"] and got["risk"] <= accepted["max_risk"], got
    assert "--risk" not in accepted["finding"] and accepted["max_risk"] > rec["risk"]


def test_under_a_cost_the_best_figure(made, tmp_path):
    doc = advised(made, tmp_path, "--max-cost", "5")
    assert doc["recommended"]["cost"] <= 5 and doc["finding"].startswith("The best at or under $5.00 a month")
    assert all(a["cost"] <= 5 for a in doc["alternatives"])


@pytest.mark.parametrize("args, message", [
    (["--target", "p99<=20ms"], "the run has no transactions whose latency was recorded"),
    (["--target", "tps>=100"], "the run has no tps"),
    (["--target", "fast"], "--target 'fast': give a figure and a bound"),
    (["--target", "tps<=100"], "tps is a rate: ask for at least (>=)"),
    (["--target", "elapsed>=1s"], "elapsed is a time: ask for at most (<=)"),
    (["--target", "elapsed<=1s", "--fast", "ssd=ssd-sata-mlc"], "--catalog chooses the volumes itself"),
    ([], "give --target"),
    (["--max-cost", "-3"], "--max-cost -3: give the most to spend a month, above 0"),
    (["--target", "elapsed<=1s", "--volumes", "9"], "--volumes 9: from 1 to 4"),
    (["--target", "elapsed<=1s", "--duration", "soon"], "--duration 'soon': a length of time such as 24h"),
    (["--target", "elapsed<=1s", "--risk", "1.5"], "--risk 1.5: the share of the predictor's measured errors"),
])
def test_bad_questions_are_one_line(made, tmp_path, args, message):
    work, run, ws = made
    proc = dbtier("advise", str(run), "--catalog", str(work / "handmade.toml"), *args, "-o", str(tmp_path),
                  "--workspace", str(ws))
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not list(tmp_path.glob("advise-*"))


def test_targets_and_durations_parse():
    assert volumes.parse_target("p99[payment]<=20ms") == volumes.Target("p99", 20.0, "payment", "p99[payment]<=20ms")
    assert volumes.parse_target("elapsed<=2min").value == 120 and volumes.parse_target("tps>=500").higher
    assert volumes.parse_target("p99<=0.5s").value == 500
    assert volumes.parse_duration("24h") == 86400 and volumes.parse_duration("90min") == 5400
    with pytest.raises(UserError, match="only p99 is per script"):
        volumes.parse_target("tps[x]>=5")


def test_layouts_are_every_split_on_at_most_n_volumes():
    three = volumes.layouts(["data", "indexes", "wal"], 3)
    assert len(three) == 5 and all("data" in lay[0] for lay in three)
    assert len(volumes.layouts(["data", "indexes", "wal", "temp"], 2)) == 8
    assert volumes.layouts(["data", "wal"], 1) == [(frozenset({"data", "wal"}),)]


def test_prices_as_vendors_make_them():
    aws = catalog.load("aws")
    gp3, io2 = aws.offer("gp3"), aws.offer("io2")
    assert gp3.monthly({"capacity_gb": 100, "iops": 6000, "mb_s": 250}) == pytest.approx(8 + 15 + 5)
    # io2: $0.065 up to 32,000 IOPS, $0.0455 to 64,000, $0.032 beyond
    assert io2.monthly({"capacity_gb": 100, "iops": 70000}) == pytest.approx(12.5 + 32000 * 0.065 + 32000 * 0.0455
                                                                             + 6000 * 0.032)
    nvme = catalog.load("onprem").offer("nvme-plp")
    assert nvme.monthly({"capacity_gb": 600}) == pytest.approx(600 * 0.15 / 60)
    assert catalog.load("azure").offer("p20").monthly({}) == pytest.approx(73.22)


@pytest.mark.parametrize("body, message", [
    ('[[offer]]\nname = "x"\nprofile = "ebs-gp3"\nprice.capacity_gb = { month = -0.08 }\n', "is negative"),
    ('[[offer]]\nname = "x"\nprofile = "ebs-gp3"\n', "no price; give price.capacity_gb"),
    ('[[offer]]\nname = "x"\nprofile = "ebs-gp9"\nprice.capacity_gb = { month = 1 }\n', "unknown device profile"),
    ('[[offer]]\nname = "x"\nprofile = "ebs-gp3"\nprice.rpm = { month = 1 }\n', "price.rpm: ebs-gp3 is priced by"),
    ('[[offer]]\nname = "x"\nprofile = "azure-p20"\nprice.capacity_gb = { month = 1 }\n', "is priced by volume"),
    ('[[offer]]\nname = "x"\nprofile = "ebs-gp3"\nsource = "nowhere"\nprice.capacity_gb = { month = 1 }\n',
     "source 'nowhere' is not in the catalogue's [sources]"),
    ('[[offer]]\nname = "x"\nprofile = "ebs-io2-64k"\nprice.iops = { tiers = [[100, 0.1]] }\n', "tiers start at 0"),
    ('offer = 3\n', "offers are [[offer]] tables"),
    ('', "no [[offer]]"),
    ('extends = "mars"\n', "extends = 'mars': give a shipped catalogue"),
    ('colour = "red"\n', "unknown key 'colour'"),
])
def test_a_bad_catalogue_is_one_line(tmp_path, body, message):
    path = tmp_path / "mine.toml"
    path.write_text(body)
    with pytest.raises(UserError) as exc:
        catalog.load(str(path))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_catalogue_of_ones_own_extends_a_shipped_one(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('extends = "aws"\nregion = "eu-west-1"\n[[offer]]\nname = "gp3"\nprofile = "ebs-gp3"\n'
                    'price.capacity_gb = { month = 0.088 }\n')
    mine = catalog.load(str(path))
    assert mine.region == "eu-west-1" and set(mine.offers) == {"gp3", "gp2", "io2", "st1"}
    assert mine.offer("gp3").monthly({"capacity_gb": 10, "iops": 3000, "mb_s": 125}) == pytest.approx(0.88)


def test_the_catalog_command_lists_and_shows():
    proc = dbtier("catalog", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    names = {c["name"] for c in json.loads(proc.stdout)["catalogs"]}
    assert names == {"aws", "azure", "gcp", "onprem"}
    proc = dbtier("catalog", "gcp", "--json", "-")
    offers = {o["name"]: o for o in json.loads(proc.stdout)["offers"]}
    assert offers["hyperdisk-balanced"]["unpriced"] and offers["pd-ssd"]["price"] == "$0.17/GiB-month"
    proc = dbtier("catalog", "aws")
    assert proc.returncode == 0 and "gp3" in proc.stdout and "saisci.com" in proc.stdout
    proc = dbtier("catalog", "ibm")
    assert proc.returncode == 2 and "unknown catalogue 'ibm'" in proc.stderr


def day_of_this_load(made, tmp_path, offer: str, profile: str, unit: str, credits: str) -> tuple[int, float, float, int]:
    """advise --duration 24h on a catalogue of one offer: its volume's size in GiB, and from the note
    on its burst, the demand, how long the credits last (s) and the baseline after."""
    work, run, ws = made
    (work / f"{offer}only.toml").write_text(f'name = "{offer}only"\n[[offer]]\nname = "{offer}"\nprofile = "{profile}"\n'
                                            'price.capacity_gb = { month = 0.10 }\n')
    path = tmp_path / "a.json"
    proc = dbtier("advise", str(run), "--catalog", str(work / f"{offer}only.toml"), "--target", "elapsed<=3600s",
                  "--volumes", "1", "--duration", "24h", "-o", str(tmp_path), "--json", str(path), "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(path.read_text())
    assert "was judged with its burst credits spent" in " ".join(doc["notes"])
    (vol,) = doc["recommended"]["volumes"]
    note = next(n for n in doc["notes"] if n.startswith(vol["name"]))
    m = re.search(rf": ([0-9,]+) {unit} for ([0-9.,]+) (s|minutes|hours), then ([0-9,]+): .* its {credits} spent", note)
    assert m, note
    lasts = float(m.group(2).replace(",", "")) * {"s": 1, "minutes": 60, "hours": 3600}[m.group(3)]
    return (int(re.search(r"capacity_gb=(\d+)", vol["spec"]).group(1)), float(m.group(1).replace(",", "")), lasts,
            int(m.group(4).replace(",", "")))


def test_a_day_of_this_load_on_gp2_spends_its_credits(made, tmp_path):
    """--duration 24h on a catalogue of gp2 alone: the search judges gp2 with its credits spent (its
    3-IOPS-per-GiB baseline), and the advice says how long the burst would last at the run's demand,
    AWS's formula: 5.4 million credits / (the demand, at most 3,000, less the baseline)."""
    gib, demand, lasts, after = day_of_this_load(made, tmp_path, "gp2", "ebs-gp2-100g", "IOPS", "credits")
    base = max(100, 3 * gib)
    assert after == base
    assert lasts == pytest.approx(5.4e6 / (min(demand, 3000) - base), rel=0.05)  # as printed, rounded


def test_a_day_of_scans_on_st1_spends_its_throughput_credits(made, tmp_path):
    """st1 bursts in throughput, not IOPS: at its least size (125 GiB) a 40-MiB/s-per-TiB baseline and
    a 250-MiB/s-per-TiB burst from a bucket of 1 TiB of credits per TiB. The run's scans ask more than
    the baseline, so the advice says how long the throughput credits last: the bucket over the
    demand (at most the burst) less the baseline."""
    gib, demand, lasts, after = day_of_this_load(made, tmp_path, "st1", "ebs-st1", "MB/s", "throughput credits")
    mib = 1.048576  # MB per MiB
    base, burst, bucket = 40 * gib / 1024 * mib, 250 * gib / 1024 * mib, gib * 1073.741824
    assert base < demand <= burst + 0.5 and after == round(base)
    assert lasts == pytest.approx(bucket / (demand - base), rel=0.05)  # as printed, rounded


def _p99_as_recorded_and_device_free(run, workspace) -> tuple[float, float]:
    """The run's p99 predicted on its own layout, and with every file on a device that takes no time:
    what a faster volume can take off it at most."""
    from dbtier.prediction import recording, scenario
    from dbtier.prediction.replay import Predictor
    from dbtier.workspace import Workspace

    rec = recording.load(run)
    predictor = Predictor(rec, Workspace.open(workspace))
    target = volumes.parse_target("p99<=1ms")
    same = predictor.predict(scenario.build(rec, (), (), None, 1.0), figures=False, latency=True)
    free = predictor.predict(scenario.build(rec, ("free=ram-san{latency_us=1,interface_mb_s=100000}",),
                                            ("data=free,indexes=free,wal=free",), None, 1.0),
                             figures=False, latency=True)
    return volumes.figure(target, same.phases), volumes.figure(target, free.phases)


def test_a_p99_target_on_a_pgbench_run_lowers_the_latency(module_shm_dir, tmp_path):
    """pgbench on a gp3 at its baseline judges layouts by tps; a p99 target is a time, lower the
    better: the search climbs io2's IOPS (its latency below gp3's), and a target just above the best it
    can predict is met, by io2, well under the recorded layout's own predicted p99. The bound is the
    replay's, not the live run's: a 3 s pgbench's live p99 on a busy host moved 16.8 to 20.0 ms between
    runs, so a target taken from it asked for more or less than the replay could reach. A recording whose
    p99 no device could lower (the host stalled the transactions themselves: 26.8 ms predicted as
    recorded, io2's best 26.3, once in CI) is made again."""
    for attempt in range(3):
        out = tmp_path / f"rec{attempt}"
        dbtier("run", "pgbench", "-i", "-s", "2", "-c", "4", "-T", "3", "-d", "vol=ebs-gp3", "--trace", "-q",
               "--workspace", str(module_shm_dir), "-o", str(out), check=True)
        (run,) = out.glob("pgbench-*")
        as_recorded, device_free = _p99_as_recorded_and_device_free(run, module_shm_dir)
        if device_free < 0.9 * as_recorded:
            break
    else:
        pytest.skip(f"in 3 recordings the p99 was not the device's: {as_recorded:.1f} ms predicted as recorded, "
                    f"{device_free:.1f} ms with every I/O free (a host that stalled the transactions itself)")
    proc = dbtier("advise", str(run), "--catalog", "aws", "--target", "p99<=0.01ms", "--volumes", "1",
                  "-o", str(tmp_path), "--workspace", str(module_shm_dir))
    assert proc.returncode == 2 and "the best predicted: p99" in proc.stderr
    best = float(re.search(r"the best predicted: p99 ([0-9.]+) ms", proc.stderr).group(1))
    doc_path = tmp_path / "a.json"
    proc = dbtier("advise", str(run), "--catalog", "aws", "--target", f"p99<={1.02 * best:.3f}ms", "--volumes", "1",
                  "-o", str(tmp_path), "--workspace", str(module_shm_dir), "--json", str(doc_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(doc_path.read_text())
    rec = doc["recommended"]
    assert rec["met"] and rec["value"] <= 1.02 * best and doc["higher_is_better"] is False
    # measured: io2's best 14.2 ms against the gp3 as recorded 16.7 ms predicted (0.85)
    assert rec["value"] < 0.95 * doc["current"]["value"], (rec, doc["current"])
    assert rec["volumes"][0]["offer"] == "io2", rec
