"""``dkernel run`` beside Orfeo ToolBox's LargeScaleMeanShift on the same scenes (issue 32).

Two scenes:

* the demo scene (``dkernel/data/RGB.byte.tif``, 718 × 791 × 3, 0.57 Mpx): ``dkernel run
  jobs/demo-landsat-mssc.yaml`` against ``otbcli_LargeScaleMeanShift`` on the same file;
* a 10⁶-pixel synthetic scene (1000 × 1000 × 6, the generating classes of
  ``bench_full_tile.py``): an ``mssc`` job (geotiff reader, ``n_clusters`` 6, every other
  parameter at its default) against LSMS, both scored by the ARI of their label map against
  the generating classes (LSMS draws segments, not classes: its ARI says how far a
  segmentation is from a classification).

LSMS runs at its defaults (spatial radius 5, range radius 15, minimum segment 50 pixels, 500 ×
500 tiles) writing a label raster, and with a user's tiling (``--tile``, default 256); on the
demo scene also in its default mode (``-mode vector``), writing the segments as polygons, as
the demo job does besides its label map. Two ratios: to LSMS writing the label raster, the
faster of its two modes, and on the demo scene also to LSMS in its default mode.
The commands run round by round, ``--repeat`` rounds, each timed as the median. For each run: wall time, CPU time
(user + system of the command and every process it waited for), peak memory summed over the
command's process tree (psutil, polled every 0.1 s), and the ARI where there are classes.
The table goes to ``benchmarks/results/otb.md`` with the OTB version.

Without ``otbcli_LargeScaleMeanShift`` on PATH (Debian/Ubuntu: ``apt-get install otb-bin``)
the benchmark prints why and exits 0 without a table.

Usage::

    python benchmarks/bench_otb.py [--repeat 1] [--tile 256] [--side 1000]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
LSMS = "otbcli_LargeScaleMeanShift"
RASTER_RUN = "OTB LSMS defaults"
DEFAULT_MODE_RUN = "OTB LSMS defaults, polygons (its default mode)"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_full_tile import (  # noqa: E402
    N_CLASSES,
    TreeMemory,
    ari_of_table,
    class_table,
    write_scene,
)


def timed(argv: list[str], cwd: Path) -> dict[str, float]:
    """Run ``argv``; wall, CPU (its waited-for processes) and summed peak memory."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode caches
    t = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    memory = TreeMemory(proc.pid)
    out, _ = proc.communicate()
    wall = time.perf_counter() - t
    peak = memory.stop()["total_gib"]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed:\n{out[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "peak_gib": peak}


def otb_version() -> str:
    """OTB's version: the Debian package's, else the first line of the application's help."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", "otb-bin"],
            capture_output=True,
            text=True,
            check=True,
        )
        if out.stdout.strip():
            return f"otb-bin {out.stdout.strip()}"
    except (OSError, subprocess.CalledProcessError):
        pass
    out = subprocess.run([LSMS, "-help"], capture_output=True, text=True)
    return (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else "unknown"


def lsms(scene: Path, out: Path, tile: int | None) -> list[str]:
    """LSMS writing a label raster (``.tif``) or, its default mode, polygons (``.shp``: its
    GeoPackage writer fails to commit, ``Unable to commit transaction``, with OTB 8.1.1)."""
    if out.suffix == ".shp":
        argv = [LSMS, "-in", str(scene), "-mode", "vector", "-mode.vector.out", str(out)]
    else:
        argv = [LSMS, "-in", str(scene), "-mode", "raster", "-mode.raster.out", str(out), "uint32"]
    if tile is not None:
        argv += ["-tilesizex", str(tile), "-tilesizey", str(tile)]
    return argv


def remove_vector_output(argv: list[str]) -> None:
    """Remove the polygons of an earlier LSMS run (the shapefile's parts) before a run."""
    if "-mode.vector.out" in argv:
        out = Path(argv[argv.index("-mode.vector.out") + 1])
        for path in out.parent.glob(out.stem + ".*"):
            path.unlink()


def dkernel_run(job: Path, root: Path) -> list[str]:
    return [
        sys.executable, "-m", "dkernel.cli", "run", str(job), "--output-root", str(root),
        "--overwrite", "--no-progress",
    ]  # fmt: skip


def ari_of_map(labels: np.ndarray, side: int) -> float:
    """ARI of a (side, side) label map (negative = no label) against the generating classes."""
    _, inverse = np.unique(labels, return_inverse=True)
    inverse = np.where(labels >= 0, inverse.reshape(labels.shape), -1)
    table = class_table(inverse, side, int(inverse.max()) + 1)
    return ari_of_table(table[:, table.sum(0) > 0])


def read_tif(path: Path) -> np.ndarray:
    import rasterio

    with rasterio.open(path) as src:
        return src.read(1).astype(np.int64)


def dkernel_labels(store: Path) -> np.ndarray:
    import dkernel

    return np.asarray(dkernel.open_results(store)["mssc"]["labels"].values, dtype=np.int64)


def synthetic_job(tif: Path, folder: Path) -> Path:
    import yaml

    spec = {
        "name": "otb-synthetic",
        "seed": 0,
        "data": {"reader": "geotiff", "path": str(tif)},
        "method": "mssc",
        "params": {"n_clusters": N_CLASSES},
        "output": str(folder / "otb-synthetic.zarr"),
    }
    job = folder / "otb-synthetic.yaml"
    job.write_text(yaml.safe_dump(spec))
    return job


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command (median)")
    parser.add_argument("--tile", type=int, default=256, help="the user's LSMS tile size")
    parser.add_argument("--side", type=int, default=1000, help="side of the synthetic scene")
    parser.add_argument("--out", type=Path, default=RESULTS / "otb.md")
    args = parser.parse_args()
    if shutil.which(LSMS) is None:
        print(
            f"skipped: {LSMS} is not on PATH (Debian/Ubuntu: apt-get install otb-bin); "
            "nothing to compare dkernel with."
        )
        return 0
    version = otb_version()
    from dkernel.io.raster import package_data_path

    demo = package_data_path("RGB.byte.tif")
    rows = []
    with tempfile.TemporaryDirectory(prefix="dkernel-otb-") as tmp:
        work = Path(tmp)
        synthetic = work / "synthetic.tif"
        write_scene(synthetic, args.side)
        runs = [
            ("demo", "dkernel run (demo job)", dkernel_run(ROOT / "jobs" / "demo-landsat-mssc.yaml", work), None),
            ("demo", RASTER_RUN, lsms(demo, work / "demo-otb.tif", None), None),
            ("demo", f"OTB LSMS tiles {args.tile}", lsms(demo, work / "demo-otb-t.tif", args.tile), None),
            ("demo", DEFAULT_MODE_RUN, lsms(demo, work / "demo-otb.shp", None), None),
            ("synthetic", "dkernel run (mssc, k = 6)", dkernel_run(synthetic_job(synthetic, work), work), work / "otb-synthetic.zarr"),
            ("synthetic", RASTER_RUN, lsms(synthetic, work / "syn-otb.tif", None), work / "syn-otb.tif"),
            ("synthetic", f"OTB LSMS tiles {args.tile}", lsms(synthetic, work / "syn-otb-t.tif", args.tile), work / "syn-otb-t.tif"),
        ]  # fmt: skip
        # round by round, so that a busy spell of the machine falls on every command alike
        measured: list[list[dict[str, float]]] = [[] for _ in runs]
        for _ in range(args.repeat):
            for times, (_, _, argv, _) in zip(measured, runs, strict=True):
                remove_vector_output(argv)
                times.append(timed(argv, ROOT))
        for times, (scene, name, _, result) in zip(measured, runs, strict=True):
            row = {
                "scene": scene,
                "run": name,
                **{k: float(np.median([m[k] for m in times])) for k in times[0]},
            }
            if result is not None:
                labels = dkernel_labels(result) if result.suffix == ".zarr" else read_tif(result)
                row["ari"] = ari_of_map(labels, args.side)
            rows.append(row)
            print(row, flush=True)
    write_table(rows, args, version)
    return 0


def write_table(rows: list[dict], args: argparse.Namespace, version: str) -> None:
    lines = [
        "# dkernel vs Orfeo ToolBox LargeScaleMeanShift (`benchmarks/bench_otb.py`)",
        "",
        f"OTB: {version}. Machine: {os.cpu_count()} CPUs; median of {args.repeat} run(s); "
        f"synthetic scene {args.side} × {args.side} × 6; load average at the end "
        f"{os.getloadavg()[0]:.1f} (others' work shares the CPUs: compare ratios, not times); "
        f"dkernel from the environment at {sys.prefix}.",
        "",
        "| scene | run | wall (s) | CPU (s) | peak memory, all processes (GiB) | ARI | "
        "wall / OTB defaults, label raster | wall / OTB defaults, its default mode |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ratios = []
        for run in (RASTER_RUN, DEFAULT_MODE_RUN):
            otb = [r for r in rows if r["scene"] == row["scene"] and r["run"] == run]
            ratios.append(f"{row['wall_s'] / otb[0]['wall_s']:.2f}" if otb else "")
        ari_text = f"{row['ari']:.3f}" if "ari" in row else ""
        lines.append(
            f"| {row['scene']} | {row['run']} | {row['wall_s']:.1f} | {row['cpu_s']:.1f} | "
            f"{row['peak_gib']:.2f} | {ari_text} | {' | '.join(ratios)} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
