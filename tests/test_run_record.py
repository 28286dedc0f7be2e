"""What the suite records of each combination it prepares, for the report to read instead of recomputing it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portabench.harness.machine.record import RUN_LOG_ENV
from portabench.harness.plan import RunPlan
from portabench.implementations import get_kernel
from suite.classes import asv_class


def test_the_ready_event_records_the_family_and_the_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run log's "ready" line of a combination says its variant's family and the bytes and flops of one run
    (``Work``) as the code that runs has them; "start" and "end" lines do not."""
    n = 4096
    plan = RunPlan.build(("cpu",), sizes={"stream": (n,)})
    study = next(s for s in plan.studies_of("stream") if s.device == "cpu")
    cls = asv_class(plan.kernel("stream"), study)
    log = tmp_path / "events.jsonl"
    monkeypatch.setenv(RUN_LOG_ENV, str(log))
    bench = cls()
    params = {"op": "triad", "n": str(n), "variant": "numpy"}
    values = tuple(params[name] for name in cls.param_names)
    bench.setup(*values)
    bench.setup(*values)  # asv sets up before every sample: the record is made once
    bench.teardown(*values)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "ready", "start", "ready", "end"]
    work = get_kernel("stream").work("triad", n)
    for ready in (e for e in events if e["event"] == "ready"):
        assert (ready["family"], ready["bytes"], ready["flops"]) == ("vendor", work.bytes, work.flops)
        assert ready["bytes_counted"] is None and ready["working_set"] is None
    assert not any("bytes" in e for e in events if e["event"] != "ready")
