"""`dbtier devices`: listing, showing, JSON, and clear errors."""

import json

from tests.conftest import dbtier, dbtier_in_terminal, shown_whole


def test_list_names_every_profile():
    out = dbtier("devices", check=True).stdout
    for name in ("hdd-sata-7200", "hdd-sas-15k", "ssd-sata-mlc", "pcie-flash-mlc", "pcie-flash-slc", "ram-san", "nvme-gen4"):
        assert name in out


def test_the_list_fits_80_columns_with_every_figure_whole():
    rc, shown = dbtier_in_terminal("devices", columns=80)
    assert rc == 0 and max(len(line) for line in shown.splitlines()) <= 80
    for name in ("hdd-sata-7200", "disksim-cheetah4lp", "hdd-sas-15k-md3000", "nvme-gen4"):
        doc = json.loads(dbtier("devices", "show", name, "--json", "-", check=True).stdout)
        mean = doc["expected_qd1"][0]["mean_us"]
        assert name in shown and shown_whole(shown, f"{mean:,.0f}")


def test_show_json_has_params_and_expectations():
    doc = json.loads(dbtier("devices", "show", "ssd-sata-mlc", "--json", "-", check=True).stdout)
    assert doc["schema_version"] == 2 and doc["kind"] == "profile" and doc["device_kind"] == "ssd"
    assert doc["params"]["channels"]["value"] == 8
    pats = {e["pattern"]: e for e in doc["expected_qd1"]}
    assert set(pats) == {"random read 8 KiB", "random write 8 KiB", "sequential read 8 KiB", "sequential write 8 KiB"}
    assert abs(pats["random read 8 KiB"]["mean_us"] - 216.8) < 0.5


def test_show_table():
    out = dbtier("devices", "show", "hdd-sata-7200", check=True).stdout
    assert "seek_avg_read_ms" in out and "expected at QD1" in out and "random read 8 KiB" in out


def test_unknown_profile_is_one_line_and_status_2():
    proc = dbtier("devices", "show", "hdd-sata-720")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "unknown device profile 'hdd-sata-720'" in proc.stderr and "did you mean" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_teaches():
    out = dbtier("--help", check=True).stdout
    assert "dbtier devices" in out and "dbtier exec" in out
    for cmd in ("devices", "exec", "trace"):
        assert dbtier(cmd, "--help", check=True).stdout.strip()


def test_show_json_takes_a_path_as_every_json_does(tmp_path):
    """--json PATH writes the file (as run's, predict's and the rest's); '-' prints it instead."""
    proc = dbtier("devices", "show", "hdd-sata-7200", "--json", str(tmp_path / "p.json"), check=True)
    assert json.loads((tmp_path / "p.json").read_text())["profile"] == "hdd-sata-7200"
    assert "parameters" in proc.stdout  # the tables are printed as well
