"""MSSC on synthetic scenes of growing size: wall time, peak memory of every process, accuracy.

Issue 20: a Sentinel-2 tile is 10 980 × 10 980 pixels. This benchmark writes a synthetic 6-band
scene of ``side × side`` pixels **strip by strip** into a tiled GeoTIFF (512 × 512 tiles,
DEFLATE; never whole in memory) with smooth class regions, a brightness gradient and noise,
then runs the ``mssc`` job on it through the ``geotiff`` reader with ``dkernel run`` (embedded
LocalCluster, worker processes) and records

* wall time and time per pixel,
* the peak RSS of the client process and of every worker process (psutil, polled every 0.2 s
  over the job's process tree),
* the accuracy (Hungarian-matched) and ARI of the label map against the generating classes,
  accumulated strip by strip from the store,

next to what a user would otherwise run: scikit-learn ``MiniBatchKMeans`` on every pixel held in
memory (``--baseline``; skipped above ``--baseline-max`` pixels). It writes a table
(``benchmarks/results/full_tile.md``/``.json``) and a log-log plot of time and memory against
pixels (``full_tile.png``).

Usage::

    python benchmarks/bench_full_tile.py --sides 1000 3000           # 10⁶ and 9·10⁶ pixels
    python benchmarks/bench_full_tile.py --sides 1000 3162 10000     # 10⁶, 10⁷, 10⁸ (hours here)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

N_CLASSES = 6
N_BANDS = 6
STRIP = 512


def class_of(rows: np.ndarray, cols: np.ndarray, side: int) -> np.ndarray:
    """The generating class of pixels: the largest of six smooth waves (blobby regions about
    side/4 across), a function of position only, so any strip can be regenerated."""
    y, x = rows / side, cols / side
    fields = [np.sin(2 * np.pi * (a * x + b * y) + c) for a, b, c in _WAVES]
    return np.argmax(np.stack(fields), axis=0).astype(np.int16)


_WAVES = [
    (2.1, 0.7, 0.0),
    (-1.3, 2.2, 1.0),
    (0.4, -2.6, 2.0),
    (2.7, 1.9, 3.0),
    (-2.2, -1.1, 4.0),
    (1.0, 3.1, 5.0),
]
#: Class spectra (reflectance) with distinct shapes: at least 16° apart in spectral angle,
#: so the classes are separable whatever the illumination (the default band scaling drops
#: brightness, as shadows and slopes call for).
_SPECTRA = np.array(
    [
        [0.04, 0.07, 0.05, 0.35, 0.20, 0.10],  # vegetation
        [0.09, 0.07, 0.05, 0.02, 0.01, 0.005],  # water
        [0.12, 0.16, 0.21, 0.26, 0.31, 0.33],  # bare soil
        [0.20, 0.19, 0.18, 0.19, 0.21, 0.22],  # built-up
        [0.06, 0.10, 0.08, 0.25, 0.30, 0.18],  # crops
        [0.35, 0.36, 0.36, 0.30, 0.22, 0.15],  # bright sand
    ]
)


def scene_strip(r0: int, r1: int, side: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Bands (uint16, band × rows × cols) and classes of rows r0..r1."""
    rows, cols = np.mgrid[r0:r1, 0:side]
    cls = class_of(rows, cols, side)
    rng = np.random.default_rng([seed, r0])
    gradient = 1.0 + 0.15 * cols / side  # illumination across the scene
    bands = _SPECTRA[cls].transpose(2, 0, 1) * gradient
    bands = bands + rng.normal(0, 0.01, bands.shape)
    return np.clip(bands * 10000, 1, 65535).astype(np.uint16), cls


def write_scene(path: Path, side: int) -> float:
    import rasterio
    from rasterio.transform import from_origin

    t = time.perf_counter()
    profile = {
        "driver": "GTiff",
        "width": side,
        "height": side,
        "count": N_BANDS,
        "dtype": "uint16",
        "crs": "EPSG:32633",
        "transform": from_origin(300000, 5000000, 10, 10),
        "tiled": True,
        "blockxsize": 512,
        "blockysize": 512,
        "compress": "deflate",
        "BIGTIFF": "IF_SAFER",
        "nodata": 0,
    }
    with rasterio.open(path, "w", **profile) as dst:
        for r0 in range(0, side, STRIP):
            r1 = min(side, r0 + STRIP)
            bands, _ = scene_strip(r0, r1, side)
            dst.write(bands, window=((r0, r1), (0, side)))
    return time.perf_counter() - t


class TreeMemory:
    """Peak RSS of a process and of each of its descendants, and the largest sum of them
    (``total_gib``), polled in a thread."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.peaks: dict[int, tuple[str, int]] = {}
        self.total_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                break
            total = 0
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    cmd = " ".join(p.cmdline()[-3:])
                except psutil.Error:
                    continue
                total += rss
                old = self.peaks.get(p.pid, (cmd, 0))
                self.peaks[p.pid] = (cmd, max(old[1], rss))
            self.total_peak = max(self.total_peak, total)
            time.sleep(0.2)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        client = self.peaks.get(self.root.pid, ("", 0))[1]
        workers = [
            rss for pid, (cmd, rss) in self.peaks.items() if pid != self.root.pid and rss > 150e6
        ]
        return {
            "client_gib": client / 2**30,
            "worker_max_gib": max(workers, default=0) / 2**30,
            "n_workers_seen": len(workers),
            "total_gib": self.total_peak / 2**30,
        }


def run_job(tif: Path, store: Path, workers: int) -> tuple[float, dict[str, float], str]:
    import yaml

    spec = {
        "name": f"full-tile-{tif.stem}",
        "seed": 0,
        "data": {"reader": "geotiff", "path": str(tif)},
        "method": "mssc",
        "params": {"n_clusters": N_CLASSES, "write_png": True},
        "output": str(store),
    }
    job = store.parent / f"{tif.stem}.yaml"
    job.write_text(yaml.safe_dump(spec))
    t = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dkernel.cli",
            "run",
            str(job),
            "--no-progress",
            "--workers",
            str(workers),
            "--threads",
            "1",
            "--output-root",
            str(store.parent),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    memory = TreeMemory(proc.pid)
    out, _ = proc.communicate()
    wall = time.perf_counter() - t
    peaks = memory.stop()
    if proc.returncode != 0:
        # the peaks too: on a loaded machine a job can fail after its work (a worker slow to
        # stop when the embedded cluster closes)
        raise RuntimeError(f"dkernel run failed (peaks {json.dumps(peaks)}):\n{out[-3000:]}")
    return wall, peaks, out


def class_table(labels: Any, side: int, n_labels: int) -> np.ndarray:
    """Contingency table (generating class × label) of a ``(side, side)`` label map (NumPy or
    a lazy DataArray; negative: no label), accumulated strip by strip."""
    table = np.zeros((N_CLASSES, n_labels), dtype=np.int64)
    for r0 in range(0, side, STRIP):
        r1 = min(side, r0 + STRIP)
        lab = np.asarray(labels[r0:r1])
        rows, cols = np.mgrid[r0:r1, 0:side]
        cls = class_of(rows, cols, side)
        ok = lab >= 0
        np.add.at(table, (cls[ok], lab[ok]), 1)
    return table


def ari_of_table(table: np.ndarray) -> float:
    """Adjusted Rand index from a contingency table."""

    def comb2(v: np.ndarray) -> float:
        v = v.astype(np.float64)
        return float((v * (v - 1) / 2).sum())

    index = comb2(table)
    expected = comb2(table.sum(1)) * comb2(table.sum(0)) / comb2(np.array([table.sum()]))
    maximum = (comb2(table.sum(1)) + comb2(table.sum(0))) / 2
    return (index - expected) / (maximum - expected)


def accuracy(store: Path, side: int) -> dict[str, float]:
    """Hungarian accuracy and ARI of the stored label map against the generating classes."""
    from scipy.optimize import linear_sum_assignment

    import dkernel

    labels = dkernel.open_results(store)["mssc"]["labels"]
    table = class_table(labels, side, int(labels.max()) + 1)
    r, c = linear_sum_assignment(-table)
    return {"acc": float(table[r, c].sum() / table.sum()), "ari": ari_of_table(table)}


def baseline(tif: Path, side: int) -> dict[str, float]:
    """What a user would otherwise run: MiniBatchKMeans on all pixels in memory."""
    import resource

    code = f"""
import time, resource, numpy as np, rasterio
from sklearn.cluster import MiniBatchKMeans
t = time.perf_counter()
with rasterio.open({str(tif)!r}) as src:
    X = src.read().reshape({N_BANDS}, -1).T.astype(np.float32)
X = (X - X.mean(0)) / X.std(0)
MiniBatchKMeans({N_CLASSES}, random_state=0, n_init=3).fit(X)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
    del resource
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall, rss_kib = out.stdout.split()
    return {"wall_s": float(wall), "peak_gib": float(rss_kib) / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--baseline", action="store_true")
    parser.add_argument("--baseline-max", type=float, default=2e7)
    parser.add_argument("--out", type=Path, default=RESULTS / "full_tile")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for side in args.sides:
            tif = Path(tmp) / f"scene{side}.tif"
            gen = write_scene(tif, side)
            wall, peaks, _ = run_job(tif, Path(tmp) / f"scene{side}.zarr", args.workers)
            row = {
                "side": side,
                "pixels": side * side,
                "write_scene_s": gen,
                "wall_s": wall,
                "us_per_pixel": 1e6 * wall / side**2,
                **peaks,
                **accuracy(Path(tmp) / f"scene{side}.zarr", side),
            }
            if args.baseline and side * side <= args.baseline_max:
                row["baseline"] = baseline(tif, side)
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_results(rows, args.out)


def write_results(rows: list[dict], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    first = rows[0]
    lines = [
        "# MSSC on synthetic scenes of growing size (`benchmarks/bench_full_tile.py`)",
        "",
        "6-band uint16 scenes written strip by strip to a 512-tiled GeoTIFF; `dkernel run` of the "
        "`mssc` job at its defaults (6 clusters) through the `geotiff` reader on an embedded "
        "LocalCluster (worker processes, 1 thread each); peak RSS of the client and of the "
        "largest worker polled every 0.2 s; accuracy against the generating classes.",
        "",
        "| pixels | wall s | µs/pixel | × µs/pixel at first | client peak GiB | × | worker peak GiB | × | ACC | ARI | MiniBatchKMeans s / GiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        base = r.get("baseline")
        lines.append(
            f"| {r['pixels']:.3g} | {r['wall_s']:.1f} | {r['us_per_pixel']:.2f} | "
            f"{r['us_per_pixel'] / first['us_per_pixel']:.2f} | {r['client_gib']:.2f} | "
            f"{r['client_gib'] / first['client_gib']:.2f} | {r['worker_max_gib']:.2f} | "
            f"{r['worker_max_gib'] / max(first['worker_max_gib'], 1e-9):.2f} | {r['acc']:.3f} | "
            f"{r['ari']:.3f} | "
            + (f"{base['wall_s']:.1f} / {base['peak_gib']:.2f} |" if base else "– |")
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    try:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        px = [r["pixels"] for r in rows]
        ax.loglog(px, [r["wall_s"] for r in rows], "o-", label="wall time (s)")
        ax.loglog(px, [r["client_gib"] for r in rows], "s-", label="client peak RSS (GiB)")
        ax.loglog(px, [r["worker_max_gib"] for r in rows], "^-", label="worker peak RSS (GiB)")
        ax.set_xlabel("pixels")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out.with_suffix(".png"), dpi=90)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
