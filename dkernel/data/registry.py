"""The public datasets the example jobs and notebooks read: where to get them, their size,
checksum and licence, and a download that verifies them (``dkernel data fetch NAME``).

Every file is a byte-for-byte copy of a file in a public GitHub repository at a fixed commit
(the sources of ``$DKERNEL_DATA/MANIFEST.md``), fetched into the folder layout the readers
expect (``DKERNEL_DATA/<folder>/<file>``). A download is written beside its target, checked
against its size and SHA-256 and only then moved into place; a file already there is checked
the same way and kept when it matches, refused when it does not. On a machine that cannot
reach the sources, ``--from DIR`` copies the files from a folder that already holds them
(a checkout of the source repository, another machine's data folder), found by content.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dkernel.errors import DKernelError, InvalidInputError


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset: where it goes under the data folder and where it comes from."""

    path: str
    size: int
    sha256: str
    url: str


@dataclass(frozen=True)
class Dataset:
    """A dataset of the registry.

    Attributes
    ----------
    name : str
        What ``dkernel data fetch`` takes.
    title : str
    licence : str
        The terms found for it (check them before use beyond research and testing).
    files : tuple of DataFile
    readers : tuple of str
        The job readers (``data: reader:``) that read it.
    used_by : tuple of str
        The example jobs and notebooks that need it.
    """

    name: str
    title: str
    licence: str
    files: tuple[DataFile, ...]
    readers: tuple[str, ...] = ()
    used_by: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        """Bytes of all its files."""
        return sum(f.size for f in self.files)


def _github(repo: str, commit: str, path: str) -> str:
    return f"https://github.com/{repo}/raw/{commit}/{path}"


_HSI = "mhaut/HSI-datasets"
_HSI_HEAD = "29efb503bdde94f620ba3873d3a56039fef18257"
# the ground-truth files were deleted from the repository later: read from an older commit
_HSI_OLD = "6e351f13603d4ac76ef4e40811c072d5329ccb63"
_SHAPES = ("DiGiDeoni/density-peaks", "742a6c14b999")

#: The datasets by name.
DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            "statlog",
            "Statlog (Landsat Satellite), UCI",
            "CC BY 4.0 (UCI)",
            tuple(
                DataFile(
                    f"statlog_landsat_satellite/{name}",
                    size,
                    sha,
                    _github(
                        "dirichletcal/experiments_neurips",
                        "54989edf11995f7f0f8390766e51133373044db2",
                        f"datasets/{name}",
                    ),
                )
                for name, size, sha in (
                    (
                        "sat.trn",
                        530265,
                        "6da888aa398f4dd56a85bb7114f7206896a360b7af1d790450f64dbdb8493fc5",
                    ),
                    (
                        "sat.tst",
                        238745,
                        "0045be0391420a35a69e8d2b0a4ff4b032a4aa03feebba0d89b9aa3e2d42c212",
                    ),
                )
            ),
            readers=("statlog-landsat",),
            used_by=(
                "jobs/kdc-statlog-knn.yaml",
                "jobs/kernel-kmeans-statlog.yaml",
                "jobs/kppr-landsat-pck.yaml",
                "jobs/pck-statlog.yaml",
            ),
        ),
        Dataset(
            "samson",
            "Samson hyperspectral scene with ground-truth abundances (F. Zhu)",
            "research use; cite Zhu et al. 2014",
            (
                DataFile(
                    "hyperspectral_unmixing_samson_jasper/Samson.mat",
                    3604014,
                    "4ce4b636feb6f429f8d03ac4ecc94bb97fd87d380ff25ce505765e372d6a1cd9",
                    _github(_HSI, _HSI_HEAD, "Unmixing/Samson.mat"),
                ),
                DataFile(
                    "hyperspectral_unmixing_samson_jasper/_EndSamson.mat",
                    134259,
                    "ce768182ce5292390180f827ff5769112cf3d299f4e64ab43e950a310b7ec9fa",
                    _github(_HSI, _HSI_OLD, "Unmixing/_EndSamson.mat"),
                ),
            ),
            readers=("samson",),
            used_by=("jobs/mssc-samson.yaml",),
        ),
        Dataset(
            "jasper",
            "Jasper Ridge hyperspectral scene (AVIRIS, 198 bands) with ground truth (F. Zhu)",
            "research use; cite Zhu et al. 2014",
            (
                DataFile(
                    "hyperspectral_unmixing_samson_jasper/JasperRidge2_R198.mat",
                    2987224,
                    "0e4118a6452f6044978a8ca3762fb0f791115467904936d463c4e111e56e682e",
                    _github(_HSI, _HSI_HEAD, "Unmixing/JasperRidge2_R198.mat"),
                ),
                DataFile(
                    "hyperspectral_unmixing_samson_jasper/_EndJasperRidge2_R198.mat",
                    178271,
                    "92f5697b43705802b904fd13ba99b6ce65a3d203682864abc3fbec922beec374",
                    _github(_HSI, _HSI_OLD, "Unmixing/_EndJasperRidge2_R198.mat"),
                ),
            ),
            readers=("jasper",),
            used_by=("jobs/mssc-jasper.yaml",),
        ),
        Dataset(
            "geotiff",
            "Landsat 7 ETM+ RGB subset, rasterio's RGB.byte.tif (EPSG:32618)",
            "CC0 1.0",
            (
                DataFile(
                    "geotiff_rasterio_RGB_byte/RGB.byte.tif",
                    1745956,
                    "d7cbe932c7ed74a627706a9e9df99f706df3e5abc7d45a49e9d00677a6b09eb4",
                    _github(
                        "rasterio/rasterio",
                        "9709d1fce53b8c11ace1741ef25cfe427b197fb8",
                        "tests/data/RGB.byte.tif",
                    ),
                ),
            ),
            used_by=("jobs/mssc-geotiff.yaml",),
        ),
        Dataset(
            "wisconsin",
            "Breast Cancer Wisconsin (Original), UCI",
            "CC BY 4.0 (UCI)",
            tuple(
                DataFile(
                    f"breast_cancer_wisconsin_original/{name}",
                    size,
                    sha,
                    _github(
                        "Yoris95/Breast_cancer_detection",
                        "4ef8e6c42e7571e913c09ac0cc9e5a24f0e516d2",
                        name,
                    ),
                )
                for name, size, sha in (
                    (
                        "breast-cancer-wisconsin.data",
                        19889,
                        "402c585309c399237740f635ef9919dc512cca12cbeb20de5e563a4593f22b64",
                    ),
                    (
                        "breast-cancer-wisconsin.names",
                        5657,
                        "d3198c2787ed29bea86ce12396cdd5441e9c88844d66ad0195f19639e48d336e",
                    ),
                )
            ),
            readers=("wisconsin",),
            used_by=("jobs/pck-wisconsin.yaml",),
        ),
        Dataset(
            "frey",
            "Frey faces (B. Frey, distributed by S. Roweis)",
            "no explicit licence; research use",
            (
                DataFile(
                    "frey_faces/frey_rawface.mat",
                    1100584,
                    "265a83a23adb081755cd3de375509828e690324d1d60f076b8ecebc840d59c64",
                    _github(
                        "vilhess/projet_meth_ia",
                        "417f18d3bba5d716291a891c22e8f57da426a819",
                        "dataset/frey_rawface.mat",
                    ),
                ),
            ),
            readers=("frey-faces",),
            used_by=("jobs/jrc-frey-pck.yaml", "notebooks/04_ranking.ipynb"),
        ),
        Dataset(
            "shapes",
            "2-D clustering shape sets (P. Fränti's SIPU collection): jain and four more",
            "no explicit licence; cite the original papers (MANIFEST §6)",
            tuple(
                DataFile(f"shapes_2d_sipu/{name}", size, sha, _github(*_SHAPES, name))
                for name, size, sha in (
                    (
                        "jain.txt",
                        5163,
                        "f4428c4ed21848662da7e44560d7dc0466e3eecbbb684a597d266fa4e55d32e0",
                    ),
                    (
                        "Aggregation.txt",
                        10428,
                        "1a3a252ec5d031b56ca6804336c3a0335ea01f894022f0ae7a8cec86a49e2184",
                    ),
                    (
                        "flame.txt",
                        3243,
                        "f91bc07fb14c702188d9b9d682892215a9e9db5cf56b23d1d4db8fab3bd80073",
                    ),
                    (
                        "pathbased.txt",
                        4148,
                        "014962a17b2a74c13e638f3e06ddba3dd603c18167f09e252e9969a37a3058d6",
                    ),
                    (
                        "spiral.txt",
                        4294,
                        "6bdf052975e58142c62b6dec78a148a97a2712aa588bd73dc25ee4ab32874817",
                    ),
                )
            ),
            readers=("shapes",),
            used_by=("jobs/kdc-shapes-jain.yaml", "jobs/spectral-shapes-jain.yaml"),
        ),
    )
}

#: Bytes read from a source at a time while downloading.
_CHUNK = 1 << 16


def get_dataset(name: str) -> Dataset:
    """The dataset ``name``; an unknown name lists the known ones."""
    try:
        return DATASETS[name]
    except KeyError:
        raise InvalidInputError(
            f"no dataset named {name!r} in the registry; known: {', '.join(sorted(DATASETS))} "
            "(`dkernel data list`)."
        ) from None


def sha256_of(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def check_file(path: str | os.PathLike, expected: DataFile) -> str | None:
    """None when ``path`` has the size and SHA-256 of ``expected``, else what differs."""
    size = os.stat(path).st_size
    if size != expected.size:
        return f"{size:,} bytes where {expected.size:,} are expected"
    got = sha256_of(path)
    if got != expected.sha256:
        return f"SHA-256 {got} where {expected.sha256} is expected"
    return None


def _download(url: str, target: Path, limit: int) -> None:
    """Copy ``url`` (https, or file for tests and mirrors) into ``target``, at most ``limit``
    bytes."""
    if not url.startswith(("https://", "file://", "http://127.0.0.1", "http://localhost")):
        raise InvalidInputError(f"refusing to download {url}: only https sources are used.")
    with urllib.request.urlopen(url, timeout=60) as response, open(target, "wb") as out:  # noqa: S310
        copied = 0
        while block := response.read(_CHUNK):
            copied += len(block)
            if copied > limit:
                raise DKernelError(f"{url} sent more than the {limit:,} bytes expected.")
            out.write(block)


def _temporary_beside(target: Path, root: Path) -> Path:
    """An empty temporary file in the folder of ``target`` (made if missing), for a download
    to be checked before it takes the target's name.

    Raises
    ------
    InvalidInputError
        When the data folder ``root`` cannot hold it: a regular file, a folder such as
        ``/proc/self`` where nothing can be made, no permission, a read-only filesystem.
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        what = "is not a folder" if root.exists() and not root.is_dir() else "cannot be written"
        raise InvalidInputError(
            f"the data folder {root} {what} ({exc.strerror or exc}: {exc.filename or target}). "
            "Pass `--to DIR` with a folder you can write (or set DKERNEL_DATA to one)."
        ) from None
    os.close(fd)
    return Path(name)


def fetch(
    name: str,
    to: str | os.PathLike,
    *,
    from_folder: str | os.PathLike | None = None,
    report: Callable[[str], None] | None = None,
) -> list[Path]:
    """Download the dataset ``name`` of :data:`DATASETS` into the data folder ``to``, or copy
    it from ``from_folder``, verified (:func:`fetch_files`; an unknown name raises
    :class:`InvalidInputError` listing the known ones)."""
    return fetch_files(get_dataset(name), to, from_folder=from_folder, report=report)


def fetch_files(
    dataset: Dataset,
    to: str | os.PathLike,
    *,
    from_folder: str | os.PathLike | None = None,
    report: Callable[[str], None] | None = None,
) -> list[Path]:
    """Download the files of ``dataset`` into the data folder ``to``, verified.

    Parameters
    ----------
    dataset : Dataset
        One of :data:`DATASETS`, or a benchmark's own (``benchmarks/realdata_sets.py``).
    to : path
        The data folder (what ``DKERNEL_DATA`` points to); the dataset's subfolders are made
        in it.
    from_folder : path, optional
        Copy the files from this folder instead of downloading them: each is the file under
        it (at any depth, under any name) with the registry's size and SHA-256, so a checkout
        of the source repository or another machine's data folder will do. Every missing
        file must be found there before any is copied.
    report : callable, optional
        Called with one line per file (kept, downloaded, copied).

    Returns
    -------
    list of Path
        The dataset's files under ``to``.

    Raises
    ------
    InvalidInputError
        A file already at the target that does not match the registry (it is left alone:
        move it away to fetch again); ``from_folder`` not a folder, or without a file the
        registry names (all such files are listed; nothing is copied).
    DKernelError
        A download that failed or does not match its size and SHA-256 (nothing is written).
    """
    root = Path(to).expanduser()
    say = report or (lambda line: None)
    paths, missing = [], []
    for entry in dataset.files:
        target = root / entry.path
        paths.append(target)
        if not target.exists():
            missing.append((entry, target))
            continue
        problem = check_file(target, entry)
        if problem is not None:
            raise InvalidInputError(
                f"{target} exists but is not the registry's file ({problem}); it is left "
                "as it is: move it away and fetch again."
            )
        say(f"{entry.path}: present, checksum ok")
    copies = (
        _copies_in(Path(from_folder).expanduser(), [entry for entry, _ in missing])
        if from_folder is not None and missing
        else {}
    )
    for entry, target in missing:
        tmp = _temporary_beside(target, root)
        try:
            if entry.path in copies:
                try:
                    shutil.copyfile(copies[entry.path], tmp)
                except OSError as exc:
                    raise DKernelError(f"could not copy {copies[entry.path]}: {exc}") from exc
                origin, what = f"copied from {copies[entry.path]}", f"{copies[entry.path]}"
            else:
                try:
                    _download(entry.url, tmp, entry.size)
                except OSError as exc:
                    raise DKernelError(f"could not download {entry.url}: {exc}") from exc
                origin, what = "downloaded", f"the download of {entry.url}"
            problem = check_file(tmp, entry)
            if problem is not None:
                raise DKernelError(
                    f"{what} does not match the registry ({problem}); nothing was written."
                )
            shutil.move(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        say(f"{entry.path}: {origin}, {entry.size:,} bytes, checksum ok")
    return paths


def _copies_in(folder: Path, entries: list[DataFile]) -> dict[str, Path]:
    """The file under ``folder`` (any depth, any name) with each entry's size and SHA-256,
    by entry path; only files of a wanted size are hashed.

    Raises
    ------
    InvalidInputError
        ``folder`` is not a folder, or holds no copy of some entries (all of them named).
    """
    if not folder.is_dir():
        raise InvalidInputError(
            f"--from {folder}: not a folder. Pass the folder that holds the dataset's files "
            "(a checkout of its source repository, or another data folder)."
        )
    wanted: dict[int, list[DataFile]] = {}
    for entry in entries:
        wanted.setdefault(entry.size, []).append(entry)
    found: dict[str, Path] = {}
    for parent, _, names in os.walk(folder):
        for name in sorted(names):
            path = Path(parent) / name
            try:
                status = path.stat()
            except OSError:  # a dangling link, a vanished file
                continue
            if not stat.S_ISREG(status.st_mode):  # a FIFO would block the read
                continue
            candidates = wanted.get(status.st_size, [])
            open_ones = [e for e in candidates if e.path not in found]
            if not open_ones:
                continue
            try:
                digest = sha256_of(path)
            except OSError:  # unreadable (permissions, a vanished file): not a copy
                continue
            for entry in open_ones:
                if entry.sha256 == digest:
                    found[entry.path] = path
    absent = [e for e in entries if e.path not in found]
    if absent:
        listed = "; ".join(f"{e.path} ({e.size:,} bytes)" for e in absent)
        raise InvalidInputError(
            f"no file under {folder} has the size and SHA-256 the registry gives for: "
            f"{listed}. Nothing was copied; pass the folder that holds them, or fetch "
            "without --from to download them."
        )
    return found


#: Error texts that mean a reader did not find its data.
_MISSING = re.compile(
    r"not found|does not exist|DKERNEL_DATA is not set|No such file|FileNotFoundError"
)


def fetch_hint(reader: str, message: str) -> str | None:
    """The ``dkernel data fetch NAME`` advice for a reader's error, when its data is missing.

    The dataset is the one read by ``reader`` or the one with a file named in ``message``.
    """
    if not _MISSING.search(message):
        return None
    for dataset in DATASETS.values():
        names = {Path(f.path).name for f in dataset.files}
        if reader in dataset.readers or any(n in message for n in names):
            return (
                f"Get the data with `dkernel data fetch {dataset.name} --to DIR` and set "
                "DKERNEL_DATA=DIR."
            )
    return None


def missing_path_hint(path: str) -> str:
    """Advice for a data path that does not exist: the dataset with a file of that name, or,
    for a path under ``DKERNEL_DATA``, the registry's commands."""
    hint = fetch_hint("", f"not found: {path}")
    if hint is not None:
        return " " + hint
    if "DKERNEL_DATA" in path:
        return (
            " The example datasets: `dkernel data list` names them, `dkernel data fetch NAME "
            "--to DIR` downloads one (then set DKERNEL_DATA=DIR)."
        )
    return ""
