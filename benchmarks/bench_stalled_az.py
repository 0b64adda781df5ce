"""How long a results store on a stalled Azure Blob endpoint holds a write, a listing and a
delete, at the store's production limits (issue 54).

Azurite (the Azure Blob emulator the test setup installs) behind a TCP proxy that stops
relaying without closing (``tests.ops.test_job_signals_and_network.StallingProxy``); the
file system is the one a job's store gets (``dkernel.storage.remote.filesystem``, purpose
``store``: connect 10 s, read 60 s, ``dkernel.storage.azure_fs``). Once the proxy stalls, the
three calls run at the same time, each timed to the error. ``--adlfs`` times the same calls
through adlfs's own file system with the same options, as dkernel used it before
``azure_fs``: its listings and deletes wait the Azure SDK's 300 s per try (it is stopped
after ``--give-up`` seconds).

Usage::

    python benchmarks/bench_stalled_az.py [--adlfs] [--give-up 600] [--out F]

The table goes to ``benchmarks/results/stalled_az.md`` (``--out``) and stdout.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _azurite() -> tuple[subprocess.Popen, int]:
    from tests.conftest import AZURITE_BIN, _free_port, _wait_listening

    port = _free_port()
    cmd = [str(AZURITE_BIN), "--blobHost", "127.0.0.1", "--blobPort", str(port)]
    cmd += ["--inMemoryPersistence", "--silent", "--skipApiVersionCheck", "--loose"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_listening(proc, port, "azurite-blob")
    return proc, port


def _file_system(connection: str, plain_adlfs: bool):
    from dkernel.storage.remote import filesystem, storage_options

    if not plain_adlfs:
        return filesystem("az://x", {"connection_string": connection}, purpose="store")[0]
    import adlfs

    options = storage_options("az://x", {"connection_string": connection}, purpose="store")
    return adlfs.AzureBlobFileSystem(**options, skip_instance_cache=True)


def measure(plain_adlfs: bool, give_up: float) -> dict[str, tuple[float, str]]:
    """Seconds each call took to fail (or ``give_up``), and how it ended."""
    from tests.conftest import AZURITE_ACCOUNT, AZURITE_KEY
    from tests.ops.test_job_signals_and_network import StallingProxy

    proc, port = _azurite()
    proxy = StallingProxy(("127.0.0.1", port))
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{proxy.port}/{AZURITE_ACCOUNT};"
    )
    try:
        fs = _file_system(connection, plain_adlfs)
        bucket = f"dk-{uuid.uuid4().hex[:8]}"
        fs.mkdir(bucket)
        fs.pipe_file(f"{bucket}/a", b"x" * 100)
        proxy.stall()
        calls = {
            "chunk write (pipe_file)": lambda: fs.pipe_file(f"{bucket}/b", b"y" * 100),
            "listing (ls)": lambda: fs.ls(bucket, refresh=True),
            "delete (rm_file)": lambda: fs.rm_file(f"{bucket}/a"),
        }
        results: dict[str, tuple[float, str]] = {}

        def timed(name, call) -> None:
            t = time.perf_counter()
            try:
                call()
                how = "returned"
            except Exception as exc:  # noqa: BLE001  (each backend its own type)
                how = type(exc).__name__
            results[name] = (time.perf_counter() - t, how)

        threads = [threading.Thread(target=timed, args=c, daemon=True) for c in calls.items()]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + give_up
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for name in calls:
            results.setdefault(name, (give_up, f"still waiting after {give_up:.0f} s"))
        return results
    finally:
        proxy.stalled.clear()
        proxy.close()
        proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adlfs", action="store_true", help="adlfs's file system, as before")
    parser.add_argument("--give-up", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/stalled_az.md")
    args = parser.parse_args()
    results = measure(args.adlfs, args.give_up)
    which = "adlfs's AzureBlobFileSystem" if args.adlfs else "dkernel.storage.azure_fs"
    lines = [
        f"# A stalled Azure Blob endpoint at a results store's limits ({which})",
        "",
        "`python benchmarks/bench_stalled_az.py" + (" --adlfs" if args.adlfs else "") + "`",
        "",
        "| call | seconds to fail | how it ended |",
        "|---|---:|---|",
        *(f"| {name} | {s:.1f} | {how} |" for name, (s, how) in results.items()),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
