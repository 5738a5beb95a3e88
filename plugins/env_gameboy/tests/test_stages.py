"""`gbx gameboy make-stages` reproduces the committed states/ byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

from gbx_gameboy.tasks import (
    BASELINE_FILE,
    INDEX_FILE,
    STAGE_TASKS,
    START_STATE,
    make_stages,
    states_dir,
)

STAGE_FILES = ("goal.npy", "meta.json", "goal.png", "README.md")
FAILURE_FILES = ("goal.npy", "meta.json", "goal.png")


def test_make_stages_reproduces_committed_files(tmp_path: Path) -> None:
    committed = states_dir()
    for task in STAGE_TASKS:  # measured figures are an input of the READMEs, not regenerated
        src = task.goal_dir(committed) / BASELINE_FILE
        if src.is_file():
            task.goal_dir(tmp_path).mkdir(parents=True)
            shutil.copy(src, task.goal_dir(tmp_path) / BASELINE_FILE)
    make_stages(tmp_path)
    pairs = [(tmp_path / START_STATE, committed / START_STATE),
             (tmp_path / INDEX_FILE, committed / INDEX_FILE)]
    for task in STAGE_TASKS:
        pairs += [(task.goal_dir(tmp_path) / f, task.goal_dir(committed) / f)
                  for f in STAGE_FILES]
        pairs += [(task.goal_dir(tmp_path) / s.dir_name / f,
                   task.goal_dir(committed) / s.dir_name / f)
                  for s in task.failures for f in FAILURE_FILES]
    stale = [str(want.relative_to(committed)) for got, want in pairs
             if got.read_bytes() != want.read_bytes()]
    assert not stale, f"states/ is stale, run `gbx gameboy make-stages`: {stale}"
