"""Provisioned volumes in the one device grammar: PROFILE{key=value,...} in the vendor's units,
checked against each offer's limits, with what follows from them; every bad one a line that says
what to write."""

from __future__ import annotations

import json

import pytest

from dbtier.devices import profile, provision
from dbtier.devices.spec import parse_all
from dbtier.errors import UserError
from dbtier.experiments.compare import parse_option
from dbtier.experiments.experiment import Experiment
from tests.conftest import dbtier

GIB, MIB = 1.073741824, 1.048576  # the model's GB and MB/s (10^9 B, 10^6 B/s) per GiB and MiB/s


def test_gp3_is_provisioned_in_awss_units():
    p = profile.load("ebs-gp3{iops=6000,mb_s=250,capacity_gb=400}")
    assert p.params["iops"] == 6000
    assert p.params["mb_s"] == pytest.approx(250 * MIB)  # AWS sells MiB/s: 262.144 of the model's MB/s
    assert p.params["capacity_gb"] == pytest.approx(400 * GIB)
    assert p.name == "ebs-gp3{iops=6000,mb_s=250,capacity_gb=400}"
    assert "provisioned: iops=6,000 IOPS, mb_s=250 MiB/s, capacity_gb=400 GiB" in p.summary


def test_what_follows_from_a_gp2s_size():
    """3 IOPS per GiB, at least 100; the burst only below 1,000 GiB; 250 MiB/s from 334 GiB."""
    small = profile.load("ebs-gp2-100g{capacity_gb=20}").params
    assert small["iops"] == 100 and small["burst_iops"] == 3000 and small["mb_s"] == pytest.approx(128 * MIB)
    mid = profile.load("ebs-gp2-100g{capacity_gb=500}").params
    assert mid["iops"] == 1500 and mid["burst_credits"] == 5.4e6 and mid["mb_s"] == pytest.approx(250 * MIB)
    large = profile.load("ebs-gp2-100g{capacity_gb=2000}").params
    assert large["iops"] == 6000 and large["burst_iops"] == 0 and large["burst_credits"] == 0


def test_io2s_throughput_follows_its_iops():
    assert profile.load("ebs-io2-64k{iops=8000,capacity_gb=100}").params["mb_s"] == pytest.approx(8000 * 0.256 * MIB)
    assert profile.load("ebs-io2-64k{iops=20000,capacity_gb=100}").params["mb_s"] == pytest.approx(4000 * MIB)


def test_azure_sells_mb_s_of_a_million_bytes():
    p = profile.load("azure-premium-v2{iops=10000,mb_s=600,capacity_gb=64}").params
    assert p["mb_s"] == 600 and p["iops"] == 10000


def test_the_plain_profiles_are_what_their_provisioning_says():
    """Every offer's own figures read back as whole vendor units, within its limits."""
    for name in ("ebs-gp3", "ebs-gp2-100g", "ebs-io2-64k", "azure-premium-v2", "gcp-hyperdisk-balanced"):
        p = profile.load(name)
        for key, e in p.provision.items():
            v = e.vendor(p.params[key])
            assert v == round(v) and e.min <= v <= e.max, (name, key, v)
        again = profile.load(f"{name}{{{','.join(f'{k}={e.vendor(p.params[k]):g}' for k, e in p.provision.items())}}}")
        assert again.params == pytest.approx(p.params), name


def test_a_profile_without_a_table_takes_model_parameters():
    p = profile.load("hdd-sata-7200{write_cache=0}")
    assert p.params["write_cache"] == 0 and p.provision is None


def test_provisioned_members_striped():
    p = profile.load("2xebs-gp3{iops=6000}@128k")
    assert p.params["members"] == 2 and p.params["iops"] == 6000 and p.params["stripe_kib"] == 128


@pytest.mark.parametrize("spec, message", [
    ("ebs-gp3{iops=100000}", "iops=100,000 is outside ebs-gp3's 3,000 to 80,000 IOPS, at most 500 per GiB"),
    ("ebs-gp3{iops=2000}", "is outside ebs-gp3's 3,000 to 80,000 IOPS"),
    ("ebs-gp3{iops=6000,capacity_gb=10}", "iops=6,000 needs capacity_gb of at least 12 GiB"),
    ("ebs-gp3{mb_s=1000}", "mb_s=1,000 needs iops of at least 4,000 IOPS (ebs-gp3: at most 0.25 MiB/s per IOPS); "
                           "give iops=4000 or more"),
    ("ebs-io2-64k{capacity_gb=10}", "iops=64,000 needs capacity_gb of at least 64 GiB"),
    ("ebs-gp2-100g{iops=3000}", "ebs-gp2-100g provisions capacity_gb, not iops"),
    ("azure-p20{iops=5000}", "azure-p20 is sold as it is, nothing of it is provisioned"),
    ("ebs-gp3{iops=6000", "write the settings as PROFILE{key=value,...}"),
    ("ebs-gp3{iops}", "'iops' is not key=value"),
    ("ebs-gp3{iops=lots}", "iops=lots is not a number"),
    ("ebs-gp3{iops=nan}", "iops=nan is not a number"),
    ("ebs-gp3{}", "nothing between the braces"),
    ("ebs-gp3{iops=4000,iops=5000}", "iops is set twice"),
    ("ebs-gp3iops=6000", "settings go in braces, PROFILE{key=value,...}; quote it for the shell"),
    ("hdd-sata-7200{rpm=1}", "rpm = 1.0 is outside"),
    ("real{iops=5}", "a real folder has no parameters to set"),
    ("2xebs-gp3@128k{iops=6000}", "give each member's settings, before the stripe: 2xebs-gp3{...}@128k"),
])
def test_bad_provisioning_is_one_line(spec, message):
    with pytest.raises(UserError) as exc:
        profile.load(spec)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_profile_files_provision_table_is_checked(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('kind = "cloud"\n[provision.iops]\nunit = "IOPS"\nmin = 10\nmax = 5\n')
    with pytest.raises(UserError, match=r"\[provision.iops\]: min 10 is above max 5"):
        profile.load(str(path))
    path.write_text('kind = "cloud"\n[provision.rpm]\nunit = "rpm"\n')
    with pytest.raises(UserError, match=r"\[provision.rpm\]: not a parameter of this kind"):
        profile.load(str(path))


def test_lists_with_braces_split_where_a_user_means():
    assert provision.split_list("a=ebs-gp3{iops=6000,mb_s=250},b=nvme-gen4") == [
        "a=ebs-gp3{iops=6000,mb_s=250}", "b=nvme-gen4"]
    config = parse_option("prov:data=ebs-gp3{iops=6000,mb_s=250},wal=ebs-io2-64k{iops=8000,capacity_gb=20}:wal=wal")
    assert [d.profile.params["iops"] for d in config.devices] == [6000, 8000]


def test_an_experiment_keeps_the_provisioning_it_was_given(tmp_path):
    exp = Experiment.from_options("random-index", device=["data=ebs-gp3{iops=6000,mb_s=250}"], rows=100)
    path = tmp_path / "e.toml"
    path.write_text(exp.to_toml())
    again = Experiment.from_toml(path)
    (dev,) = again.devices
    assert dev.spec == "ebs-gp3{iops=6000,mb_s=250}" and dev.profile.params["iops"] == 6000
    (spec,) = parse_all(["d=ebs-gp3{iops=7000}:" + str(tmp_path)])
    assert spec.directory == tmp_path and spec.profile.params["iops"] == 7000


def test_devices_show_gives_units_limits_and_sources():
    proc = dbtier("devices", "show", "ebs-gp3{iops=6000,mb_s=250}", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["params"]["mb_s"]["value"] == pytest.approx(262.144)
    prov = doc["provision"]
    assert prov["mb_s"]["value"] == 250 and prov["mb_s"]["unit"] == "MiB/s" and prov["iops"]["value"] == 6000
    assert prov["iops"]["limits"] == "3,000 to 80,000 IOPS, at most 500 per GiB (or 3,000 at any size)"
    assert prov["iops"]["source"]
