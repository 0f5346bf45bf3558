"""--settings-from FILE on MariaDB: a "production" server's own variables, as its client prints them
(`mariadb --batch -e "SHOW GLOBAL VARIABLES"`), applied in the lab where they shape InnoDB's I/O and the
plans (the buffer pool as --cache and innodb_flush_method as --io-mode unless given, --set winning, the
lab's own never taken), and the report showing the run's variables against MariaDB's defaults and
production's; a file that is not one refused in one line."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import assert_refused_in_one_line, dbtier

pytestmark = pytest.mark.skipif(shutil.which("apt-get") is None or os.geteuid() != 0,
                                reason="MariaDB's packages come through apt-get; its lab on a tmpfs of its own needs root")

PRODUCTION = {"innodb-io-capacity": "1234", "innodb-flush-log-at-trx-commit": "2", "sort-buffer-size": "1048576",
              "innodb-log-file-size": "50331648"}


@pytest.fixture(scope="module")
def variables(module_shm_dir, tmp_path_factory) -> Path:
    """A real MariaDB server's variables, as its own client prints them."""
    from dbtier.devices.spec import parse_all
    from dbtier.engines.mariadb import placement
    from dbtier.engines.mariadb.lab import Lab, LabOptions

    path = tmp_path_factory.mktemp("prod") / "variables.tsv"
    devices = parse_all(["d=ram-san"])
    with Lab(devices, placement.parse([], ["d"]),
             LabOptions(workspace=module_shm_dir, cache_bytes=24 << 20, io_mode="buffered", sets=PRODUCTION),
             say=lambda _line: None) as lab:
        server = lab.server
        argv = [str(server.install.exe("mariadb")), "--no-defaults", f"--socket={server.socket}",
                f"--user={pwd.getpwuid(os.geteuid()).pw_name}", "--batch", "-e", "SHOW GLOBAL VARIABLES"]
        with open(path, "wb") as out:
            subprocess.run(argv, stdout=out, check=True, env=server.install.env({"PATH": "/usr/bin:/bin"}))
    return path


def test_production_variables_are_applied_and_shown(variables, module_shm_dir, tmp_path):
    (tmp_path / "q.sql").write_text("SELECT @@innodb_io_capacity, @@innodb_flush_log_at_trx_commit;\n")
    out = tmp_path / "out"
    out.mkdir()
    proc = dbtier("run", "sql", "--engine", "mariadb", "--run", str(tmp_path / "q.sql"),
                  "--settings-from", str(variables), "--set", "sort_buffer_size=524288", "-d", "d=ssd-sata-mlc",
                  "--workspace", str(module_shm_dir), "-o", str(out), "--json", str(out / "r.json"), check=True)
    lab = json.loads((out / "r.json").read_text())["lab"]
    assert lab["cache_bytes"] == 24 << 20  # production's innodb_buffer_pool_size, --cache not given
    assert lab["io_mode"] == "buffered" and lab["innodb_flush_method"] == "fsync"  # production's, --io-mode not given
    assert lab["production"]["file"] == str(variables) and lab["production"]["server"]["version"].startswith("10.11.")
    applied = lab["production"]["applied"]
    assert applied["innodb-io-capacity"] == "1234" and applied["innodb-flush-log-at-trx-commit"] == "2"
    assert not {"socket", "datadir", "port", "innodb-buffer-pool-size", "innodb-flush-method",
                "innodb-log-file-size"} & applied.keys()
    rows = {r["setting"]: r for r in lab["settings_compared"]}
    assert rows["innodb_io_capacity"] == {"setting": "innodb_io_capacity", "run": "1234", "default": "200",
                                          "production": "1234", "from": "production"}
    assert rows["sort_buffer_size"]["run"] == "524288" and rows["sort_buffer_size"]["production"] == "1048576"
    assert rows["sort_buffer_size"]["from"] == "--set"
    assert rows["innodb_flush_method"] == {"setting": "innodb_flush_method", "run": "fsync", "default": "O_DIRECT",
                                           "production": "fsync", "from": "production"}
    assert rows["innodb_buffer_pool_size"]["run"] == str(24 << 20) and rows["innodb_buffer_pool_size"]["from"] == "production"
    assert rows["innodb_linux_aio"]["run"] == "aio" and rows["innodb_linux_aio"]["from"] == "the lab"
    # production's redo log size is not taken (InnoDB allocates it whole): the lab's own, told apart
    assert rows["innodb_log_file_size"]["production"] == "50331648" and rows["innodb_log_file_size"]["run"] != "50331648"
    assert "MariaDB's default" in proc.stdout and "1234" in proc.stdout
    (run_dir,) = out.glob("sql-*")
    assert "settings-from = " in (run_dir / "experiment.toml").read_text()
    assert "MariaDB&#39;s default" in (run_dir / "report.html").read_text()


def run_with(tmp_path: Path, text: str):
    """`dbtier run sql` of SELECT 1 on MariaDB with --settings-from a file of `text`: (the process, the
    file, the output folder)."""
    (tmp_path / "v.tsv").write_text(text)
    (tmp_path / "q.sql").write_text("SELECT 1;\n")
    out = tmp_path / "out"
    out.mkdir()
    proc = dbtier("run", "sql", "--engine", "mariadb", "--run", str(tmp_path / "q.sql"), "--settings-from",
                  str(tmp_path / "v.tsv"), "-d", "d=ram-san", "-o", str(out))
    return proc, tmp_path / "v.tsv", out


def test_a_flush_method_the_lab_cannot_run_needs_io_mode(variables, tmp_path):
    text = variables.read_text().replace("innodb_flush_method\tfsync", "innodb_flush_method\tO_DIRECT_NO_FSYNC")
    proc, _file, out = run_with(tmp_path, text)
    assert_refused_in_one_line(proc, "innodb_flush_method = O_DIRECT_NO_FSYNC is not one the lab runs", {"output": out})
    assert "give --io-mode" in proc.stderr


@pytest.mark.parametrize("text, message", [
    ("", "line 1 is not the header Variable_name<TAB>Value"),
    ('{"format": 1}', "line 1 is not the header"),
    ("Variable_name\tValue\nversion\t10.11.19-MariaDB\nno tab here\n", "line 3 is not a variable's name, a tab"),
    ("Variable_name\tValue\ninnodb_io_capacity\t200\n", "no version variable"),
    ("Variable_name\tValue\nversion\t10.11.19\ninnodb_io_capacity\t200; DROP\n",
     "innodb_io_capacity = '200; DROP' is not a value dbtier takes"),
    ("Variable_name\tValue\nversion\t10.11.19\ninnodb_buffer_pool_size\tlots\n",
     "innodb_buffer_pool_size = 'lots' is not a number of bytes"),
])
def test_a_bad_variables_file_is_one_line(text, message, tmp_path):
    proc, file, out = run_with(tmp_path, text)
    assert_refused_in_one_line(proc, f"--settings-from {file}: {message}", {"output": out})
