"""--set for a MariaDB lab: any mariadbd option, with what the lab decides refused in one line before
anything is made: io_uring (its rings go around the interposer), networking, the files' places."""

from __future__ import annotations

import pytest

from dbtier.engines.mariadb import settings
from dbtier.errors import UserError


@pytest.mark.parametrize("text, message", [
    ("innodb_linux_aio=io_uring", "io_uring would go around the interposer"),
    ("innodb-linux-aio=auto", "dbtier runs innodb_linux_aio=aio"),
    ("port=3306", "never TCP"),
    ("bind_address=0.0.0.0", "never TCP"),
    ("skip_networking=0", "never TCP"),
    ("innodb_log_group_home_dir=/tmp", "--place log="),
    ("innodb-log-file-mmap=ON", "mapped into memory"),
    ("loose-performance-schema=OFF", "performance_schema"),
    ("ssl_cert=/x", "no TLS"),
    ("innodb_io_capacity", "expected NAME=VALUE"),
    ("=1", "expected NAME=VALUE"),
])
def test_what_the_lab_decides_is_refused(text, message):
    with pytest.raises(UserError, match=message):
        settings.parse_sets([text])


def test_any_other_option_is_the_servers():
    assert settings.parse_sets(["innodb_io_capacity=2000", "innodb-log-file-size=48M", "innodb_linux_aio=aio"]) == {
        "innodb-io-capacity": "2000", "innodb-log-file-size": "48M", "innodb-linux-aio": "aio"}
    # how InnoDB writes and what it caches are the run's options (--io-mode, --cache, --cache-state)
    for name, said in (("innodb_flush_method=O_DSYNC", "from --io-mode"), ("innodb_buffer_pool_size=1G", "from --cache"),
                       ("innodb_buffer_pool_load_at_startup=ON", "empty buffer pool")):
        with pytest.raises(UserError, match=said):
            settings.parse_sets([name])


def test_a_lab_refuses_them_before_anything_is_made(tmp_path):
    from dbtier.devices.spec import parse_all
    from dbtier.engines.mariadb import placement
    from dbtier.engines.mariadb.lab import Lab, LabOptions

    with pytest.raises(UserError, match="io_uring"):
        Lab(parse_all(["d=ram-san"]), placement.parse([], ["d"]),
            LabOptions(workspace=tmp_path, sets={"innodb_linux_aio": "io_uring"}))
    assert not list(tmp_path.iterdir())
