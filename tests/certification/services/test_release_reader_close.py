"""The prefetching release reader never hangs when it is closed late, by the garbage collector.

A build whose own database connection broke raised out of its loop over the reader with the
cycle collector paused; the collector later finalised the suspended reader, whose clean-up
handed a last task to reading threads that had already exited (the executor was garbage too),
and the build's worker waited on it for an hour while its lease's heartbeat went on.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

from certification.services.releases import records as records_module


def test_a_reader_finalised_by_the_garbage_collector_does_not_hang():
    reader = object.__new__(records_module.ReleaseReader)
    read_on: set[str] = set()

    def chunk_list(ids: list[int]) -> list[dict[str, int]]:
        read_on.add(threading.current_thread().name)
        time.sleep(0.002)
        return [{"id": i} for i in ids]

    reader._chunk_list = chunk_list  # type: ignore[method-assign]

    def consumer() -> None:
        records = reader.records(list(range(200_000)), prefetch=True)
        holder: dict[str, Any] = {"records": records}
        holder["self"] = holder  # a cycle: only the collector frees the suspended reader
        for n, _ in enumerate(records):
            if n == 50_000:
                raise RuntimeError("the build's own connection broke")

    finished = threading.Event()

    def scenario() -> None:
        gc.disable()  # as release_build_execute runs a build
        try:
            consumer()
        except RuntimeError:
            pass
        finally:
            gc.enable()
        gc.collect()  # finalises the suspended reader: its clean-up runs here
        finished.set()

    threading.Thread(target=scenario, daemon=True).start()
    assert finished.wait(30), "the reader's clean-up never returned"
    assert read_on and all(name.startswith("release-read") for name in read_on)
