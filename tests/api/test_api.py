"""dbtier from Python: the commands' checks and messages, a run directory's tables, a traced run's
trace."""

import json

import pandas as pd
import pytest

import dbtier
from dbtier.errors import UserError


def test_a_bad_argument_raises_the_commands_message(tmp_path):
    with pytest.raises(UserError, match="nosuch"):
        dbtier.run("random-index", device="hdd=nosuch-profile", output=str(tmp_path))
    with pytest.raises(UserError, match="random-index has no option --colour"):
        dbtier.run("random-index", device="hdd=hdd-sata-7200", colour="red")
    with pytest.raises(UserError, match="no-such-workload"):
        dbtier.run("no-such-workload", device="hdd=hdd-sata-7200")
    assert not list(tmp_path.iterdir())  # refused before anything was made


def test_ctrl_c_is_a_keyboard_interrupt(monkeypatch, tmp_path):
    """Click turns Ctrl-C into its own Abort; Python callers get the KeyboardInterrupt they expect."""
    from dbtier.devices import spec

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(spec, "load", interrupted)  # while the command reads its --device profiles
    with pytest.raises(KeyboardInterrupt):
        dbtier.run("random-index", device="hdd=hdd-sata-7200", output=str(tmp_path))
    assert dbtier.UserError is UserError and dbtier.WorkloadError.__name__ == "WorkloadError"


def test_load_refuses_what_is_not_a_run_directory(tmp_path):
    with pytest.raises(UserError, match="holds no result.json"):
        dbtier.load(tmp_path)
    (tmp_path / "result.json").write_text("{")
    with pytest.raises(UserError, match="not valid JSON"):
        dbtier.load(tmp_path)
    (tmp_path / "result.json").write_text(json.dumps({"schema_version": 1, "kind": "run"}))
    with pytest.raises(UserError, match="older dbtier"):
        dbtier.load(tmp_path)
    (tmp_path / "result.json").write_text(json.dumps({"schema_version": 2, "kind": "nosuch", "results": []}))
    with pytest.raises(UserError, match="result.json"):
        dbtier.load(tmp_path)


def test_load_reads_a_prediction_and_an_advice(tmp_path, shm_dir):
    """A prediction (its --json) as two runs, recorded and predicted; an advice's placements as a table."""
    from tests.conftest import dbtier as cli

    cli("run", "random-index", "--rows", "300", "-d", "hdd=hdd-sata-7200", "--trace", "-q", "--workspace",
        str(shm_dir), "-o", str(tmp_path / "runs"), check=True)
    (run_dir,) = (tmp_path / "runs").iterdir()
    cli("predict", str(run_dir), "-d", "hdd=ssd-sata-mlc", "--json", str(tmp_path / "p.json"), "-q", "--workspace",
        str(shm_dir), check=True)
    pred = dbtier.load(tmp_path / "p.json")
    assert pred.kind == "prediction" and list(pred.runs["run"]) == ["recorded", "predicted"]
    recorded, predicted = pred.runs["elapsed_s"]
    assert predicted < recorded / 2  # random 8 KiB reads: the SSD's are many times faster
    assert set(pred.devices["run"]) == {"recorded", "predicted"}
    cli("advise", str(run_dir), "--fast", "ssd=ssd-sata-mlc", "--budget", "1GB", "-q", "--workspace", str(shm_dir),
        "-o", str(tmp_path / "advice"), check=True)
    advice = dbtier.load(next((tmp_path / "advice").glob("advise-*")))
    assert advice.kind == "advice" and advice.placements.loc[0, "rank"] == 1
    assert advice.placements.loc[0, "place"] == advice.doc["recommended"]["place"]
    # the same from Python, through the library (no command line)
    again = dbtier.predict(run_dir, device="hdd=ssd-sata-mlc", workspace=shm_dir)
    assert list(again.runs["run"]) == ["recorded", "predicted"]
    assert again.runs["elapsed_s"].iloc[1] == pytest.approx(predicted, rel=0.05)
    advised = dbtier.advise(run_dir, fast="ssd=ssd-sata-mlc", budget="1GB", workspace=shm_dir,
                            output=tmp_path / "advice2")
    assert advised.kind == "advice" and advised.doc["recommended"]["place"] == advice.doc["recommended"]["place"]


def test_a_traced_run_gives_its_trace_and_phases(tmp_path, shm_dir):
    result = dbtier.run("random-index", device="ssd=ssd-sata-mlc", rows=200, cache="8MB", trace=True,
                        workspace=str(shm_dir), output=str(tmp_path), json=str(tmp_path / "copy.json"))
    assert result.kind == "run" and result.path.parent == tmp_path
    trace = result.trace
    assert isinstance(trace, pd.DataFrame) and len(trace) > 0 and {"run", "device", "latency_us"} <= set(trace.columns)
    assert set(trace["device"]) == {"ssd"}
    phases = result.phases
    assert list(phases["phase"]) == ["run"] and phases.loc[0, "rate.lookups_per_s"] > 0
    objects = result.objects
    assert objects.loc[objects["object"] == "t_attribute_idx", "reads"].sum() > 0
    assert repr(result).startswith("<dbtier run ")
    # the --json copy names its run directory, but a path inside a document is never followed: the
    # copy is read as what it is, a document in its own folder (which holds no trace)
    copy = dbtier.load(tmp_path / "copy.json")
    assert copy.path == tmp_path and copy.doc["run_dir"] == str(result.path) and copy.trace.empty
    assert copy.runs.loc[0, "elapsed_s"] == result.runs.loc[0, "elapsed_s"]
