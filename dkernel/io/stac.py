"""STAC items in, lazily: odc-stac builds a Dask-backed cube of the assets on one grid.

A STAC item, item collection or list of items (a JSON file, a URL, or ``pystac`` objects) is
loaded with ``odc.stac.load``: the assets named are read on the grid given by ``crs``,
``resolution`` and ``bounds`` (odc-stac reprojects each asset tile by tile, in Dask tasks), so
nothing is read until the job computes. Asset hrefs may be local paths, ``s3://``,
``https://`` URLs or GDAL paths (``s3://`` is read as ``/vsis3/``). ``odc-stac`` and ``pystac``
come with the ``cloud`` extra.

Used by reader ``stac`` and by :func:`dkernel.cluster_image`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import rioxarray  # noqa: F401  (registers the .rio accessor)
import xarray as xr

from dkernel.errors import InvalidInputError

#: Largest STAC JSON document read (bytes).
MAX_STAC_BYTES = 64 << 20


def _read_json(source: str, storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    from dkernel.storage.remote import is_remote, local_path

    try:
        if is_remote(source):
            from dkernel.io.remote import read_remote_bounded

            text = read_remote_bounded(
                source,
                MAX_STAC_BYTES,
                "the STAC document",
                storage_options,
                advice="A STAC item is a few kB; search a catalog (pystac-client) for items.",
            )
        else:
            from dkernel.io.files import read_bounded

            text = read_bounded(local_path(source), MAX_STAC_BYTES, "STAC document")
        return json.loads(text)
    except InvalidInputError:
        raise
    except Exception as exc:  # noqa: BLE001  (I/O and JSON errors alike)
        raise InvalidInputError(
            f"could not read the STAC document {source}: {str(exc)[:200]} ({type(exc).__name__})."
        ) from None


def stac_items(source: Any, storage_options: Mapping[str, Any] | None = None) -> list[Any]:
    """The ``pystac.Item`` list of ``source``: an item or item collection (feature
    collection) JSON path or URL, a ``pystac`` Item / ItemCollection, or a list of Items.
    Relative asset hrefs are made absolute against the document's location.

    Raises
    ------
    InvalidInputError
        Unreadable document, not an item or item collection, or no item.
    """
    import pystac

    if isinstance(source, pystac.Item):
        return [source]
    if isinstance(source, pystac.ItemCollection):
        return list(source)
    if isinstance(source, Sequence) and not isinstance(source, str):
        items = list(source)
        if not all(isinstance(i, pystac.Item) for i in items):
            raise InvalidInputError("a list of STAC items must hold pystac.Item objects only.")
        return items
    if not isinstance(source, str | os.PathLike):
        raise InvalidInputError(
            f"expected a STAC item or item collection (a path, URL or pystac object); got "
            f"{type(source).__name__}."
        )
    href = os.fspath(source)
    doc = _read_json(href, storage_options)
    kind = doc.get("type") if isinstance(doc, dict) else None
    try:
        if kind == "Feature":
            items = [pystac.Item.from_dict(doc)]
        elif kind == "FeatureCollection":
            items = list(pystac.ItemCollection.from_dict(doc))
        else:
            raise InvalidInputError(
                f"{href} is not a STAC item or item collection (its 'type' is {kind!r}; "
                "'Feature' or 'FeatureCollection' is expected). For a STAC collection or "
                "catalog, search it (pystac-client) and pass the items."
            )
    except InvalidInputError:
        raise
    except Exception as exc:  # noqa: BLE001  (pystac validation errors)
        raise InvalidInputError(
            f"{href} is not a valid STAC document: {str(exc)[:200]} ({type(exc).__name__})."
        ) from None
    from dkernel.storage.remote import is_url

    base = href if is_url(href) else os.path.abspath(href)
    for item in items:
        if not item.assets:
            raise InvalidInputError(
                f"{href}: the STAC item {item.id!r} has no assets, so there is nothing to "
                "read. Give an item whose assets are the bands to cluster."
            )
        for name, asset in item.assets.items():
            if not isinstance(asset.href, str) or not asset.href.strip():
                raise InvalidInputError(
                    f"{href}: asset {name!r} of the STAC item {item.id!r} has an empty href; "
                    "each asset read needs the path or URL of its file."
                )
            if not is_url(asset.href) and not os.path.isabs(asset.href):
                asset.href = _join(base, asset.href)
    if not items:
        raise InvalidInputError(f"{href} holds no STAC item.")
    return items


def _join(base: str, relative: str) -> str:
    """``relative`` (an asset href) against the document ``base``: a path beside a local
    document, a URL beside a remote one (``s3://bucket/a/item.json`` + ``b.tif`` is
    ``s3://bucket/a/b.tif``: ``urljoin`` joins only the schemes it knows, not ``s3://``);
    ``..`` stops at the bucket (host)."""
    import posixpath
    from urllib.parse import urlsplit, urlunsplit

    from dkernel.storage.remote import is_url, local_path, scheme_of, to_fsspec

    if not is_url(base):
        return os.path.normpath(os.path.join(os.path.dirname(base), relative))
    if scheme_of(base) == "file":
        return _join(local_path(base), relative)
    parts = urlsplit(to_fsspec(base))
    rel = urlsplit(relative)
    # a leading '..' stops at the bucket (host): normpath of an absolute key
    joined = posixpath.normpath(posixpath.join("/", posixpath.dirname(parts.path), rel.path))
    return urlunsplit((parts.scheme, parts.netloc, joined, rel.query, ""))


def open_stac(
    source: Any,
    *,
    assets: list[str] | None = None,
    crs: str | None = None,
    resolution: float | None = None,
    bounds: list[float] | None = None,
    chunk_size: int = 1024,
    storage_options: Mapping[str, Any] | None = None,
) -> xr.DataArray:
    """A STAC item's (or items') assets as a lazy ``(band, y, x)`` cube (odc-stac).

    Parameters
    ----------
    source : path, URL, pystac Item, ItemCollection or list of Items
    assets : list of str, optional
        The asset names to load as bands (default: every raster asset).
    crs : str, optional
        Output CRS (default: the items' native CRS, from their projection extension).
    resolution : float, optional
        Output pixel size in ``crs`` units (default: the native one).
    bounds : list of float, optional
        ``[xmin, ymin, xmax, ymax]`` in ``crs`` when given, else in longitude/latitude.
    chunk_size : int
        Rows and columns per Dask chunk.
    storage_options : dict, optional
        Options of a remote STAC document; the assets are read with GDAL and the
        environment's ``AWS_*`` variables.

    Returns
    -------
    DataArray
        Dask-backed ``(band, y, x)`` with band names, CRS and transform; nothing read yet.

    Raises
    ------
    InvalidInputError
        A missing asset, items of several dates, or a grid that cannot be worked out.
    """
    import odc.stac

    from dkernel.io.remote import to_gdal

    items = stac_items(source, storage_options)
    configure_stac_reads(storage_options)
    if assets:
        for item in items:
            missing = [a for a in assets if a not in item.assets]
            if missing:
                raise InvalidInputError(
                    f"STAC item {item.id!r} has no asset {missing[0]!r}; it has "
                    f"{', '.join(sorted(item.assets)) or 'none'}."
                )
    grid: dict[str, Any] = {}
    if crs is not None:
        grid["crs"] = crs
    if resolution is not None:
        grid["resolution"] = float(resolution)
    if bounds is not None:
        if len(bounds) != 4:
            raise InvalidInputError(f"bounds: four numbers are expected; got {bounds!r}.")
        xmin, ymin, xmax, ymax = (float(v) for v in bounds)
        if crs is not None:
            grid |= {"x": (xmin, xmax), "y": (ymin, ymax)}
        else:
            grid["bbox"] = (xmin, ymin, xmax, ymax)
    _check_grid(items, assets, grid)
    try:
        ds = odc.stac.load(
            items,
            bands=list(assets) if assets else None,
            chunks={"x": int(chunk_size), "y": int(chunk_size)},
            patch_url=to_gdal,
            groupby="solar_day",
            **grid,
        )
    except Exception as exc:  # noqa: BLE001  (odc-stac raises ValueError and friends)
        raise InvalidInputError(
            f"could not build a cube of the STAC items: {str(exc)[:300]} "
            f"({type(exc).__name__}). Name the assets (data.assets) and give crs and "
            "resolution when the items lack the projection extension."
        ) from None
    if "time" in ds.dims:
        if ds.sizes["time"] != 1:
            raise InvalidInputError(
                f"the STAC items span {ds.sizes['time']} dates; dkernel clusters one image. "
                "Select the items of one date."
            )
        ds = ds.isel(time=0, drop=True)
    names = [str(n) for n in ds.data_vars if n != "spatial_ref"]
    nodata = {ds[n].attrs.get("nodata") for n in names}
    cube = ds[names].to_dataarray(dim="band").transpose("band", "y", "x")
    if cube.rio.crs is None:
        cube = cube.rio.write_crs(ds.odc.crs.to_wkt())
    if len(nodata) == 1 and None not in nodata:
        cube = cube.rio.write_nodata(nodata.pop(), encoded=False)
    return cube


def _check_grid(items: list[Any], assets: list[str] | None, grid: dict[str, Any]) -> None:
    """Refuse the cube odc-stac would build when its grid (from the items' ``proj:shape``
    and ``proj:transform``, or ``crs``, ``resolution`` and ``bounds``) is larger than the
    memory limit allows (:func:`dkernel._budget.check_image_size`), before any task graph
    is built. A grid that cannot be worked out is left to ``odc.stac.load``'s message."""
    import odc.stac

    from dkernel._budget import check_image_size

    try:
        parsed = list(odc.stac.parse_items(items))
        geobox = odc.stac.output_geobox(parsed, list(assets) if assets else None, **grid)
    except Exception:  # noqa: BLE001  (odc-stac's own errors: named by the load)
        return
    if geobox is None:
        return
    rows, cols = (int(n) for n in geobox.shape)
    bands = len(assets) if assets else max((len(p.bands) for p in parsed), default=1)
    check_image_size(
        bands,
        rows,
        cols,
        what="the STAC items' grid",
        alternative="check the items' proj:shape and proj:transform, or give data.bounds "
        "(a smaller region) or a coarser data.resolution.",
    )


def configure_stac_reads(storage_options: Mapping[str, Any] | None = None) -> None:
    """Set the GDAL options odc-stac reads STAC assets with: those of ``storage_options``
    (endpoint, anonymous access, and credentials through an AWS session, the only way
    rasterio takes them) over the environment's. odc-stac captures them in its read tasks
    when the cube is built, so workers of a distributed cluster read with them too."""
    import odc.stac

    from dkernel.io.remote import gdal_session_options

    config, keys = gdal_session_options(storage_options)
    odc.stac.configure_rio(aws=keys or None, **config)


def load_stac(
    path: str,
    assets: list[str] | None = None,
    crs: str | None = None,
    resolution: float | None = None,
    bounds: list[float] | None = None,
    scale: str = "minmax",
    coord_scale: float = 0.25,
    roi: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Any:
    """Reader ``stac``: the valid pixels of a STAC item's assets (:func:`open_stac`) as
    features, the lazy cube kept for output; ``roi`` a region of it."""
    from dkernel.io.cube import image_from_xarray
    from dkernel.io.raster import apply_roi, raster_to_loaded

    cube = open_stac(
        path,
        assets=assets,
        crs=crs,
        resolution=resolution,
        bounds=bounds,
        storage_options=storage_options,
    )
    image = apply_roi(image_from_xarray(cube), roi)
    image.attrs["source"] = str(path)
    return raster_to_loaded(
        image, scale=scale, coord_scale=coord_scale, meta={"source": str(path), "stac": True}
    )
