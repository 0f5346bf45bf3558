"""A real MariaDB server on emulated devices: installed without root from the distribution's packages
into a clean cache, its files laid over two devices (data, undo and temp on one, the redo log on the
other), its data pages written through libaio (the interposer's asynchronous I/O), and each device's
bytes as InnoDB counts them (Innodb_data_written, Innodb_os_log_written) within 2%."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from dbtier.errors import UserError

pytestmark = pytest.mark.skipif(shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None,
                                reason="MariaDB comes from the distribution's packages (apt-get, dpkg-deb)")


@pytest.fixture(scope="module")
def install(tmp_path_factory):
    """The packages fetched into a clean cache of this module's own."""
    from dbtier.engines.mariadb import binaries

    cache = tmp_path_factory.mktemp("cache")
    os.chmod(cache, 0o755)
    old = os.environ.get(binaries.CACHE_ENV)
    os.environ[binaries.CACHE_ENV] = str(cache)
    try:
        lines = []
        found = binaries.find(say=lines.append)
        assert any("fetching MariaDB 10.11" in ln for ln in lines), lines
        yield found
    finally:
        if old is None:
            os.environ.pop(binaries.CACHE_ENV)
        else:
            os.environ[binaries.CACHE_ENV] = old


@pytest.fixture
def off_dev_shm(tmp_path):
    """A folder on a file system other than /dev/shm's (InnoDB maps a redo log there into memory): a
    tmpfs of the test's own as root, else the test's folder if it is elsewhere."""
    if os.geteuid() == 0:  # where the lab's user can pass (pytest's own folders are root's alone)
        mount = Path(tempfile.mkdtemp(prefix="dbtier-mariadb-"))
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1g,mode=755", "tmpfs", str(mount)], check=True)
        try:
            yield mount
        finally:
            subprocess.run(["umount", "-l", str(mount)], check=False)
            os.rmdir(mount)
    else:
        if os.stat(tmp_path).st_dev == os.stat("/dev/shm").st_dev:
            pytest.skip("the test's folder is on /dev/shm, and only root may mount a tmpfs of its own")
        yield tmp_path


def test_the_install_is_the_pinned_series_and_reports_itself(install):
    assert install.version.startswith("10.11.")
    described = install.describe()
    names = {p["package"] for p in described["packages"]}
    assert {"mariadb-server-core", "mariadb-client-core", "mariadb-client", "mariadb-backup", "liburing2"} <= names
    assert all(len(p["sha256"]) == 64 for p in described["packages"])


def test_another_install_named_by_a_folder_that_lacks_one_is_one_line(tmp_path):
    from dbtier.engines.mariadb import binaries

    with pytest.raises(UserError, match="--mariadb-bin .*: no sbin/mariadbd"):
        binaries.find(tmp_path)
    with pytest.raises(UserError, match="not a directory"):
        binaries.find(tmp_path / "nowhere")


def test_a_redo_log_on_dev_shm_is_refused(install, shm_dir):
    from dbtier.engines import osuser
    from dbtier.engines.mariadb.server import Folders, Server

    folders = Folders(*(shm_dir / n for n in ("data", "log", "undo", "temp", "run")))
    for f in folders.__dict__.values():
        f.mkdir()
    with pytest.raises(UserError, match="maps the log into memory"):
        Server(install, osuser.me(), folders, dict(os.environ))


def test_innodb_on_two_emulated_devices_through_libaio(install, off_dev_shm):
    from dbtier.devices import native
    from dbtier.devices.profile import load
    from dbtier.devices.session import Device, Session
    from dbtier.engines import osuser
    from dbtier.engines.mariadb.server import Folders, Server
    from dbtier.measure import trace

    lease = osuser.lease()
    user = lease.user
    server = None
    try:
        def folder(path: Path) -> Path:
            path.mkdir(parents=True)
            user.give(path)
            os.chmod(path, 0o700)
            return path

        data_dev, log_dev = folder(off_dev_shm / "data-dev"), folder(off_dev_shm / "log-dev")
        folders = Folders(data=folder(data_dev / "data"), log=folder(log_dev / "log"), undo=folder(data_dev / "undo"),
                          temp=folder(data_dev / "temp"), run=folder(off_dev_shm / "run"))
        session = Session([Device("data", data_dev, load("ssd-sata-mlc")), Device("log", log_dev, load("ssd-sata-mlc"))],
                          off_dev_shm / "iotap", trace_dir=folder(off_dev_shm / "trace"))
        session.create()
        if user.switches:
            os.chown(session.state_path, user.uid, user.gid)
        runtime = off_dev_shm / "runtime"
        env = session.env()
        lib = native.iotap_path()
        env["LD_PRELOAD"] = str(osuser.reachable_copy(lib.parent, [lib.name], user, runtime) / lib.name)
        placed = install.moved(osuser.reachable_copy(*install.layout(), user, runtime))
        server = Server(placed, user, folders, env, {"innodb-buffer-pool-size": "64M", "innodb-flush-method": "O_DIRECT"})
        server.install_db()
        server.start()
        before, at = server.status(), session.snapshot()
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE d")
            cur.execute("CREATE TABLE d.t (id INT PRIMARY KEY, pad CHAR(200)) ENGINE=InnoDB")
            for k in range(40):
                cur.execute("INSERT INTO d.t VALUES " + ",".join(f"({k * 1000 + i}, REPEAT('x', 200))" for i in range(1000)))
            cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")  # the page cleaners write every page
            for _ in range(300):
                cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
                if int(cur.fetchone()[1]) == 0:
                    break
                time.sleep(0.1)
            else:
                pytest.fail("the page cleaners left dirty pages after 30 s")
        after, then = server.status(), session.snapshot()
        wrote = {d["name"]: d["write_bytes"] - at["devices"][i]["write_bytes"] for i, d in enumerate(then["devices"])}
        data_written = after["Innodb_data_written"] - before["Innodb_data_written"]
        log_written = after["Innodb_os_log_written"] - before["Innodb_os_log_written"]
        assert data_written > 8 << 20 and log_written > 8 << 20
        # each device's bytes as InnoDB counts its own: pages (and the doublewrite buffer), and the redo log
        assert wrote["data"] == pytest.approx(data_written, rel=0.02), (wrote, data_written)
        assert wrote["log"] == pytest.approx(log_written, rel=0.02), (wrote, log_written)
        assert all(v["count"] == 0 for v in then["bypasses"].values()), then["bypasses"]
        server.stop()
        server = None
        # the page writes went through libaio: asynchronous calls on the data device's files
        recs = trace.read_records(off_dev_shm / "trace", in_order=True)
        calls = trace.calls(recs)
        aio = calls[(calls["flags"] & trace.FLAGS["async"]) != 0]
        assert np.count_nonzero(aio["op"] == trace.WRITE) > 500
        assert set(np.unique(aio["dev"])) == {0}  # the redo log is written synchronously, on its own device
    finally:
        if server is not None:
            server.stop()
        lease.release()
