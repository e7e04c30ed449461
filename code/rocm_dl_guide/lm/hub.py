"""Pinned snapshots from the Hugging Face Hub: the language-model chapter's ``real`` data.

With ``--data-source real`` (the ``gpu`` and ``full`` profiles' default) the
chapter pretrains on WikiText-2 and fine-tunes SmolLM2-135M, a small
pretrained Llama-style model, instead of Python's documentation and the model
it pretrained itself. Both come from the Hub through ``huggingface_hub``,
pinned:

- by **revision**, a commit of the Hub repository (40 hex digits), so the
  files are the same ones every time, whatever the repository's ``main`` says
  later;
- by **checksum**: every downloaded file is checked against a SHA-256 recorded
  here, where one is published for that revision, or else against the Hub's own
  record of that revision (the SHA-256 of a large, LFS-stored file; the git
  blob hash of a small one), fetched before anything is downloaded.

A file that does not match is deleted and the run stops; nothing falls back to
the offline data. A verified snapshot is kept in the data cache
(``ROCM_DL_GUIDE_DATA``/hub/NAME/REVISION), written whole or not at all, with a
``snapshot.json`` manifest written last; ``python -m rocm_dl_guide data fetch
NAME`` downloads one ahead of time, for example to copy to an air-gapped
machine.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from rocm_dl_guide.core import archives, datasets, files, profiles


@dataclass(frozen=True)
class HubFile:
    """One file of a snapshot."""

    path: str
    """Its path in the repository."""
    sha256: str | None = None
    """Its SHA-256 where a source published it for the pinned revision; ``None``:
    the Hub's own record of the revision is fetched and compared instead."""


@dataclass(frozen=True)
class Snapshot:
    """Files of a Hub repository at one revision."""

    name: str
    """The guide's name for it (``data fetch NAME``)."""
    title: str
    repo_id: str
    repo_type: str
    """``model`` or ``dataset``."""
    revision: str
    files: tuple[HubFile, ...]
    license: str

    @property
    def url(self) -> str:
        kind = "datasets/" if self.repo_type == "dataset" else ""
        return f"https://huggingface.co/{kind}{self.repo_id}/tree/{self.revision}"

    def describe(self) -> str:
        return f"{self.title} ({self.repo_id} at revision {self.revision[:12]}, {self.license})"


SMOLLM2_135M = Snapshot(
    name="smollm2-135m",
    title="SmolLM2-135M",
    repo_id="HuggingFaceTB/SmolLM2-135M",
    repo_type="model",
    revision="93efa2f097d58c2a74874c7e644dbc9b0cee75a2",
    files=(
        HubFile("config.json"),
        HubFile(
            "tokenizer.json", "9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c"
        ),
        HubFile(
            "model.safetensors", "80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1"
        ),
    ),
    license="apache-2.0",
)
"""A 135-million-parameter Llama-architecture model (30 layers, width 576,
grouped-query attention) trained on 2 trillion tokens by Hugging Face; the
LoRA page's base model on the ``real`` data source."""

SMOLLM2_135M_HEADS = (9, 3)
"""SmolLM2-135M's attention heads and key/value heads (``num_attention_heads``
and ``num_key_value_heads`` in its ``config.json`` at the pinned revision);
they bound how far a server can split the model (:func:`tensor_parallel_sizes`)."""


def tensor_parallel_sizes(heads: int, kv_heads: int, most: int = 8) -> list[int]:
    """The tensor-parallel sizes, up to ``most`` GPUs, that vLLM accepts for a
    model with ``heads`` attention heads and ``kv_heads`` key/value heads.

    Each GPU takes a whole number of heads, so the size must divide ``heads``.
    Up to ``kv_heads`` GPUs split the key/value heads too (the size divides
    them); past that, every GPU holds a copy of one, so the size must be a
    multiple of ``kv_heads``."""
    return [
        n
        for n in range(1, most + 1)
        if heads % n == 0 and (kv_heads % n == 0 if n <= kv_heads else n % kv_heads == 0)
    ]


WIKITEXT_2 = Snapshot(
    name="wikitext-2",
    title="WikiText-2 raw",
    repo_id="Salesforce/wikitext",
    repo_type="dataset",
    revision="b08601e04326c79dfdd32d625aee71d232d685c3",
    files=(
        HubFile("wikitext-2-raw-v1/train-00000-of-00001.parquet"),
        HubFile("wikitext-2-raw-v1/validation-00000-of-00001.parquet"),
    ),
    license="cc-by-sa-3.0",
)
"""Good and featured Wikipedia articles (Merity et al., 2016): about 2 million
words of training text and 217,000 of validation text, unchanged (``raw``);
the pretraining page's corpus on the ``real`` data source."""

SNAPSHOTS = {s.name: s for s in (SMOLLM2_135M, WIKITEXT_2)}
MANIFEST = "snapshot.json"


class HubUnavailableError(datasets.DataUnavailableError):
    """The Hub could not be reached (or refused), and the snapshot is not cached."""


def folder(snapshot: Snapshot) -> Path:
    """Where ``snapshot`` is kept once verified."""
    return datasets.cache_dir() / "hub" / snapshot.name / snapshot.revision


def is_complete(snapshot: Snapshot, root: Path) -> bool:
    """Whether ``root`` holds the verified snapshot (its manifest is written last and
    records every file's size, checked here; the hashes were checked on download)."""
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    sizes = manifest.get("files", {})
    for f in snapshot.files:
        path = root / f.path
        if f.path not in sizes or not path.is_file():
            return False
        if path.stat().st_size != sizes[f.path]["size"]:
            return False
    return manifest.get("revision") == snapshot.revision


def fetch(snapshot: Snapshot) -> Path:
    """The folder of ``snapshot``'s verified files: downloaded once (one process at a
    time), then read from the cache.

    Raises :class:`HubUnavailableError` (no network, with the ways out) and
    :class:`rocm_dl_guide.core.archives.ChecksumError` (a file does not match; nothing
    is kept).
    """
    root = folder(snapshot)
    files.prepare_once(
        root,
        lambda r: is_complete(snapshot, r),
        lambda: _download(snapshot, root),
        what=f"{snapshot.repo_id} at {snapshot.revision[:12]}",
    )
    return root


def _download(snapshot: Snapshot, root: Path) -> None:
    from huggingface_hub import hf_hub_download

    expected = expected_hashes(snapshot)  # before any download: offline fails at once
    print(f"downloading {snapshot.describe()} from {snapshot.url}", flush=True)
    with files.staged_directory(root, label="download") as tmp:
        record = {}
        for f in snapshot.files:
            try:
                path = hf_hub_download(
                    snapshot.repo_id,
                    f.path,
                    repo_type=snapshot.repo_type,
                    revision=snapshot.revision,
                    local_dir=tmp,
                )
            except Exception as exc:  # noqa: BLE001 - classified in _unavailable
                files.raise_if_disk_full(exc, root)
                raise _unavailable(snapshot, exc) from exc
            algorithm, want = expected[f.path]
            got = blob_hash(Path(path)) if algorithm == "git-sha1" else archives.file_hash(path)
            if got != want:
                raise archives.ChecksumError(
                    f"checksum mismatch for {f.path} of {snapshot.repo_id} at "
                    f"{snapshot.revision[:12]}: {algorithm} {got}, expected {want} "
                    "(nothing was kept)"
                )
            record[f.path] = {"size": Path(path).stat().st_size, algorithm: want}
        shutil.rmtree(tmp / ".cache", ignore_errors=True)  # huggingface_hub's own metadata
        manifest = {
            "repo_id": snapshot.repo_id,
            "repo_type": snapshot.repo_type,
            "revision": snapshot.revision,
            "license": snapshot.license,
            "files": record,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


def expected_hashes(snapshot: Snapshot) -> dict[str, tuple[str, str]]:
    """``path -> (algorithm, hex digest)`` for every file: the SHA-256 recorded here,
    or else the Hub's record of the pinned revision (LFS files: SHA-256; others:
    the git blob hash, ``git-sha1``)."""
    hashes = {f.path: ("sha256", f.sha256) for f in snapshot.files if f.sha256}
    ask = [f.path for f in snapshot.files if not f.sha256]
    if ask:
        from huggingface_hub import HfApi

        try:
            infos = HfApi().get_paths_info(
                snapshot.repo_id, ask, revision=snapshot.revision, repo_type=snapshot.repo_type
            )
        except Exception as exc:  # noqa: BLE001 - classified in _unavailable
            raise _unavailable(snapshot, exc) from exc
        for info in infos:
            lfs = getattr(info, "lfs", None)
            hashes[info.path] = ("sha256", lfs.sha256) if lfs else ("git-sha1", info.blob_id)
    missing = [p for p in ask if p not in hashes]
    if missing:
        raise archives.ChecksumError(
            f"{snapshot.repo_id} at {snapshot.revision[:12]} has no file {missing[0]}"
        )
    return hashes


def blob_hash(path: Path) -> str:
    """The git blob hash of ``path`` (SHA-1 of ``blob <size>\\0`` and the bytes): what the
    Hub records for files stored in git rather than LFS."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _unavailable(snapshot: Snapshot, exc: BaseException) -> HubUnavailableError:
    reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return HubUnavailableError(
        f"cannot download {snapshot.describe()} from the Hugging Face Hub ({reason[:200]}). "
        f"Two ways out: on a machine with network run `python -m rocm_dl_guide data fetch "
        f"{snapshot.name}` and copy the folder it prints to {folder(snapshot)} here "
        f"(${datasets.ENV_VAR} moves the cache); or use the offline data with "
        f"--data-source fixtures ({profiles.DATA_SOURCE_VAR}=fixtures): Python's "
        "documentation and a model pretrained on it."
    )
