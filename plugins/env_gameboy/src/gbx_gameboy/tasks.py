"""The bundled gbx quest tasks: four pixel-goal stages as named envs ``gbx-quest-1..4``.

Every stage starts from the same savestate (the hero standing in the house on
the game's first frame of play) and ends when the screen matches the stage's
goal template (see ``docs/tasks.md``). This module holds the stage table (the
one source of the stages' defaults), registers the named envs, and regenerates
the package's ``states/`` reproducibly from the ROM and the scripted solutions
(``gbx gameboy make-stages``); ``gbx gameboy baseline`` measures random play.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import attrs
import click

from gbx import hookimpl
from gbx.config import module_class
from gbx_gameboy.env import DEFAULT_ROM, RealStart
from gbx_gameboy.game import solutions as sol
from gbx_gameboy.goal import GoalConfig, GoalEnv
from gbx_gameboy.look_alikes import nearest_look_alike
from gbx_gameboy.resources import bundled_states_dir

STATES_ENV_VAR = "GBX_STATES_DIR"
START_STATE = "quest_start.gbxstate"
INDEX_FILE = "stages.json"
BASELINE_FILE = "baseline.json"
# The game reaches its main loop 15 frames after power-on; 20 leaves the first frame of play
# rendered (there is no title screen to press START through).
BOOT_FRAMES = 20


def states_dir() -> Path:
    """Where the stage files live: ``$GBX_STATES_DIR`` or the package's ``states/``."""
    override = os.environ.get(STATES_ENV_VAR)
    return Path(override) if override else bundled_states_dir()


@dataclass(frozen=True)
class FailureScreen:
    """A screen that ends a stage's episode as a failure: the last observation of ``steps``
    played from the start state. ``tau`` must stay below the distance of every screen on
    the stage's solution (``make-stages`` checks it)."""

    name: str
    description: str
    steps: tuple[str, ...]
    tau: float

    @property
    def dir_name(self) -> str:
        return f"failure_{self.name}"


@dataclass(frozen=True)
class StageTask:
    """One bundled task: its goal screen is the last observation of ``solution``."""

    number: int
    name: str
    description: str
    goal_screen: str
    solution: tuple[str, ...]
    max_steps: int
    tau: float
    consec_k: int = 1
    failures: tuple[FailureScreen, ...] = ()

    @property
    def env_name(self) -> str:
        return f"gbx-quest-{self.number}"

    @property
    def dir_name(self) -> str:
        return f"quest{self.number}_{self.name}"

    def goal_dir(self, root: Path | None = None) -> Path:
        return (root or states_dir()) / self.dir_name

    def failure_dirs(self, root: Path | None = None) -> tuple[str, ...]:
        return tuple(str(self.goal_dir(root) / f.dir_name) for f in self.failures)


_FIND_GEM = sol.LEAVE_HOUSE + sol.TO_MEADOW + sol.TO_CAVE + sol.TAKE_GEM[:-1]
# The cave has pits; stepping into one ends the game with a game-over screen.
_PIT = FailureScreen(
    "fell_in_pit",
    "the game-over screen: the hero stepped into a pit in the cave",
    sol.LEAVE_HOUSE + sol.TO_MEADOW + sol.TO_CAVE + sol.INTO_PIT, tau=0.05)

STAGE_TASKS: tuple[StageTask, ...] = (
    StageTask(
        1, "leave_house", "Leave the house through its door.",
        "the village just after coming out of the house door (hero on the path below it)",
        sol.SOLUTIONS["leave_house"], max_steps=256, tau=0.05,
    ),
    StageTask(
        2, "reach_meadow", "Cross the village to the meadow, two rooms from home.",
        "the meadow just after coming through the village's east gate",
        sol.SOLUTIONS["reach_meadow"], max_steps=512, tau=0.05,
        failures=(FailureScreen(
            "back_in_house",
            "back in the house: the hero just inside its door, facing into the house (the "
            "screen re-entering from the village shows; turning up on that block shows it too)",
            sol.LEAVE_HOUSE + ("UP",), tau=0.0005),),
    ),
    StageTask(
        3, "fetch_gem", "Find the gem in the cave, north of the meadow.",
        "the cave with the 'YOU FOUND THE GEM!' box open (hero on the gem's block)",
        _FIND_GEM, max_steps=1024, tau=0.05, failures=(_PIT,),
    ),
    StageTask(
        4, "finish_quest", "Bring the gem to the village elder.",
        "the quest-complete screen (stars, gem, 'QUEST COMPLETE!')",
        sol.SOLUTIONS["finish_quest"], max_steps=1024, tau=0.05, failures=(_PIT,),
    ),
)
STAGES_BY_ENV = {t.env_name: t for t in STAGE_TASKS}


def stage_config_cls(task: StageTask, root: Path | None = None) -> type:
    """A config class with every :class:`GoalConfig` field, defaulting to the stage's values.

    Built as a standalone attrs class (same fields, validators and help) because a slotted
    frozen subclass cannot re-declare fields of its base. ``STAGE_CONFIGS`` holds the
    classes for the default ``states/`` folder, bound as attributes of this module
    (``Quest1Config`` ...) so their instances pickle (``gbx run --gpus N`` sends the
    config to every rank).
    """
    base = root or states_dir()
    defaults = {
        "state": str(base / START_STATE),
        "goal_dir": str(task.goal_dir(base)),
        "max_steps": task.max_steps,
        "tau": task.tau,
        "consec_k": task.consec_k,
        "failure_dirs": task.failure_dirs(base),
    }
    fields = {
        f.name: attrs.field(
            default=defaults.get(f.name, f.default), validator=f.validator,
            metadata=f.metadata, type=f.type,
        )
        for f in attrs.fields(attrs.resolve_types(GoalConfig))
    }
    name = f"Quest{task.number}Config"
    cls = attrs.make_class(name, fields, bases=(RealStart,), frozen=True)
    cls.__doc__ = f"The ``env`` section of ``{task.env_name}`` ({task.name})."
    cls.__module__ = __name__
    cls.__qualname__ = name
    return cls


STAGE_CONFIGS: dict[str, type] = {
    t.env_name: module_class(stage_config_cls(t), __name__) for t in STAGE_TASKS
}


def _factory(task: StageTask) -> Any:
    def make(config: Any, num_envs: int, device: Any, seed: int) -> GoalEnv:
        return GoalEnv(config, num_envs, device, seed)

    make.__name__ = f"make_{task.env_name.replace('-', '_')}"
    return make


def make_stage_env(env_name: str, num_envs: int, device: Any = "cpu", seed: int = 0,
                   **overrides: Any) -> GoalEnv:
    """Build a bundled stage env with its defaults (and any config field overrides)."""
    if env_name not in STAGES_BY_ENV:
        raise ValueError(f"unknown stage env {env_name!r}; choose one of "
                         f"{', '.join(STAGES_BY_ENV)}")
    cfg = STAGE_CONFIGS[env_name](**overrides)
    return GoalEnv(cfg, num_envs, device, seed)


@hookimpl
def register_envs(register: Any) -> None:
    from gbx_gameboy.goal import make_goal_env

    register("gameboy-goal", make_goal_env, GoalConfig,
             description="Game Boy ROM; reward and done from the distance to a goal screen")
    for task in STAGE_TASKS:
        register(task.env_name, _factory(task), STAGE_CONFIGS[task.env_name],
                 description=f"gbx quest stage {task.number}: {task.description}")


@hookimpl
def register_commands(cli: Any) -> None:
    # The commands join the Game Boy plugin's `gbx gameboy` group.
    from gbx_gameboy.capture import capture_goal_cmd
    from gbx_gameboy.cli import gameboy

    for cmd in (capture_goal_cmd, save_state_cmd, make_stages_cmd, baseline_cmd):
        if cmd.name not in gameboy.commands:
            gameboy.add_command(cmd)


# --------------------------------------------------------------------------- make-stages
def make_stages(root: Path, rom: Path = DEFAULT_ROM, device: str = "cpu") -> dict[str, Any]:
    """Regenerate the start state, every stage's goal folder and the index under ``root``.

    Deterministic: the same ROM and solutions give byte-identical files.
    """
    from gbx_gameboy import capture as cap

    root.mkdir(parents=True, exist_ok=True)
    start = root / START_STATE
    boot = cap.Script(settle=BOOT_FRAMES)
    cap.make_state(rom, None, boot, start, device=device)
    index: dict[str, Any] = {
        "rom": rom.name,
        "rom_sha256": cap.sha256_file(rom),
        "start_state": START_STATE,
        "start_state_script": f"power on, run {BOOT_FRAMES} frames without input",
        "frames_per_step": sol.STEP_FRAMES,
        "hold_frames": sol.HOLD_FRAMES,
        "stages": [],
    }
    for task in STAGE_TASKS:
        script = cap.Script(steps=task.solution, frames_per_step=sol.STEP_FRAMES,
                            hold=sol.HOLD_FRAMES)
        places: list[Any] = []  # the state before each step, for the look-alike check
        frames = cap.play(cap.new_batch(rom, start, device), script, states=places)
        goal = frames[-1]
        dists = cap.distances(frames, goal)
        meta = cap.goal_meta(
            rom=rom, state=start, script=script, obs_size="72x80", tau=task.tau,
            consec_k=task.consec_k, state_label=START_STATE,
            note=f"goal screen: {task.goal_screen}",
        )
        # The closest the scripted path came to the goal before its last step: tau must stay
        # well below it, so only the goal screen itself counts.
        before = [d for d in dists[:-1] if d > 0.0]
        meta["solution_steps"] = len(task.solution)
        meta["first_step_under_tau"] = next(
            (i + 1 for i, d in enumerate(dists) if d < task.tau), None)
        meta["nearest_other_distance_on_solution"] = min(before) if before else None
        # ... and the nearest screen a button shows on the way (a menu, a text box):
        # the bundled stages must have none a policy could take for the goal
        look = nearest_look_alike(rom, script, places, goal, device=device)
        meta["nearest_look_alike"] = look.describe() if look else None
        out = task.goal_dir(root)
        cap.write_goal(out, goal, meta)
        for failure in task.failures:
            write_failure_screen(rom, start, task, failure, frames, root)
        (out / "README.md").write_text(stage_readme(task, meta, out), encoding="utf-8")
        index["stages"].append({
            "number": task.number,
            "name": task.name,
            "env": task.env_name,
            "start_state": START_STATE,
            "goal_dir": task.dir_name,
            "max_steps": task.max_steps,
            "tau": task.tau,
            "consec_k": task.consec_k,
            "solution_steps": len(task.solution),
            "failure_dirs": [f"{task.dir_name}/{f.dir_name}" for f in task.failures],
        })
    text = json.dumps(index, indent=2, sort_keys=True) + "\n"
    from gbx.config import write_atomic

    write_atomic(root / INDEX_FILE, text)
    return index


def write_failure_screen(rom: Path, start: Path, task: StageTask, failure: FailureScreen,
                         solution_frames: list[Any], root: Path) -> None:
    """Capture ``failure`` (its steps from the start state) into the stage folder; refuse
    a tau that a screen of the stage's own solution (or its first screen) would reach."""
    from gbx_gameboy import capture as cap

    script = cap.Script(steps=failure.steps, frames_per_step=sol.STEP_FRAMES,
                        hold=sol.HOLD_FRAMES)
    batch = cap.new_batch(rom, start)
    first = cap.observe(batch)
    template = cap.play(batch, script)[-1]
    nearest = min(cap.distances([first, *solution_frames], template))
    if nearest <= failure.tau:
        raise ValueError(f"failure screen {failure.name} of {task.env_name} is within tau "
                         f"{failure.tau} of a screen on the stage's solution ({nearest})")
    meta = cap.goal_meta(rom=rom, state=start, script=script, obs_size="72x80",
                         tau=failure.tau, consec_k=1, state_label=START_STATE,
                         note=f"failure screen: {failure.description}", failure=True)
    meta["nearest_solution_distance"] = nearest
    cap.write_goal(task.goal_dir(root) / failure.dir_name, template, meta)


def _look_alike_cell(look: dict[str, Any] | None) -> str:
    if not look:
        return "n/a"
    return (f"distance {look['distance']} ({look['button']} after {look['after_steps']} "
            "steps; A, B, START and SELECT tried at every place)")


def stage_readme(task: StageTask, meta: dict[str, Any], goal_dir: Path) -> str:
    """The stage README: goal, defaults, how it was made, and the random-play baseline."""
    base_path = goal_dir / BASELINE_FILE
    if base_path.is_file():
        b = json.loads(base_path.read_text(encoding="utf-8"))
        median = b.get("median_steps_to_goal")
        baseline = (
            f"Uniform random actions over the 7 buttons, {b['episodes']} episodes of at most "
            f"{b['max_steps']} steps, {b['num_envs']} envs on `{b['device']}`, seed "
            f"{b['seed']}: success rate **{b['success_rate']:.3f}**, median steps to the goal "
            f"**{median if median is not None else 'n/a (no success)'}**"
            + (f", failure rate **{b['failure_rate']:.3f}** (episodes ended on a failure "
               f"screen)" if task.failures and "failure_rate" in b else "")
            + "; smallest goal "
            f"distance seen on a step that did not reach the goal: "
            f"{b.get('min_dist_not_done', 'n/a')}.\n\n"
            f"Measured with `gbx gameboy baseline --env {task.env_name} --episodes "
            f"{b['episodes']} --num-envs {b['num_envs']} --record` ({BASELINE_FILE})."
        )
    else:
        baseline = (f"Not measured yet: `gbx gameboy baseline --env {task.env_name} "
                    f"--episodes 64 --record`.")
    steps = meta["script"]["steps"]
    failures = "".join(
        f"| failure screen | `{f.dir_name}/` (tau {f.tau}): {f.description}; reaching it ends "
        f"the episode as a failure, reward -env.failure_penalty |\n" for f in task.failures)
    return f"""# Stage {task.number}: `{task.name}` (env `{task.env_name}`)

{task.description}

Goal screen: {task.goal_screen} (`goal.png`, the 72x80 template scaled 4x).

| | |
|---|---|
| start state | `../{START_STATE}` (power-on, {BOOT_FRAMES} frames: the hero in the house) |
| goal | `goal.npy` (uint8 [72, 80] shade indices), `meta.json` |
| distance | mean of abs(frame - goal) / 3 over the 72x80 observation |
| tau | {task.tau} (done when the distance is under tau) |
| consecutive steps K | {task.consec_k} |
| max_steps | {task.max_steps} |
| scripted solution | {len(task.solution)} steps: `{steps}` |
| first step under tau on the solution | {meta['first_step_under_tau']} |
| nearest other screen on the solution | distance {meta['nearest_other_distance_on_solution']} |
| nearest screen a button opens on the way | {_look_alike_cell(meta.get('nearest_look_alike'))} |
{failures}
## Random-policy baseline

{baseline}

## How it is made

`gbx gameboy make-stages` plays the scripted solution from the start state (24 frames per
step, the button held for the first 8) and keeps the last observation. The files here are
regenerated byte for byte by that command; do not edit them by hand.
"""


# --------------------------------------------------------------------------- commands
@click.command("make-stages")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"where to write (default: ${STATES_ENV_VAR} or the package's states/)")
@click.option("--rom", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_ROM,
              show_default=True)
def make_stages_cmd(out_dir: Path | None, rom: Path) -> None:
    """Regenerate the bundled stages' start state, goal templates and index."""
    root = out_dir or states_dir()
    index = make_stages(root, rom)
    for s in index["stages"]:
        click.echo(f"{s['env']}: {root / s['goal_dir'] / 'goal.png'}")
    click.echo(f"wrote {root / INDEX_FILE}")


def random_baseline(env_name: str, episodes: int, num_envs: int, device: str, seed: int,
                    **overrides: Any) -> dict[str, Any]:
    """Success rate and median steps to the goal of uniform random actions on a stage env."""
    import torch

    from gbx_toolkit.evaluation import random_policy, run_episodes, summarize

    env = make_stage_env(env_name, num_envs, device, seed, info_mode="full", **overrides)
    gen = torch.Generator(device=env.device)
    gen.manual_seed(seed)
    act = random_policy(env.num_actions, gen)
    # Track the smallest distance on steps that did not end in the goal (should stay > tau).
    closest = torch.full((), 1.0, device=env.device)

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return act(obs)

    step = env.step

    def watched(actions: torch.Tensor) -> Any:
        out = step(actions)
        d = torch.where(out[2], torch.ones_like(out[4]["dist"]), out[4]["dist"])
        torch.minimum(closest, d.min(), out=closest)
        return out

    env.step = watched  # type: ignore[method-assign]
    per = run_episodes(cast(Any, env), policy, episodes)
    out = summarize(per)
    out.update({
        "env": env_name, "episodes": episodes, "num_envs": num_envs, "device": str(env.device),
        "seed": seed, "max_steps": env.config.max_steps, "tau": env.tau,
        "min_dist_not_done": round(float(closest), 6),
    })
    env.close()
    return out


@click.command("save-state")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="savestate file to write (gbx format, e.g. gem.gbxstate)")
@click.option("--solution", "stage_env", type=click.Choice(list(STAGES_BY_ENV)), default=None,
              help="play this bundled stage's scripted solution from the bundled start "
                   "state: the state at the stage's goal")
@click.option("--rom", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="the .gb ROM; default: the bundled gbx quest")
@click.option("--state", default=None, type=click.Path(dir_okay=False),
              help="savestate to start from (gbx or PyBoy); default: the bundled start state "
                   "with --solution, else power-on")
@click.option("--press", default="", help='frame presses, e.g. "START@60,A@120"')
@click.option("--steps", "steps_spec", default="",
              help='one button per env step, e.g. "DOWN*5,LEFT*3,DOWN" (after the presses)')
@click.option("--settle", default=0, show_default=True, help="idle frames at the end")
@click.option("--device", default="cpu", show_default=True)
def save_state_cmd(out: Path, stage_env: str | None, rom: Path | None, state: str | None,
                   press: str, steps_spec: str, settle: int, device: str) -> None:
    """Play a button script (or a bundled stage's scripted solution) and save the machine
    state: a start state for env.state or env.start_states."""
    from gbx_gameboy import capture as cap
    from gbx_gameboy.savestate import SaveStateError

    if stage_env and steps_spec:
        raise click.UsageError("--solution plays the stage's own steps; drop --steps")
    try:
        script = cap.Script.parse(press, steps_spec, frames_per_step=sol.STEP_FRAMES,
                                  hold=sol.HOLD_FRAMES, settle=settle)
        if stage_env:
            script = dataclasses.replace(script, steps=STAGES_BY_ENV[stage_env].solution)
            state = state or str(states_dir() / START_STATE)
        path = cap.make_state(rom or DEFAULT_ROM, state, script, out, device=device)
    except (ValueError, FileNotFoundError, SaveStateError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {path} ({len(script.steps)} steps"
               + (f", {stage_env}'s solution" if stage_env else "") + ")")


@click.command("baseline")
@click.option("--env", "env_name", required=True, type=click.Choice(list(STAGES_BY_ENV)))
@click.option("--episodes", default=64, show_default=True)
@click.option("--num-envs", default=32, show_default=True)
@click.option("--device", default="cpu", show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--max-steps", default=None, type=int, help="override the stage's max_steps")
@click.option("--start-states", "start_states", multiple=True, metavar="PATH",
              help="begin every episode at one of these savestates (files or folders, as "
                   "env.start_states: an earlier stage's goal states, a `gbx gameboy "
                   "save-state` file) instead of the stage's start; repeatable")
@click.option("--record", is_flag=True,
              help="also write the figures into the stage folder (baseline.json + README)")
def baseline_cmd(env_name: str, episodes: int, num_envs: int, device: str, seed: int,
                 max_steps: int | None, start_states: tuple[str, ...], record: bool) -> None:
    """Random-policy baseline of a bundled stage: prints one JSON object.

    With --start-states the episodes begin there (how hard a stage is from where the
    previous one ended, say); the JSON then names them."""
    if record and start_states:
        raise click.UsageError("--record stores the baseline from the stage's own start; "
                               "drop --start-states to record it")
    over: dict[str, Any] = {"max_steps": max_steps} if max_steps else {}
    if start_states:
        over.update(start_states=tuple(start_states), real_start_fraction=0.0)
    try:
        result = random_baseline(env_name, episodes, min(num_envs, episodes), device, seed,
                                 **over)
    except (ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from None
    if start_states:
        result["start_states"] = list(start_states)
    click.echo(json.dumps(result))
    if record:
        from gbx.config import write_atomic
        from gbx_gameboy.capture import load_goal

        task = STAGES_BY_ENV[env_name]
        out = task.goal_dir()
        write_atomic(out / BASELINE_FILE, json.dumps(result, indent=2, sort_keys=True) + "\n")
        meta = load_goal(out).meta
        (out / "README.md").write_text(stage_readme(task, meta, out), encoding="utf-8")
