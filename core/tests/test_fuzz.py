"""`gbx fuzz`: outcome accounting, crash isolation, and the config-values target."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gbx import fuzz
from gbx.errors import ConfigError, GbxError


def test_run_one_tells_ran_clean_error_and_traceback_apart(tmp_path: Path) -> None:
    def ran(rng: random.Random, workdir: Path) -> None:
        (workdir / "x").write_text("left behind")

    def refused(rng: random.Random, workdir: Path) -> None:
        raise ConfigError("bad value")

    def broken(rng: random.Random, workdir: Path) -> None:
        raise KeyError("rom")

    rng = random.Random(0)
    assert fuzz.run_one(ran, rng, tmp_path / "w") == ("ran", None)
    assert not any((tmp_path / "w").iterdir())  # the next input gets an empty folder
    assert fuzz.run_one(refused, rng, tmp_path / "w") == ("clean_errors", None)
    outcome, text = fuzz.run_one(broken, rng, tmp_path / "w")
    assert outcome == "tracebacks" and text is not None and "KeyError: 'rom'" in text
    assert fuzz.traceback_kind(text).startswith("KeyError at ")


def test_a_crashing_input_is_counted_and_the_campaign_goes_on(tmp_path, monkeypatch) -> None:
    """A worker that dies inside input 3 (abort) and one that hangs in input 7: both are
    crashes, and every other input still runs in a new worker."""
    script = (
        "import json, os, sys, time\n"
        "start, count = int(sys.argv[1]), int(sys.argv[2])\n"
        "for i in range(start, start + count):\n"
        "    print(json.dumps({'i': i, 'start': True}), flush=True)\n"
        "    if i == 3: os.abort()\n"
        "    if i == 7: time.sleep(60)\n"
        "    out = 'clean_errors' if i % 2 else 'ran'\n"
        "    print(json.dumps({'i': i, 'outcome': out, 'traceback': None}), flush=True)\n"
    )

    def command(name, *, seed, start, count, workdir):
        return [sys.executable, "-c", script, str(start), str(count)]

    monkeypatch.setattr(fuzz, "worker_command", command)
    summary = fuzz.run_target("fake", seed=0, start=0, inputs=10, chunk=4, timeout_s=2.0,
                              workdir=tmp_path)
    assert (summary.inputs, summary.crashes) == (10, 2), summary.first
    assert summary.ran + summary.clean_errors == 8 and summary.tracebacks == 0
    kinds = {v["input"]: k for k, v in summary.first.items()}
    assert "signal 6" in kinds[3] and "no progress" in kinds[7]


def test_fuzz_cli_replays_inputs_and_names_unknown_targets(invoke) -> None:
    result = invoke("fuzz", "--target", "config-values", "--inputs", "30", "--seed", "5",
                    "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["targets"]["config-values"]
    assert summary["inputs"] == 30 and summary["tracebacks"] == summary["crashes"] == 0
    assert summary["clean_errors"] + summary["ran"] == 30
    bad = invoke("fuzz", "--target", "no-such-target")
    assert bad.exit_code == 2 and "unknown fuzz target no-such-target" in bad.output


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_config_values_end_in_a_config_or_a_clean_error(host, tmp_path, seed) -> None:
    """Any generated `--set` values resolve or give a GbxError, never another exception."""
    from gbx.plugins import set_host

    set_host(host)
    try:
        fuzz.fuzz_config_values(random.Random(seed), tmp_path)
    except GbxError:
        pass
    finally:
        set_host(None)
