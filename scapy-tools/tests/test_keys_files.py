"""Key files: mode 0600 written atomically, unsafe files refused, the SM key store and host provisioning."""

import os
import stat
from pathlib import Path

import pytest
from ibsec import keys
from ibsec.keys import Key, KeyFileError, KeyStore, KeyType, load_host_key, read_key_file, write_key_file


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_round_trip_mode_0600_under_a_permissive_umask(tmp_path: Path) -> None:
    path = tmp_path / "ca.keys"
    stored = [Key.generate(KeyType.CA_SK, (7,)), Key.generate(KeyType.P_SK, (0x8001,), 32)]
    old_umask = os.umask(0)
    try:
        write_key_file(path, stored)
    finally:
        os.umask(old_umask)
    assert mode_of(path) == 0o600
    assert read_key_file(path) == stored
    assert os.listdir(tmp_path) == ["ca.keys"]  # no temporary file left behind


def test_content_is_written_only_after_mode_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    modes: list[int] = []
    real_write = os.write

    def spying_write(fd: int, data: bytes) -> int:
        modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real_write(fd, data)

    monkeypatch.setattr(keys.os, "write", spying_write)
    write_key_file(tmp_path / "k", [Key.generate(KeyType.SM_SK)])
    assert modes == [0o600]


def test_rewrite_replaces_atomically(tmp_path: Path) -> None:
    path = tmp_path / "k"
    write_key_file(path, [Key.generate(KeyType.SM_SK)])
    inode = path.stat().st_ino
    fresh = Key.generate(KeyType.SM_SK)
    write_key_file(path, [fresh])
    assert read_key_file(path) == [fresh]
    assert path.stat().st_ino != inode  # a new file renamed in, never rewritten in place


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o620])
def test_group_or_world_access_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "k"
    write_key_file(path, [Key.generate(KeyType.SM_SK)])
    path.chmod(mode)
    with pytest.raises(KeyFileError) as raised:
        read_key_file(path)
    assert str(path) in str(raised.value) and f"{mode:04o}" in str(raised.value)


def test_file_of_another_user_refused(tmp_path: Path) -> None:
    path = tmp_path / "k"
    write_key_file(path, [Key.generate(KeyType.SM_SK)])
    if os.geteuid() != 0:
        pytest.fail("this test must run as root to chown the file (the project's test environment is root)")
    os.chown(path, 4242, -1)
    with pytest.raises(KeyFileError, match="owned by uid 4242"):
        read_key_file(path)


def test_symlink_refused(tmp_path: Path) -> None:
    write_key_file(tmp_path / "real", [Key.generate(KeyType.SM_SK)])
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(KeyFileError, match="symbolic link"):
        read_key_file(tmp_path / "link")


@pytest.mark.parametrize(
    "content",
    [b"not json", b'{"format": "other", "version": 1, "keys": []}', b'{"format": "ibsec-keys", "version": 1,'
     b' "keys": [{"type": "NOPE", "owner": [], "key": "00"}]}', b'[1, 2]',
     b'{"format": "ibsec-keys", "version": 1, "keys": [{"type": "SM_SK", "owner": [], "key": "zz"}]}'],
)
def test_malformed_file_refused_without_echoing_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "k"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(KeyFileError) as raised:
        read_key_file(path)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert content.decode() not in str(raised.value)


def test_key_store_and_host_provisioning(tmp_path: Path) -> None:
    store = KeyStore()
    ca_keys = {ca: store.enroll(ca) for ca in (0x0002C90300000001, 0x0002C90300000002)}
    store.save(tmp_path / "sm.keys")
    loaded = KeyStore.load(tmp_path / "sm.keys")
    assert len(loaded) == 2 and all(loaded.ca_key(ca) == key for ca, key in ca_keys.items())
    host_file = tmp_path / "host1.keys"
    loaded.provision_host(0x0002C90300000001, host_file)
    assert mode_of(host_file) == 0o600
    assert read_key_file(host_file) == [ca_keys[0x0002C90300000001]]  # only that host's key
    assert load_host_key(host_file, 0x0002C90300000001) == ca_keys[0x0002C90300000001]
    with pytest.raises(KeyFileError):
        load_host_key(host_file, 0x0002C90300000002)
    with pytest.raises(keys.IbsecKeyError):
        store.add(Key.generate(KeyType.P_SK, (1,)))
