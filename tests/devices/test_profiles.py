"""Profiles: every packaged one loads and validates; bad ones are refused with a clear message."""

import pytest

from dbtier.devices import native, patterns, profile, sources
from dbtier.errors import UserError

REQUIRED = ["hdd-sata-7200", "hdd-sas-15k", "ssd-sata-mlc", "pcie-flash-mlc", "pcie-flash-slc", "ram-san", "nvme-gen4",
            "nvme-enterprise-plp", "optane-p5800x"]
#: every packaged profile with a model
MODELLED = [n for n in profile.names() if n != "real"]


def test_required_profiles_are_packaged():
    assert set(REQUIRED) <= set(profile.names())


@pytest.mark.parametrize("name", MODELLED)
def test_every_figure_says_where_it_comes_from(name):
    """Every parameter a packaged profile sets has its basis, and every source a basis names is in
    the registry (devices/sources.toml), with what it is and where to find it."""
    from importlib import resources
    import tomllib

    doc = tomllib.loads((resources.files("dbtier.devices") / "profiles" / f"{name}.toml").read_text())
    p = profile.load(name)
    assert set(doc["params"]) == set(p.basis), name
    reg = sources.registry()
    for key, text in p.basis.items():
        assert text.strip(), (name, key)
        for i in sources.ids(text):
            assert i in reg and reg[i]["title"] and reg[i]["where"], (name, key, i)
    for e in (p.provision or {}).values():
        assert e.source in reg, (name, e.key)


@pytest.mark.parametrize("name", profile.names())
def test_every_profile_names_its_era(name):
    assert profile.load(name).era in profile.ERAS or name == "real"


def test_option_table_comes_from_c():
    table = native.param_table()
    assert set(table) == {"real", "hdd", "ssd", "ram", "cloud"}
    hdd = {p["name"]: p for p in table["hdd"]["params"]}
    assert hdd["rpm"]["unit"] == "rev/min" and hdd["rpm"]["default"] == 7200


def test_user_profile_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('kind = "hdd"\nsummary = "slow disk"\n[params]\nrpm = 5400\nwrite_cache = false\n')
    p = profile.load(str(f))
    assert p.name == "mine" and p.params["rpm"] == 5400 and p.params["write_cache"] == 0
    assert p.params["seek_full_ms"] == 17  # default filled


@pytest.mark.parametrize(
    "text, message",
    [
        ('kind = "tape"\n', "'kind' must be one of"),
        ('kind = "hdd"\n[params]\nrmp = 5400\n', "did you mean 'rpm'"),
        ('kind = "hdd"\n[params]\nrpm = 100\n', "outside 3600..20000"),
        ('kind = "ssd"\n[params]\nchannels = "eight"\n', "must be a number"),
        ('kind = "hdd"\n[params\n', "not valid TOML"),
    ],
)
def test_bad_profiles_are_refused(tmp_path, text, message):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        profile.load(str(f))


def test_unknown_name_suggests():
    with pytest.raises(UserError, match="did you mean 'ssd-sata-mlc'"):
        profile.load("ssd-sata-mcl")


def test_expected_figures_follow_the_physics():
    """Hand-checkable consequences of the parameters, through the C model."""
    hdd = profile.load("hdd-sata-7200")
    rr = patterns.expected(hdd, patterns.STANDARD[0])
    # overhead 0.3 + short seek (~1 ms within 1 GiB) + half a rotation 4.17 + transfer 0.07 ms
    assert 5.0e3 < rr.mean_us < 6.2e3
    ssd = profile.load("ssd-sata-mlc")
    # 120 us + 8 KiB at 100 MB/s + 8 KiB at 550 MB/s = 216.8 us: seed 000's svctm was 0.22 ms
    assert patterns.expected(ssd, patterns.STANDARD[0]).mean_us == pytest.approx(216.8, abs=0.5)
    ram = profile.load("ram-san")
    assert patterns.expected(ram, patterns.STANDARD[0]).mean_us == pytest.approx(60 + 81.92, abs=0.1)
    fast = profile.load("hdd-sas-15k")
    assert patterns.expected(fast, patterns.STANDARD[0]).mean_us < rr.mean_us / 2
