"""The world of gbx quest: rooms drawn as text, their blocks, people, signs and doors.

Coordinates are in 16x16 blocks, (x, y) from the room's top-left corner.  Rooms are at most
16x16 blocks and at least 10x9 (one screen), so the camera can stay inside the room.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import art
from .tiles import Grid

FLOOR, WALL, DOOR, ITEM, HAZARD = 0, 1, 2, 3, 4
TEXT_WIDTH = 18  # characters per text box line


@dataclass(frozen=True)
class Block:
    name: str
    draw: Callable[[], Grid]
    attr: int


@dataclass(frozen=True)
class Actor:
    """Someone (``sprite`` set) or something (a sign, ``sprite`` None) to talk to with A."""

    x: int
    y: int
    sprite: str | None
    lines: tuple[str, str]
    kind: str = "talk"  # "talk" or "elder" (the quest giver)


@dataclass(frozen=True)
class Door:
    x: int
    y: int
    to_room: int
    to_x: int
    to_y: int


@dataclass(frozen=True)
class Room:
    name: str
    rows: tuple[str, ...]
    legend: dict[str, Block]
    actors: tuple[Actor, ...] = ()
    doors: tuple[Door, ...] = ()
    bgp: int = 0b11100100  # BG palette: shade per colour index
    menu_name: str = ""

    @property
    def width(self) -> int:
        return len(self.rows[0])

    @property
    def height(self) -> int:
        return len(self.rows)


def _b(name: str, draw: Callable[[], Grid], attr: int = FLOOR) -> Block:
    return Block(name, draw, attr)


HOUSE_LEGEND = {
    "#": _b("brick", art.bricks, WALL),
    ".": _b("planks", art.planks),
    "D": _b("house_exit", art.house_door, DOOR),
    "T": _b("table", art.table, WALL),
    "S": _b("shelf", art.shelf, WALL),
}
VILLAGE_LEGEND = {
    "#": _b("tree", art.tree, WALL),
    ".": _b("grass", art.grass),
    "=": _b("path", art.path),
    "r": _b("roof", art.roof, WALL),
    "h": _b("house_wall", art.house_wall, WALL),
    "d": _b("village_door", art.village_door, DOOR),
    "~": _b("water", art.water, WALL),
    "S": _b("sign", art.sign, WALL),
    "g": _b("gate_east", lambda: art.arrow(art.path(), right=True), DOOR),
}
MEADOW_LEGEND = {
    "b": _b("bush", art.bush, WALL),
    ".": _b("meadow", art.meadow),
    ",": _b("flowers", art.flowers),
    "=": _b("path", art.path),
    "~": _b("water", art.water, WALL),
    "S": _b("sign", art.sign, WALL),
    "c": _b("cave_mouth", lambda: art.doorway(outside=2, inside=3), DOOR),
    "w": _b("gate_west", lambda: art.arrow(art.path(), right=False), DOOR),
}
CAVE_LEGEND = {
    "r": _b("rock", art.rock, WALL),
    ".": _b("cave_floor", art.cave_floor),
    "e": _b("cave_exit", lambda: art.doorway(outside=3, inside=0), DOOR),
    "G": _b("cave_floor", art.cave_floor, ITEM),
    "o": _b("pit", art.pit, HAZARD),
}

HOUSE, VILLAGE, MEADOW, CAVE = 0, 1, 2, 3

ROOMS: tuple[Room, ...] = (
    Room(
        "house",
        (
            "##########",
            "#SS....TT#",
            "#........#",
            "#........#",
            "#......TT#",
            "#........#",
            "#TT......#",
            "#........#",
            "#D########",
        ),
        HOUSE_LEGEND,
        actors=(Actor(7, 2, "mom", ("GOOD MORNING!", "SEE THE ELDER.")),),
        doors=(Door(1, 8, VILLAGE, 5, 3),),
        menu_name="HOUSE",
    ),
    Room(
        "village",
        (
            "################",
            "#..rrrr....~~~.#",
            "#..hhdh....~~~.#",
            "#....=.....~~~.#",
            "#....=.........#",
            "#....=======...#",
            "#..S.......=...#",
            "#..........=...#",
            "#..........====g",
            "#..............#",
            "#...##.........#",
            "#...##.....~~..#",
            "#..........~~..#",
            "################",
        ),
        VILLAGE_LEGEND,
        actors=(
            Actor(3, 6, None, ("GBX VILLAGE", "EAST: MEADOW")),
            Actor(8, 6, "elder", ("PLEASE BRING ME", "THE CAVE GEM!"), kind="elder"),
            Actor(7, 10, "kid", ("THE CAVE IS NORTH", "OF THE MEADOW.")),
        ),
        doors=(Door(5, 2, HOUSE, 1, 7), Door(15, 8, MEADOW, 1, 5)),
        menu_name="VILLAGE",
    ),
    Room(
        "meadow",
        (
            "bbbbbbbbbbbcbbbb",
            "b...,,.....=...b",
            "b..,,,,....=.,.b",
            "b...,,..S..=...b",
            "b..........=...b",
            "w==========...,b",
            "b....~~~.......b",
            "b...~~~~~..,,..b",
            "b....~~~...,,..b",
            "bbbbbbbbbbbbbbbb",
        ),
        MEADOW_LEGEND,
        actors=(
            Actor(8, 3, None, ("CAVE AHEAD.", "WATCH YOUR STEP!")),
            Actor(13, 3, "traveler", ("NICE DAY FOR A", "WALK, ISN'T IT?")),
        ),
        doors=(Door(0, 5, VILLAGE, 14, 8), Door(11, 0, CAVE, 5, 8)),
        bgp=0b11100100,
        menu_name="MEADOW",
    ),
    Room(
        "cave",
        (
            "rrrrrrrrrrrr",
            "r....rr....r",
            "r.rr....rr.r",
            "r.r..rr..ror",
            "r...rrrr...r",
            "rr.......G.r",
            "r..rr.rr...r",
            "r.o.r...rr.r",
            "r.....r....r",
            "rrrrrerrrrrr",
        ),
        CAVE_LEGEND,
        doors=(Door(5, 9, MEADOW, 11, 1),),
        bgp=0b11111001,  # darker: colour 0 shows light grey, 1 dark grey
        menu_name="CAVE",
    ),
)

START_ROOM, START_X, START_Y = HOUSE, 4, 2
GEM_ROOM = CAVE
ELDER_THANKS = ("THE GEM! THANK YOU", "YOU ARE A HERO!")
FOUND_GEM = ("YOU FOUND THE GEM!", "BRING IT HOME.")
# Stepping into a pit ends the game: this screen stays, like the quest-complete one.
GAME_OVER_LINES = {
    6: "GAME OVER",
    10: "YOU FELL INTO",
    12: "A PIT.",
}
COMPLETE_LINES = {
    5: "QUEST COMPLETE!",
    11: "THANK YOU FOR",
    13: "PLAYING GBX QUEST",
}


@dataclass(frozen=True)
class Stage:
    """A goal of increasing difficulty, checked on the game's RAM variables."""

    name: str
    description: str
    room: int | None = None
    has_gem: bool | None = None
    quest_done: bool = False


STAGES: tuple[Stage, ...] = (
    Stage("leave_house", "Leave the house (room 0) through its door.", room=VILLAGE),
    Stage("reach_meadow", "Cross the village to the meadow, two rooms from home.", room=MEADOW),
    Stage("fetch_gem", "Take the gem in the cave and bring it back to the village.",
          room=VILLAGE, has_gem=True),
    Stage("finish_quest", "Give the gem to the elder: the quest-complete screen shows.",
          quest_done=True),
)


def validate() -> None:
    """Check the world data is consistent; raises ValueError naming the problem."""
    for room in ROOMS:
        if not (10 <= room.width <= 16 and 9 <= room.height <= 16):
            raise ValueError(f"room {room.name} is {room.width}x{room.height}: need 10..16 x 9..16")
        if any(len(r) != room.width for r in room.rows):
            raise ValueError(f"room {room.name} has rows of different lengths")
        for y, row in enumerate(room.rows):
            for x, ch in enumerate(row):
                if ch not in room.legend:
                    raise ValueError(f"room {room.name} ({x},{y}): '{ch}' not in its legend")
                if room.legend[ch].attr == DOOR and not any(
                    d.x == x and d.y == y for d in room.doors
                ):
                    raise ValueError(f"room {room.name} ({x},{y}): door without a target")
        for door in room.doors:
            target = ROOMS[door.to_room]
            if target.legend[target.rows[door.to_y][door.to_x]].attr != FLOOR:
                raise ValueError(f"door of {room.name} leads onto a non-floor block")
        for actor in room.actors:
            if actor.sprite is None and room.rows[actor.y][actor.x] != "S":
                raise ValueError(f"sign in {room.name} at ({actor.x},{actor.y}) not on an S block")
