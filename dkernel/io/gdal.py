"""GDAL in a job's processes: a bounded block cache, no network, GeoTIFF files only.

GDAL keeps decoded blocks in a process-wide cache of 5 % of the RAM by default. A job decodes
every tile of a scene once, so without a bound a worker's memory grows with the scene (≈ 100 MiB
per worker for a 9 · 10⁶-pixel, 6-band uint16 scene on two workers, up to 1.2 GiB for a
Sentinel-2 tile) while the cache never serves a second read.

GDAL also reads files that point at other files: a VRT (XML) names its sources, which may be
any local file (a ``VRTRawRasterBand`` over ``/etc/passwd`` reads as an image) or a URL
(``/vsicurl/http://…``, fetched at open or read time). A ``.tif`` name says nothing about what
a file holds, so every raster a job reads is opened with the GTiff driver only
(:func:`open_local_raster`): a VRT, a WMS description or a tile index is refused, naming what it
is, and GDAL's network access and its lookup of sidecar files are switched off while it is
open (:data:`NETWORK_OFF`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dkernel.errors import InvalidInputError

#: GDAL block cache (MiB) of a job's processes. Reads cover whole rows of the file's blocks
#: (:func:`dkernel.io.raster.block_rows`) and GDAL decodes each block once per read, so the
#: cache never serves a later read: it only has to hold the blocks of one read in flight (a
#: pixel-interleaved 512 × 512 tile of 6 uint16 bands is 3 MiB). 16 MiB keeps one decode
#: per tile (``benchmarks/results/tile_reads.md``) while a full cache no longer adds to a
#: worker's memory on large scenes (64 MiB did: ≈ 50 MiB more per process at 10⁸ pixels
#: than at 10⁶, where the whole scene is 12 MB).
GDAL_CACHE_MB = 16

#: The one GDAL driver rasters are read with: GeoTIFF (COGs included). Every other driver is
#: refused, the indirections among them (VRT, WMS, tile indexes) because they make GDAL read
#: files or URLs that the job's confinement never saw.
RASTER_DRIVER = "GTiff"

#: GDAL configuration while a local raster is open: ``/vsicurl/`` and the other network file
#: systems only open names ending in an extension no file has (so no request is ever sent),
#: no retries, and no sibling file at all: with ``GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR``
#: GDAL takes the folder for empty, so it opens the one file it is given (the path
#: :func:`dkernel.io.files.at_open` checked against the data root where it is opened) and no
#: sidecar (``.aux.xml``, ``.ovr``, ``.msk``, world files, ``.IMD``/``.RPB`` metadata), as
#: remote rasters are read already (``dkernel.io.remote.GDAL_REMOTE``). A sidecar checked
#: when the spec was validated could be swapped for a link out of the root before GDAL looks
#: it up by name; one GDAL never opens cannot. A GeoTIFF carries its georeferencing, nodata
#: and pixels itself; a job reads full-resolution pixels, so no overview is needed.
NETWORK_OFF = {
    "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".dkernel-network-access-is-off",
    "GDAL_HTTP_MAX_RETRY": "0",
    "GDAL_HTTP_TIMEOUT": "1",
    "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
}


def limit_gdal_cache(megabytes: int = GDAL_CACHE_MB) -> None:
    """Bound this process's GDAL block cache (no-op without rasterio)."""
    try:
        from rasterio.env import set_gdal_config
    except ImportError:  # pragma: no cover - rasterio is a dependency
        return
    set_gdal_config("GDAL_CACHEMAX", int(megabytes))


@contextmanager
def network_off() -> Iterator[None]:
    """GDAL with :data:`NETWORK_OFF` set for the calling thread (``rasterio.Env``)."""
    import rasterio

    with rasterio.Env(**NETWORK_OFF):
        yield


#: What a file GDAL's GTiff driver does not read is, by its first bytes.
_SIGNATURES = (
    (b"<vrtdataset", "a GDAL VRT (an XML file naming other files or URLs to read)"),
    (b"<gdal_wms", "a GDAL WMS description (an XML file naming a web map server)"),
    (b"<gdal_wcs", "a GDAL WCS description (an XML file naming a web coverage server)"),
    (b"<gdaltileindexdataset", "a GDAL tile index (an XML file naming other rasters)"),
    (b"<", "an XML or HTML file (GDAL reads some XML formats as pointers to other files)"),
    (b"\x89png", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"pk\x03\x04", "a ZIP archive"),
    (b"\x1f\x8b", "a gzip archive"),
)
_TIFF = (b"ii*\x00", b"mm\x00*", b"ii+\x00", b"mm\x00+")


def _what_it_is(path: Path, gdal_message: str) -> str:
    from dkernel.io.files import open_regular

    fd, _ = open_regular(path)
    try:
        head = os.read(fd, 64)
    finally:
        os.close(fd)
    return describe_head(head, gdal_message)


def describe_head(head: bytes, gdal_message: str) -> str:
    """What a file GDAL could not read as a GeoTIFF is, from its first bytes."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith(b"<?xml"):
        text = text[text.find(b"?>") + 2 :].lstrip() if b"?>" in text else text
    if any(text.startswith(magic) for magic in _TIFF):
        return f"a TIFF that GDAL could not read ({gdal_message[:200]})"
    if not head:
        return "empty (0 bytes)"
    return next((what for sig, what in _SIGNATURES if text.startswith(sig)), "not a GeoTIFF")


def refusal(path: Path | str, gdal_message: str, head: bytes | None = None) -> str:
    """Why ``path`` is not read: what it is (from ``head``, its first bytes, when given)
    and what to do instead."""
    what = (
        _what_it_is(Path(path), gdal_message) if head is None else describe_head(head, gdal_message)
    )
    if what.startswith("a TIFF") or what.startswith("empty"):
        return f"{path} is {what}. Check that the file was written and copied completely."
    return (
        f"{path} is {what}; dkernel reads GeoTIFF files directly and nothing else. VRT and "
        "other GDAL indirections are refused because they can make GDAL read files outside "
        "the data root or fetch URLs from the network. Convert it to a GeoTIFF (gdal_translate "
        "-of GTiff IN OUT.tif, with the sources inside the data root) and read that."
    )


@contextmanager
def open_local_raster(path: str | os.PathLike, **open_kwargs: Any) -> Iterator[Any]:
    """``rasterio.open`` of a local GeoTIFF only: a regular file, the GTiff driver, GDAL's
    network access off while it is open.

    Raises
    ------
    InvalidInputError
        Not a regular file, or not a GeoTIFF (a VRT and every other indirection included),
        naming what the file is.
    """
    import rasterio
    from rasterio.errors import RasterioIOError

    from dkernel.io.files import check_regular

    path = Path(path)
    check_regular(path, "raster")
    open_kwargs.setdefault("driver", RASTER_DRIVER)
    with network_off():
        try:
            src = rasterio.open(path, **open_kwargs)
        except RasterioIOError as exc:
            raise InvalidInputError(refusal(path, str(exc))) from None
        with src:
            check_sidecars(path, src.files)
            yield src


def check_sidecars(path: Path, files: list[str]) -> None:
    """Refuse a GeoTIFF whose file list (``dataset.files``: the sidecars GDAL reads with it,
    and what they point at) holds anything but regular local files beside it.

    Under :data:`NETWORK_OFF` GDAL opens no sidecar, so the list holds the GeoTIFF alone;
    this stays as a guard should GDAL list one anyway (an external overview, opened with
    every driver, would bring a VRT's sources: a URL, ``/etc/passwd``).

    Raises
    ------
    InvalidInputError
        Naming the GeoTIFF and the file.
    """
    from dkernel.io.files import file_kind

    folder = Path(path).absolute().parent
    for name in files[1:]:
        what = ""
        if str(name).startswith("/vsi"):
            what = "a GDAL virtual path (a URL or an archive)"
        elif Path(name).absolute().parent != folder:
            what = "not beside it"
        else:
            try:
                mode = os.stat(name).st_mode
            except OSError:
                mode = None
            if mode is None or not stat.S_ISREG(mode):
                what = "missing" if mode is None else file_kind(mode)
        if what:
            raise InvalidInputError(
                f"{path} brings {name} with it (GDAL reads it as part of the raster: an "
                f"overview, mask or metadata sidecar, or a file one of them points at), and "
                f"that is {what}. dkernel reads a GeoTIFF with regular sidecar files beside "
                "it only; remove the sidecar (e.g. a .ovr that is a VRT) or write the "
                "GeoTIFF again."
            )


def raster_files(path: str | os.PathLike) -> list[Path]:
    """The files GDAL reads for the GeoTIFF ``path``, links not resolved: the file itself
    (no sidecar is opened, :data:`NETWORK_OFF`), or whatever GDAL reports with it."""
    with open_local_raster(path) as src:
        return [Path(f) for f in src.files]


@contextmanager
def raster_env(path: str | os.PathLike, storage_options: dict | None = None) -> Iterator[None]:
    """GDAL's configuration for reading ``path``: :func:`network_off` for a local file,
    ``dkernel.io.remote.remote_gdal`` for a remote one (its network path only)."""
    from dkernel.io.remote import remote_gdal
    from dkernel.storage.remote import is_remote

    context = remote_gdal(storage_options) if is_remote(str(path)) else network_off()
    with context:
        yield


@contextmanager
def open_remote_raster(url: str, storage_options: dict | None = None) -> Iterator[Any]:
    """``rasterio.open`` of a remote GeoTIFF (``s3://``, ``https://``, ``/vsis3/``, …)
    through GDAL's network file systems, the GTiff driver only, no sidecar probed.

    Raises
    ------
    InvalidInputError
        The object is not a GeoTIFF (naming what it is) or could not be read.
    """
    import rasterio
    from rasterio.errors import RasterioIOError

    from dkernel.io.remote import read_head, remote_gdal, to_gdal

    with remote_gdal(storage_options):
        try:
            src = rasterio.open(to_gdal(url), driver=RASTER_DRIVER)
        except RasterioIOError as exc:
            try:
                head = read_head(url, 64, storage_options)
            except Exception as err:  # noqa: BLE001  (unreadable: GDAL's reason is the message)
                raise InvalidInputError(
                    f"could not read the GeoTIFF {url}: {str(exc)[:200]} ({type(err).__name__})."
                ) from None
            raise InvalidInputError(refusal(url, str(exc), head)) from None
        with src:
            yield src
