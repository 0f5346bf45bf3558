"""Server settings: the preset, sizes, --set, and the refusal of io_uring."""

import pytest

from dbtier.errors import UserError
from dbtier.engines.postgres.settings import parse_sets, server_settings
from dbtier.units import parse_size


def test_sizes():
    assert parse_size("32MB", "--cache") == 32 << 20
    assert parse_size("128kB", "--cache") == 128 << 10
    assert parse_size("100", "--cache") == 100 * 8192  # a bare number is pages, as in postgresql.conf
    with pytest.raises(UserError, match="expected a size"):
        parse_size("lots", "--cache")


def test_preset_forces_worker_io_and_direct_io():
    s = server_settings(32 << 20, "direct", "/tmp/s", {})
    assert s["io_method"] == "worker"
    assert s["debug_io_direct"] == "'data, wal'"
    assert s["listen_addresses"] == "''"
    assert s["shared_buffers"] == "32768kB"


@pytest.mark.parametrize("value", ["io_uring", "'io_uring'"])
def test_io_uring_is_refused(value):
    with pytest.raises(UserError, match="bypass the interposer"):
        parse_sets([f"io_method={value}"])


def test_sets_override_the_preset_and_quote_values():
    s = server_settings(1 << 20, "direct", "/tmp/s", parse_sets(["effective_io_concurrency=32",
                                                                  "io_method=sync", "work_mem=4MB",
                                                                  "search_path=a, b"]))
    assert s["effective_io_concurrency"] == "32"
    assert s["io_method"] == "sync"
    assert s["work_mem"] == "4MB"
    assert s["search_path"] == "'a, b'"
    for bad in ("novalue", "=1", "listen_addresses=*"):
        with pytest.raises(UserError):
            parse_sets([bad])
