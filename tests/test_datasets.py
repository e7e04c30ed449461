"""The data layer: registry, cache, safe extraction, checksums, offline behaviour, CLI.

Nothing here touches the network: downloads go through a fake pooch downloader.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import requests

from rocm_dl_guide import cli
from rocm_dl_guide.core import (
    archives,
    dataset_registry,
    datasets,
    files,
    fixture_formats,
    fixture_images,
    fixtures,
    loaders,
    profiles,
)


@pytest.fixture(autouse=True)
def cache(private_data_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty data cache per test, and no real downloader."""
    path = private_data_cache
    monkeypatch.delenv(profiles.DATA_SOURCE_VAR, raising=False)

    def no_network(url: str, output_file: str, pooch: object) -> None:
        raise AssertionError(f"test tried to download {url}")

    monkeypatch.setattr(datasets, "_DOWNLOADER", no_network)
    return path


def offline(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every download fail as without network; returns the URLs tried."""
    tried: list[str] = []

    def downloader(url: str, output_file: str, pooch: object) -> None:
        tried.append(url)
        raise requests.exceptions.ConnectionError(f"Failed to resolve host for {url}")

    monkeypatch.setattr(datasets, "_DOWNLOADER", downloader)
    return tried


def serve(monkeypatch: pytest.MonkeyPatch, files: dict[str, bytes]) -> list[str]:
    """A fake downloader serving ``files`` by file name (the last URL component)."""
    served: list[str] = []

    def downloader(url: str, output_file: str, pooch: object) -> None:
        served.append(url)
        Path(output_file).write_bytes(files[url.rsplit("/", 1)[1]])

    monkeypatch.setattr(datasets, "_DOWNLOADER", downloader)
    return served


def with_hashes(monkeypatch: pytest.MonkeyPatch, name: str, hashes: dict[str, str]) -> None:
    """Replace the registry's SHA-256 of ``name``'s files (by file name)."""
    spec = dataset_registry.REGISTRY[name]
    files = tuple(dataclasses.replace(f, sha256=hashes[f.filename], md5=None) for f in spec.files)
    monkeypatch.setitem(dataset_registry.REGISTRY, name, dataclasses.replace(spec, files=files))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(path: Path) -> list[tuple[str, bytes | None]]:
    """Every entry under ``path`` with its content (``None`` for directories)."""
    if not path.exists():
        return []
    out = []
    for p in sorted(path.rglob("*")):
        out.append((p.relative_to(path).as_posix(), p.read_bytes() if p.is_file() else None))
    return out


# --------------------------------------------------------------------------- registry


def test_registry_is_complete_and_well_formed() -> None:
    assert set(dataset_registry.REGISTRY) == {
        "mnist",
        "fashion-mnist",
        "cifar10",
        "imdb",
        "tiny-imagenet-200",
    }
    for name, spec in dataset_registry.REGISTRY.items():
        assert spec.name == name and spec.description and spec.layout and spec.top
        assert spec.download_size and spec.download_size > 0
        for f in spec.files:
            assert f.urls and all(u.startswith(("http://", "https://")) for u in f.urls)
            assert all(u.endswith("/" + f.filename) for u in f.urls)
            assert f.sha256 and re.fullmatch(r"[0-9a-f]{64}", f.sha256), f.filename
            assert f.md5 is None or re.fullmatch(r"[0-9a-f]{32}", f.md5)
            assert f.known_hash == f"sha256:{f.sha256}"
            assert f.checksum_source
    registry = dataset_registry.REGISTRY
    assert len(registry["mnist"].files) == 4
    assert len(registry["fashion-mnist"].files) == 4
    assert registry["cifar10"].files[0].filename == "cifar-10-python.tar.gz"
    assert registry["imdb"].files[0].filename == "aclImdb_v1.tar.gz"
    assert registry["tiny-imagenet-200"].files[0].filename == "tiny-imagenet-200.zip"


def test_known_hash_falls_back_to_md5() -> None:
    f = dataset_registry.RemoteFile("x.gz", ("https://example.invalid/x.gz",), 1, md5="0" * 32)
    assert f.known_hash == "md5:" + "0" * 32
    assert dataset_registry.RemoteFile("y", ("https://example.invalid/y",), None).known_hash is None


def test_info_aliases_and_unknown_name() -> None:
    assert dataset_registry.info("Fashion_MNIST").name == "fashion-mnist"
    assert dataset_registry.info("tiny-imagenet").name == "tiny-imagenet-200"
    with pytest.raises(dataset_registry.UnknownDatasetError, match="choose one of"):
        dataset_registry.info("svhn")


def test_cache_dir(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    assert datasets.cache_dir() == cache
    monkeypatch.delenv(datasets.ENV_VAR)
    import pooch

    assert datasets.cache_dir() == Path(pooch.os_cache("rocm-dl-guide"))


# --------------------------------------------------------------------------- extract_archive


def _tar(path: Path, members: list[tarfile.TarInfo], data: dict[str, bytes] | None = None) -> Path:
    data = data or {}
    with tarfile.open(path, "w:gz") as tar:
        for info in members:
            content = data.get(info.name)
            if content is not None:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
            else:
                tar.addfile(info)
    return path


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def _device(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.CHRTYPE
    info.devmajor, info.devminor = 1, 3
    return info


EVIL_TARS = {
    "dotdot": ([_file("data/ok.txt"), _file("../evil")], "../evil"),
    "absolute": ([_file("ok.txt"), _file("/tmp/evil-absolute")], "/tmp/evil-absolute"),
    "symlink": ([_link("data/link", "../../outside", tarfile.SYMTYPE)], "data/link"),
    "absolute-symlink": ([_link("link", "/etc/passwd", tarfile.SYMTYPE)], "link"),
    "hardlink": ([_link("hard", "../outside", tarfile.LNKTYPE)], "hard"),
    "symlink-chain": (
        [_link("here", ".", tarfile.SYMTYPE), _link("out", "here/../escape", tarfile.SYMTYPE)],
        "out",
    ),
    "device": ([_device("dev/null-ish")], "dev/null-ish"),
}


@pytest.mark.parametrize("case", list(EVIL_TARS))
@pytest.mark.parametrize("dest_exists", [True, False])
def test_extract_refuses_unsafe_tar_members(case: str, dest_exists: bool, tmp_path: Path) -> None:
    members, bad = EVIL_TARS[case]
    archive = _tar(
        tmp_path / "evil.tar.gz",
        members,
        {m.name: b"payload" for m in members if m.isfile()},
    )
    work = tmp_path / "work"
    dest = work / "dest"
    if dest_exists:
        (dest / "keep").mkdir(parents=True)
        (dest / "keep" / "a.txt").write_text("already here")
        (dest / "data").mkdir()
    work.mkdir(exist_ok=True)
    before, parent_before = listing(dest), listing(work)
    with pytest.raises(ValueError, match=re.escape(repr(bad))) as err:
        archives.extract_archive(archive, dest)
    assert isinstance(err.value, archives.UnsafeArchiveError)
    assert listing(dest) == before  # nothing written, nothing removed
    assert listing(work) == parent_before  # no temporary directory left behind
    assert dest.exists() is dest_exists
    assert not (tmp_path / "outside").exists() and not (tmp_path / "evil").exists()


@pytest.mark.parametrize("bad", ["../evil.txt", "/abs/evil.txt", "a/../../evil.txt"])
def test_extract_refuses_unsafe_zip_members(bad: str, tmp_path: Path) -> None:
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("good/ok.txt", b"fine")
        zf.writestr(zipfile.ZipInfo(bad), b"payload")
    dest = tmp_path / "dest"
    (dest / "good").mkdir(parents=True)
    (dest / "good" / "ok.txt").write_text("old")
    before, parent_before = listing(dest), listing(tmp_path)
    with pytest.raises(archives.UnsafeArchiveError, match=re.escape(repr(bad))):
        archives.extract_archive(archive, dest)
    assert listing(dest) == before
    assert listing(tmp_path) == parent_before


def test_extract_refuses_zip_symlink_outside(tmp_path: Path) -> None:
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("link")
        info.external_attr = 0o120777 << 16  # a symlink, as Info-ZIP stores them
        zf.writestr(info, "../../outside")
    with pytest.raises(archives.UnsafeArchiveError, match="'link'"):
        archives.extract_archive(archive, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_extract_good_tar_gz_and_zip(tmp_path: Path) -> None:
    tgz = fixtures.write_archive("cifar10", tmp_path / "c.tar.gz", n_train=10, n_test=10)
    dest = tmp_path / "cifar"
    dest.mkdir()
    (dest / "unrelated.txt").write_text("stays")
    (dest / "cifar-10-batches-py").mkdir()
    (dest / "cifar-10-batches-py" / "stale").write_text("replaced")
    assert archives.extract_archive(tgz, dest) == dest
    names = sorted(p.name for p in (dest / "cifar-10-batches-py").iterdir())
    assert "data_batch_5" in names and "batches.meta" in names and "stale" not in names
    assert (dest / "unrelated.txt").read_text() == "stays"
    reference = fixture_images.write_cifar10(tmp_path / "ref", n_train=10, n_test=10)
    assert listing(dest / "cifar-10-batches-py") == listing(reference / "cifar-10-batches-py")

    zipped = fixtures.write_archive(
        "tiny-imagenet-200", tmp_path / "t.zip", num_classes=2, n_train_per_class=2
    )
    dest = tmp_path / "tiny"  # does not exist yet
    archives.extract_archive(zipped, dest)
    reference = fixture_images.write_tiny_imagenet(
        tmp_path / "tref", num_classes=2, n_train_per_class=2
    )
    assert listing(dest) == listing(reference)

    plain = tmp_path / "plain.tar"  # uncompressed tar, with an internal symlink (allowed)
    with tarfile.open(plain, "w") as tar:
        info = tarfile.TarInfo("pkg/file.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
        tar.addfile(_link("pkg/alias.txt", "file.txt", tarfile.SYMTYPE))
    archives.extract_archive(plain, tmp_path / "plain")
    assert (tmp_path / "plain" / "pkg" / "alias.txt").read_text() == "hi"


@pytest.mark.parametrize("kind", ["tar.gz", "zip", "tar"])
def test_extract_truncated_archive(kind: str, tmp_path: Path) -> None:
    name = {"tar.gz": "imdb", "zip": "tiny-imagenet-200", "tar": "mnist"}[kind]
    good = fixtures.write_archive(name, tmp_path / f"good.{kind}")
    data = good.read_bytes()
    bad = tmp_path / f"truncated.{kind}"
    bad.write_bytes(data[: len(data) * 2 // 3])
    dest = tmp_path / "dest"
    before = listing(tmp_path)
    with pytest.raises(archives.ArchiveError, match=re.escape(bad.name)):
        archives.extract_archive(bad, dest)
    assert not dest.exists()
    assert listing(tmp_path) == before  # nothing half-written anywhere


def test_extract_not_an_archive(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(2048))
    with pytest.raises(archives.ArchiveError, match="junk.bin"):
        archives.extract_archive(junk, tmp_path / "dest")
    with pytest.raises(archives.ArchiveError, match="no such archive"):
        archives.extract_archive(tmp_path / "missing.tar.gz", tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


# --------------------------------------------------------------------------- checksums


def test_verify_file_detects_tampering_and_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "downloads" / "cifar-10-python.tar.gz"
    path.parent.mkdir()
    path.write_bytes(b"the real bytes")
    good = sha256(path)
    archives.verify_file(path, f"sha256:{good}")
    archives.verify_file(path, good)  # bare hex means SHA-256
    archives.verify_file(path, "md5:" + hashlib.md5(b"the real bytes").hexdigest())
    path.write_bytes(b"tampered bytes")
    bad = sha256(path)
    with pytest.raises(archives.ChecksumError) as err:
        archives.verify_file(path, f"sha256:{good}")
    message = str(err.value)
    assert "cifar-10-python.tar.gz" in message and good in message and bad in message
    assert not path.exists()  # never used again from the cache

    path.write_bytes(b"user's own file")
    with pytest.raises(archives.ChecksumError):
        archives.verify_file(path, f"sha256:{good}", remove_bad=False)
    assert path.exists()


def test_corrupted_download_is_rejected_by_pooch_and_not_kept(
    monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    served = serve(monkeypatch, {"cifar-10-python.tar.gz": b"not the CIFAR-10 archive"})
    with pytest.raises(archives.ChecksumError) as err:
        datasets.fetch("cifar10")
    message = str(err.value)
    expected = dataset_registry.REGISTRY["cifar10"].files[0].sha256
    assert "cifar-10-python.tar.gz" in message
    assert expected in message
    assert hashlib.sha256(b"not the CIFAR-10 archive").hexdigest() in message
    assert served == ["https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"]
    # Only the (empty) build lock stays: a lock file is never removed, since a
    # process about to take it would then lock a file nobody else sees.
    leftovers = [p for p in cache.rglob("*") if p.is_file()]
    assert leftovers == [files.lock_path(cache / "real" / "cifar10")]
    assert leftovers[0].stat().st_size == 0
    assert datasets.cached() == []


# --------------------------------------------------------------------------- fetch / prepare


def test_fetch_offline_raises_with_advice(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    tried = offline(monkeypatch)
    with pytest.raises(datasets.DataUnavailableError) as err:
        datasets.fetch("mnist")
    message = str(err.value)
    assert "--data-source fixtures" in message and "ROCM_DL_GUIDE_DATA_SOURCE" in message
    assert "python -m rocm_dl_guide data import mnist" in message
    assert "ConnectionError" in message
    assert len(tried) == 2  # both mirrors of the first file
    assert "\n" not in message
    assert not (cache / "real" / "mnist").exists()

    tried.clear()
    with pytest.raises(datasets.DataUnavailableError, match="data import cifar10"):
        datasets.fetch("cifar10")
    assert tried == ["https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"]


def test_prepare_never_falls_back_to_the_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    offline(monkeypatch)
    for name in ("gpu", "full"):
        with pytest.raises(datasets.DataUnavailableError) as err:
            datasets.prepare("mnist", profile=profiles.current(name))
        message = str(err.value)
        assert "cannot download MNIST" in message and "Two ways out" in message
        assert "data import mnist" in message and "--data-source fixtures" in message
    assert not (datasets.cache_dir() / "fixtures" / "mnist").exists()


def test_data_source_is_independent_of_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    offline(monkeypatch)
    monkeypatch.setenv(profiles.DATA_SOURCE_VAR, "fixtures")
    prof = profiles.current("gpu")
    assert prof.name == "gpu" and prof.max_epochs == 5  # the gpu profile's sizes
    assert prof.use_fixtures and not prof.pretrained and prof.data_source_explicit
    prepared = datasets.prepare("mnist", profile=prof)
    assert prepared.kind == "fixture" and "not the real MNIST" in prepared.note
    assert "asked for with ROCM_DL_GUIDE_DATA_SOURCE=fixtures" in prepared.note
    assert (prepared.root / "MNIST" / "raw" / "train-images-idx3-ubyte").is_file()
    # and the other way round: the smoke profile's sizes on the real data (no network here)
    monkeypatch.setenv(profiles.DATA_SOURCE_VAR, "real")
    with pytest.raises(datasets.DataUnavailableError, match="cannot download MNIST"):
        datasets.prepare("mnist", profile=profiles.current("smoke"))
    monkeypatch.setenv(profiles.DATA_SOURCE_VAR, "synthetic")
    with pytest.raises(profiles.ProfileError, match="unknown data source 'synthetic'"):
        profiles.current("smoke")


def test_prepare_smoke_never_downloads() -> None:
    # The autouse fixture makes any download attempt fail the test.
    prepared = datasets.prepare("imdb", profile=profiles.current("smoke"))
    assert prepared.kind == "fixture" and "the smoke profile's default" in prepared.note
    assert (prepared.root / "aclImdb" / "train" / "pos").is_dir()


def test_fetch_real_archive_through_pooch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    archive = fixtures.write_archive("cifar10", tmp_path / "cifar-10-python.tar.gz", n_train=20)
    with_hashes(monkeypatch, "cifar10", {"cifar-10-python.tar.gz": sha256(archive)})
    served = serve(monkeypatch, {"cifar-10-python.tar.gz": archive.read_bytes()})
    root = datasets.fetch("cifar10")
    assert root == datasets.cache_dir() / "real" / "cifar10"
    assert (root / "cifar-10-batches-py" / "test_batch").is_file()
    assert not (datasets.cache_dir() / "downloads" / "cifar10").exists()  # archive removed
    assert datasets.fetch("cifar10") == root and len(served) == 1  # cached: no second download
    prepared = datasets.prepare("cifar10", profile=profiles.current("gpu"))
    assert prepared.kind == "real" and prepared.root == root and "real CIFAR-10" in prepared.note


def test_fetch_real_idx_files_through_pooch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    src = fixture_images.write_fashion_mnist(tmp_path / "src", n_train=30, n_test=10)
    raw = src / "FashionMNIST" / "raw"
    files = {f"{stem}.gz": (raw / f"{stem}.gz").read_bytes() for stem in fixture_formats.IDX_FILES}
    with_hashes(
        monkeypatch, "fashion-mnist", {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}
    )
    served = serve(monkeypatch, files)
    root = datasets.fetch("fashion-mnist")
    assert len(served) == 4
    got = root / "FashionMNIST" / "raw"
    for stem in fixture_formats.IDX_FILES:
        assert (got / stem).read_bytes() == (raw / stem).read_bytes()
        assert (got / f"{stem}.gz").is_file()
    (x_train, y_train), (x_test, _), prepared = loaders.mnist_arrays(
        "fashion-mnist", profiles.current("gpu")
    )
    assert (
        prepared.kind == "real" and x_train.shape == (30, 28, 28) and x_test.shape == (10, 28, 28)
    )


# --------------------------------------------------------------------------- import


def test_import_wrong_file_fails_cleanly(tmp_path: Path, cache: Path) -> None:
    wrong = tmp_path / "cifar-10-python.tar.gz"
    fixtures.write_archive("cifar10", wrong, n_train=10, n_test=10)
    with pytest.raises(archives.ChecksumError) as err:
        datasets.import_archive("cifar10", wrong)
    assert "not the expected CIFAR-10 file" in str(err.value) and str(wrong) in str(err.value)
    assert wrong.exists()  # the user's file is left alone
    assert not (cache / "real" / "cifar10").exists()
    with pytest.raises(FileNotFoundError):
        datasets.import_archive("cifar10", tmp_path / "nope.tar.gz")
    with pytest.raises(archives.ArchiveError, match="is a directory"):
        datasets.import_archive("cifar10", tmp_path)


def test_import_matching_archive_extracts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path
) -> None:
    archive = fixtures.write_archive("imdb", tmp_path / "aclImdb_v1.tar.gz", n_train=4, n_test=4)
    with_hashes(monkeypatch, "imdb", {"aclImdb_v1.tar.gz": sha256(archive)})
    root = datasets.import_archive("imdb", archive)
    assert root == cache / "real" / "imdb"
    assert len(list((root / "aclImdb" / "train" / "pos").glob("*.txt"))) == 4
    entries = datasets.cached()
    assert [(e["name"], e["kind"]) for e in entries] == [("imdb", "real")]
    assert entries[0]["size"] > 0 and entries[0]["path"] == root
    assert archive.exists()


def test_import_idx_from_directory_and_archive(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    archive = fixtures.write_archive("mnist", tmp_path / "mnist-idx.tar", n_train=20, n_test=10)
    folder = tmp_path / "downloaded"
    archives.extract_archive(archive, folder)
    with_hashes(
        monkeypatch, "mnist", {p.name: sha256(p) for p in folder.iterdir() if p.suffix == ".gz"}
    )
    for source in (folder, archive):
        root = datasets.import_archive("mnist", source)
        assert (root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").is_file()
        assert archives.load_idx(root / "MNIST" / "raw" / "train-images-idx3-ubyte").shape == (
            20,
            28,
            28,
        )
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(archives.ArchiveError, match="t10k-labels-idx1-ubyte.gz not found"):
        datasets.import_archive("mnist", folder)


# --------------------------------------------------------------------------- IDX


def test_load_idx_roundtrip_and_errors(tmp_path: Path) -> None:
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    plain = tmp_path / "a-idx3-ubyte"
    plain.write_bytes(fixture_formats.idx_bytes(arr))
    assert np.array_equal(archives.load_idx(plain), arr)
    gz = tmp_path / "a-idx3-ubyte.gz"
    gz.write_bytes(fixture_formats.gzip_bytes(fixture_formats.idx_bytes(arr)))
    assert np.array_equal(archives.load_idx(gz), arr)
    ints = np.array([1, -2, 300], dtype=np.int32)
    (tmp_path / "i").write_bytes(fixture_formats.idx_bytes(ints))
    assert archives.load_idx(tmp_path / "i").tolist() == [1, -2, 300]

    bad_magic = tmp_path / "bad-magic"
    bad_magic.write_bytes(b"\x01\x02\x08\x01" + b"\x00" * 8)
    with pytest.raises(archives.IdxFormatError, match="bad-magic.*magic"):
        archives.load_idx(bad_magic)
    short = tmp_path / "short"
    short.write_bytes(fixture_formats.idx_bytes(arr)[:-5])
    with pytest.raises(archives.IdxFormatError, match="short.*bytes of data"):
        archives.load_idx(short)
    bad_type = tmp_path / "bad-type"
    bad_type.write_bytes(b"\x00\x00\x07\x01\x00\x00\x00\x01\x00")
    with pytest.raises(archives.IdxFormatError, match="data type"):
        archives.load_idx(bad_type)
    broken_gz = tmp_path / "broken.gz"
    broken_gz.write_bytes(gz.read_bytes()[:20])
    with pytest.raises(archives.IdxFormatError, match="broken.gz"):
        archives.load_idx(broken_gz)


# --------------------------------------------------------------------------- CLI


def run_cli(argv: list[str]) -> int:
    return cli.main(argv)


def test_cli_list(capsys: pytest.CaptureFixture[str], cache: Path) -> None:
    assert run_cli(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert str(cache) in out and "Nothing cached yet" in out and "tiny-imagenet-200" in out
    datasets.prepare("mnist", profile=profiles.current("smoke"))
    assert run_cli(["data", "list"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("mnist "))
    assert "fixture" in line and str(cache / "fixtures" / "mnist") in line


def test_cli_fetch_offline_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    offline(monkeypatch)
    assert run_cli(["data", "fetch", "mnist"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith("data fetch: cannot download MNIST")
    assert "data import mnist" in captured.err

    assert run_cli(["data", "fetch", "svhn"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown data set 'svhn'" in err


def test_cli_import_errors_and_success(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    archive = fixtures.write_archive(
        "tiny-imagenet-200", tmp_path / "tiny-imagenet-200.zip", num_classes=2, n_train_per_class=2
    )
    assert run_cli(["data", "import", "tiny-imagenet-200", str(archive)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not the expected Tiny ImageNet file" in err

    with_hashes(monkeypatch, "tiny-imagenet-200", {"tiny-imagenet-200.zip": sha256(archive)})
    assert run_cli(["data", "import", "tiny-imagenet", str(archive)]) == 0
    out = capsys.readouterr().out.strip()
    assert Path(out) == datasets.cache_dir() / "real" / "tiny-imagenet-200"
    assert (Path(out) / "tiny-imagenet-200" / "wnids.txt").is_file()

    assert run_cli(["data"]) == 2
    assert "list" in capsys.readouterr().err


def _module_cli(*args, env):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "rocm_dl_guide", "data", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_python_m_data_commands_end_to_end(tmp_path):
    """The real command line: offline fetch is one clear message, import verifies first."""
    import os

    env = dict(os.environ, ROCM_DL_GUIDE_DATA=str(tmp_path / "cache"))
    # A proxy that refuses every connection: offline, whatever network the machine has.
    env.update(HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9", NO_PROXY="")
    fetch = _module_cli("fetch", "mnist", env=env)
    assert fetch.returncode == 1
    assert "Traceback" not in fetch.stderr
    assert "data import mnist" in fetch.stderr and "--data-source fixtures" in fetch.stderr
    unknown = _module_cli("fetch", "imagenet-22k", env=env)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    wrong = tmp_path / "not-cifar.tar.gz"
    wrong.write_bytes(b"\x1f\x8b definitely not the CIFAR-10 archive")
    imported = _module_cli("import", "cifar10", str(wrong), env=env)
    assert imported.returncode == 1 and "Traceback" not in imported.stderr
    assert "not-cifar.tar.gz" in imported.stderr
    listing = _module_cli("list", env=env)
    assert listing.returncode == 0 and "mnist" in listing.stdout


# --------------------------------------------------------------------------- system copies


def _system_copy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, dict]:
    """A fake distribution package holding Fashion-MNIST's four .gz files compressed
    again (other bytes than the registry's, the same content), registered as a
    system copy; the registry's checksums are those of the originals."""
    import gzip

    src = fixture_images.write_fashion_mnist(tmp_path / "src", n_train=30, n_test=10)
    raw = src / "FashionMNIST" / "raw"
    package = tmp_path / "usr-share-datasets-fashion-mnist"
    package.mkdir()
    spec = dataset_registry.REGISTRY["fashion-mnist"]
    files = []
    for rf in spec.files:
        original = raw / rf.filename
        content = gzip.decompress(original.read_bytes())
        (package / rf.filename).write_bytes(gzip.compress(content, compresslevel=1, mtime=0))
        assert sha256(package / rf.filename) != sha256(original)
        files.append(
            dataclasses.replace(
                rf,
                sha256=sha256(original),
                md5=None,
                raw_sha256=hashlib.sha256(content).hexdigest(),
            )
        )
    monkeypatch.setitem(
        dataset_registry.REGISTRY, "fashion-mnist", dataclasses.replace(spec, files=tuple(files))
    )
    monkeypatch.setattr(
        datasets, "SYSTEM_COPIES", {"fashion-mnist": ((str(package), "dataset-fashion-mnist"),)}
    )
    return package, {rf.filename: rf for rf in files}


def test_a_system_copy_is_the_smoke_profiles_data_and_the_note_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    package, _ = _system_copy(monkeypatch, tmp_path)
    prepared = datasets.prepare("fashion-mnist", profiles.current("smoke"))
    assert prepared.kind == "real" and prepared.root == datasets.real_root("fashion-mnist")
    assert "from the system package dataset-fashion-mnist" in prepared.note
    assert "instead of the smoke profile's generated fixture" in prepared.note
    images = archives.load_idx(prepared.root / "FashionMNIST" / "raw" / "train-images-idx3-ubyte")
    assert images.shape == (30, 28, 28)
    # a caller may keep the fixture (the TensorFlow distributed page's workers)
    kept = datasets.prepare("fashion-mnist", profiles.current("smoke"), system_copies=False)
    assert kept.kind == "fixture"
    # asked for explicitly, the fixture is the fixture
    monkeypatch.setenv(profiles.DATA_SOURCE_VAR, "fixtures")
    assert datasets.prepare("fashion-mnist", profiles.current("smoke")).kind == "fixture"
    # and data import accepts the package's files too (their content is checked)
    monkeypatch.delenv(profiles.DATA_SOURCE_VAR)
    shutil_root = datasets.import_archive("fashion-mnist", package)
    assert shutil_root == prepared.root


def test_a_system_copy_that_does_not_match_is_an_error_never_the_fixture(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import gzip

    package, _ = _system_copy(monkeypatch, tmp_path)
    bad = package / "t10k-labels-idx1-ubyte.gz"
    content = bytearray(gzip.decompress(bad.read_bytes()))
    content[-1] ^= 1  # one label changed
    bad.write_bytes(gzip.compress(bytes(content)))
    with pytest.raises(archives.ChecksumError, match="not the expected Fashion-MNIST file"):
        datasets.prepare("fashion-mnist", profiles.current("smoke"))
    assert not datasets.real_root("fashion-mnist").exists()
    assert bad.exists()  # the package's file is left alone
    # a folder missing a file is no system copy
    bad.unlink()
    assert datasets.system_copy("fashion-mnist") is None
    assert datasets.prepare("fashion-mnist", profiles.current("smoke")).kind == "fixture"


@pytest.mark.skipif(
    not Path("/usr/share/datasets/fashion-mnist").is_dir(),
    reason="Debian's dataset-fashion-mnist is not installed here",
)
def test_debians_fashion_mnist_package_is_the_real_data_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The package's files are compressed again, so their .gz checksums are not the
    registry's; their content matches the registry's decompressed SHA-256."""
    monkeypatch.setattr(
        datasets, "SYSTEM_COPIES", {"fashion-mnist": ((DEBIAN_FASHION, "dataset-fashion-mnist"),)}
    )
    found = datasets.system_copy("fashion-mnist")
    assert found == (Path(DEBIAN_FASHION), "dataset-fashion-mnist")
    prepared = datasets.prepare("fashion-mnist", profiles.current("smoke"))
    assert prepared.kind == "real" and "dataset-fashion-mnist" in prepared.note
    labels = archives.load_idx(prepared.root / "FashionMNIST" / "raw" / "t10k-labels-idx1-ubyte")
    assert labels.shape == (10_000,) and np.bincount(labels).tolist() == [1000] * 10


DEBIAN_FASHION = "/usr/share/datasets/fashion-mnist"


def test_a_stand_in_says_so_on_the_same_line() -> None:
    fixture = datasets.prepare("imdb", profiles.current("smoke"))
    assert (
        datasets.stand_in(fixture)
        == "generated fixture, not the real IMDB Large Movie Review Dataset"
    )
    assert (
        datasets.labelled("accuracy 0.9", fixture) == f"accuracy 0.9 [{datasets.stand_in(fixture)}]"
    )
    real = dataclasses.replace(fixture, kind="real")
    assert (
        datasets.stand_in(real) == "" and datasets.labelled("accuracy 0.9", real) == "accuracy 0.9"
    )
