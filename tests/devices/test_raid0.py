"""RAID 0 arrays (NxPROFILE): the shorthand, its errors, and striping seen through the interposer:
a sequential stream reads from every member at once."""

import json

import pytest

from dbtier.devices.profile import load
from dbtier.errors import UserError
from tests.conftest import dbtier, retry_while_host_steals


def test_shorthand_makes_an_array_of_the_member_profile():
    p = load("6xhdd-sata-750")
    assert p.kind == "hdd" and p.params["members"] == 6 and p.params["stripe_kib"] == 64
    assert p.params["rpm"] == load("hdd-sata-750").params["rpm"]
    assert load("12xhdd-sas-15k@256k").params["stripe_kib"] == 256
    assert load("4xssd-sata-mlc@1m").params["stripe_kib"] == 1024


@pytest.mark.parametrize("spec, message", [
    ("1xhdd-sata-750", "2 to 16 members"),
    ("17xhdd-sata-750", "2 to 16 members"),
    ("4xreal", "cannot be striped"),
    ("4xhdd-sata-750@2k", "the stripe is 4k to 64m"),
    ("4xnosuch", "unknown device profile"),
])
def test_bad_arrays_are_refused(spec, message):
    with pytest.raises(UserError, match=message):
        load(spec)


def test_sequential_reads_stream_from_every_member(tmp_path):
    """1 MiB sequential reads at queue depth 1: each request is 16 stripe units, four per member,
    read by the four members at once, so the array streams at several times one drive's rate."""
    def attempt():
        rates = {}
        for spec in ("hdd-sata-750", "4xhdd-sata-750"):
            out = tmp_path / f"{spec}.json"
            dbtier("iobench", "-d", f"d={spec}", "--rw", "read", "--bs", "1m", "--runtime", "1", "--size", "128m",
                   "--json", str(out), "-q", check=True)
            rates[spec] = json.loads(out.read_text())["results"][0]["mb_s"]
        return rates

    def check(rates):
        assert rates["4xhdd-sata-750"] > 3 * rates["hdd-sata-750"], rates

    retry_while_host_steals(attempt, check)
