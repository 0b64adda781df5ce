"""Segments as a vector layer: dkernel's strip-wise ``write_segments`` against the in-memory recipe.

Both write the same GeoPackage (one polygon per 4-connected segment with ``segment``, ``class``,
``pixels``, ``area`` and ``mean_<band>``), from a label map stored in Zarr and a GeoTIFF:

* ``dkernel``: ``dkernel.io.vector.write_segments`` on the lazy label map (``da.from_zarr``)
  and the lazy image (``open_geotiff``), strips of ``chunk_rows`` rows (default ≈ 2^22 pixels,
  and a smaller strip to show the memory it buys);
* ``in-memory``: what one writes without it: the whole label map and image in NumPy,
  ``scipy.ndimage.label`` per class for segment ids, ``rasterio.features.shapes`` on the whole
  id array, ``shapely.geometry.shape`` per feature, ``np.bincount`` statistics,
  ``pyogrio.raw.write``.

Each run is a fresh Python process (``--worker``), so the peak resident memory (``VmHWM``)
is that method's alone; "growth" is the peak minus the resident memory after the imports.
The outputs are checked to hold the same features.

Label maps:

* ``blobs``: synthetic, N × N pixels (default 4000; ``--quick`` 2000), 6 classes (sextiles)
  of a smooth random field (bilinear upsampling of 1/40-resolution noise plus a little pixel
  noise, so boundaries are ragged and there are small segments: 28 k segments at 2000²), a nodata border of 50 pixels;
  3-band uint8 image.
* ``demo``: the vendored Landsat scene (718 × 791 × 3) with k-means(4) labels of its valid
  pixels (nodata collar -1).

Usage::

    python benchmarks/bench_vector.py [--quick] [--size 4000] [--strip-rows 256]
        [--out benchmarks/results/vector.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("dkernel", "in-memory")


def _status_mib(key: str) -> float:
    """``VmRSS`` or ``VmHWM`` (peak) of this process in MiB (Linux ``/proc/self/status``).

    Not ``ru_maxrss``: a child started by fork + exec inherits its parent's peak there.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def make_blobs(folder: Path, size: int, seed: int = 0) -> tuple[Path, Path]:
    """A blobby label map (Zarr, int32, -1 border) and a 3-band GeoTIFF of the same grid."""
    import dask.array as da
    import rioxarray  # noqa: F401
    import xarray as xr
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    coarse = rng.normal(size=(size // 40 + 2, size // 40 + 2))
    field = ndimage.zoom(coarse, size / (size // 40 + 2), order=1)[:size, :size]
    field += rng.normal(scale=0.02, size=field.shape)
    labels = np.digitize(field, np.quantile(field, [1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6]))
    labels = labels.astype(np.int32)
    border = 50
    labels[:border] = labels[-border:] = labels[:, :border] = labels[:, -border:] = -1
    zarr_path = folder / f"blobs{size}_labels.zarr"
    da.from_array(labels, chunks=(512, size)).to_zarr(str(zarr_path), overwrite=True)
    bands = np.stack([(labels * 40 + rng.integers(0, 30, labels.shape)) % 256] * 3).astype(np.uint8)
    bands[:, labels == -1] = 0
    image = xr.DataArray(
        bands,
        dims=("band", "y", "x"),
        coords={
            "band": [1, 2, 3],
            "y": 4_000_000 - 10.0 * (np.arange(size) + 0.5),
            "x": 500_000 + 10.0 * (np.arange(size) + 0.5),
        },
    )
    image = image.rio.write_crs("EPSG:32631").rio.write_nodata(0)
    tif = folder / f"blobs{size}.tif"
    image.rio.to_raster(tif, compress="deflate", tiled=True)
    return zarr_path, tif


def make_demo(folder: Path) -> tuple[Path, Path]:
    import dask.array as da
    from sklearn.cluster import KMeans

    from dkernel.io.raster import labels_to_raster, open_geotiff, package_data_path

    image = open_geotiff("package:RGB.byte.tif")
    valid = image["valid"].values
    X = image.values.reshape(3, -1).T[valid.ravel()].astype(np.float64)
    km = KMeans(4, n_init=1, random_state=0).fit(X[::20])
    labels = labels_to_raster(km.predict(X), valid)
    zarr_path = folder / "demo_labels.zarr"
    da.from_array(labels, chunks=(256, labels.shape[1])).to_zarr(str(zarr_path), overwrite=True)
    return zarr_path, package_data_path("RGB.byte.tif")


def run_dkernel(labels_path: str, tif: str, out: str, chunk_rows: int | None) -> None:
    import dask.array as da

    from dkernel.io.raster import open_geotiff
    from dkernel.io.vector import write_segments

    labels = da.from_zarr(labels_path)
    image = open_geotiff(tif)
    write_segments(out, labels, image, chunk_rows=chunk_rows)


def run_in_memory(labels_path: str, tif: str, out: str) -> None:
    import dask.array as da
    import pyogrio.raw
    import rasterio
    import rasterio.features
    import shapely
    from scipy import ndimage

    labels = np.asarray(da.from_zarr(labels_path))
    with rasterio.open(tif) as src:
        bands = src.read()
        transform, crs = src.transform, src.crs
    segment = np.full(labels.shape, -1, dtype=np.int32)
    classes, n = [], 0
    for c in np.unique(labels[labels != -1]):
        lbl, count = ndimage.label(labels == c)
        inside = lbl > 0
        segment[inside] = lbl[inside] - 1 + n
        classes += [c] * count
        n += count
    ids = segment.ravel()[segment.ravel() >= 0]
    pixels = np.bincount(ids, minlength=n)
    columns = {"segment": np.arange(1, n + 1), "class": np.asarray(classes), "pixels": pixels}
    columns["area"] = pixels * abs(transform.a * transform.e - transform.b * transform.d)
    for b, band in enumerate(bands, start=1):
        flat = band.ravel()[segment.ravel() >= 0]
        columns[f"mean_band_{b}"] = np.bincount(ids, weights=flat, minlength=n) / pixels
    geoms = np.empty(n, dtype=object)
    for geom, value in rasterio.features.shapes(segment, mask=segment >= 0, transform=transform):
        geoms[int(value)] = shapely.geometry.shape(geom)
    pyogrio.raw.write(
        out,
        shapely.to_wkb(geoms),
        list(columns.values()),
        list(columns),
        layer="segments",
        driver="GPKG",
        geometry_type="Polygon",
        crs=crs.to_wkt(),
    )


def worker(args: argparse.Namespace) -> None:
    import dask
    import pyogrio  # noqa: F401
    import rasterio.features  # noqa: F401
    import shapely  # noqa: F401

    import dkernel.io.vector  # noqa: F401

    dask.config.set(scheduler="synchronous")
    before = _status_mib("VmRSS")
    start = time.perf_counter()
    if args.worker == "dkernel":
        run_dkernel(args.labels, args.image, args.output, args.chunk_rows)
    else:
        run_in_memory(args.labels, args.image, args.output)
    seconds = time.perf_counter() - start
    peak = _status_mib("VmHWM")
    print(json.dumps({"seconds": seconds, "peak": peak, "growth": peak - before}))


def run_one(method: str, labels: Path, tif: Path, out: Path, chunk_rows: int | None) -> dict:
    cmd = [sys.executable, __file__, "--worker", method, "--labels", str(labels)]
    cmd += ["--image", str(tif), "--output", str(out)]
    if chunk_rows:
        cmd += ["--chunk-rows", str(chunk_rows)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(path: Path) -> dict:
    import pyogrio.raw
    import shapely

    meta, _, wkb, fields = pyogrio.raw.read(path, layer="segments")
    cols = dict(zip(meta["fields"], fields, strict=True))
    return {
        "features": len(wkb),
        "area": float(shapely.area(shapely.from_wkb(wkb)).sum()),
        "pixels": sorted(zip(cols["class"].tolist(), cols["pixels"].tolist(), strict=True)),
    }


def markdown(rows: list[dict], quick: bool) -> str:
    lines = [
        "# Segments as a vector layer (`benchmarks/bench_vector.py`)",
        "",
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        + (" (`--quick`)" if quick else "")
        + ". One fresh process per run; dask's synchronous scheduler. Peak = `VmHWM` of the "
        "run's process; growth = peak − RSS after the imports. Ratios: dkernel / in-memory. "
        "Every run writes the same features (checked: count, total area, sorted (class, "
        "pixels)).",
        "",
        "dkernel holds one strip of labels and image values at a time; the rest of its memory is "
        "the output (the polygons, then their WKB), which both methods hold. The in-memory "
        "recipe holds the whole label map, segment ids, masks and image at once.",
        "",
        "| labels | valid pixels | segments | method | chunk_rows | s | peak MiB | growth MiB | "
        "time ratio | growth ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['set']} | {r['n_pixels']} | {r['features']} | {r['method']} | "
            f"{r['chunk_rows'] or '–'} | {r['seconds']:.1f} | {r['peak']:.0f} | "
            f"{r['growth']:.0f} | {r.get('time_ratio', '')} | "
            f"{r.get('growth_ratio', '')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="blobs of 2000 x 2000 (under a minute)")
    ap.add_argument("--size", type=int, default=None, help="blobs side in pixels (default 4000)")
    ap.add_argument("--strip-rows", type=int, default=256, help="the small-strip dkernel run")
    ap.add_argument("--sets", default="blobs,demo")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "vector.md"))
    ap.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    ap.add_argument("--labels", help=argparse.SUPPRESS)
    ap.add_argument("--image", help=argparse.SUPPRESS)
    ap.add_argument("--output", help=argparse.SUPPRESS)
    ap.add_argument("--chunk-rows", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    size = args.size or (2000 if args.quick else 4000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in args.sets.split(","):
            labels, tif = make_blobs(folder, size) if name == "blobs" else make_demo(folder)
            runs = [("in-memory", None), ("dkernel", None), ("dkernel", args.strip_rows)]
            base = None
            reference = None
            for method, chunk_rows in runs:
                out = folder / f"{name}_{method}_{chunk_rows}.gpkg"
                r = run_one(method, labels, tif, out, chunk_rows)
                s = summary(out)
                if reference is None:
                    reference = s
                elif s["features"] != reference["features"] or s["pixels"] != reference["pixels"]:
                    raise RuntimeError(f"{name}: {method} wrote other features than in-memory")
                elif not np.isclose(s["area"], reference["area"], rtol=1e-9):
                    raise RuntimeError(f"{name}: {method} total area differs")
                row = {
                    "set": f"{name} {size}²" if name == "blobs" else name,
                    "n_pixels": sum(p for _, p in s["pixels"]),
                    "features": s["features"],
                    "method": method,
                    "chunk_rows": chunk_rows,
                    **r,
                }
                if base is None:
                    base = row
                else:
                    row["time_ratio"] = f"{row['seconds'] / base['seconds']:.2f}"
                    row["growth_ratio"] = f"{row['growth'] / max(base['growth'], 1e-9):.2f}"
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    text = markdown(rows, args.quick)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
