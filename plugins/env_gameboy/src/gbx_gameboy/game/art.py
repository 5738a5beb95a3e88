"""The game's graphics, drawn for this project: sprites, 16x16 map blocks, window frame.

Sprites use ``.`` as transparent.  Map blocks ("metatiles") are 16x16 grids built from a few
drawing helpers so each area has its own look (wood and brick indoors, grass and trees in
the village, flowers and bushes in the meadow, dark rock in the cave).
"""

from __future__ import annotations

from collections.abc import Callable

from .tiles import Grid, blank, overlay, parse_art

_PERSON_DOWN = (
    "....########....",
    "...#hhhhhhhh#...",
    "..#hhhhhhhhhh#..",
    "..#hssssssssh#..",
    "..#ss#ssss#ss#..",
    "..#ssssssssss#..",
    "...#sss##sss#...",
    "....########....",
    "...#cccccccc#...",
    "..#sccccccccs#..",
    "..#sccccccccs#..",
    "...#cccccccc#...",
    "...#cccccccc#...",
    "....#ss##ss#....",
    "....#ss##ss#....",
    "....###..###....",
)
_PERSON_UP = (
    _PERSON_DOWN[:3]
    + ("..#hhhhhhhhhh#..",) * 3
    + ("...#hhhhhhhh#...",)
    + _PERSON_DOWN[7:]
)
_PERSON_LEFT = (
    "....########....",
    "...#hhhhhhhh#...",
    "..#hhhhhhhhhh#..",
    "..#sssshhhhhh#..",
    "..#s#sshhhhhh#..",
    ".#ssssshhhhh#...",
    "..#sssssshh#....",
    "...#######......",
    "...#ccccccc#....",
    "...#cccsccc#....",
    "...#cccsccc#....",
    "...#ccccccc#....",
    "...#ccccccc#....",
    "....#ss#ss#.....",
    "....#ss#ss#.....",
    "....###.###.....",
)
GEM = (
    "................",
    "................",
    ".....######.....",
    "....#------#....",
    "...#--....--#...",
    "..#####++#####..",
    "..#-+++..+++-#..",
    "...#-++..++-#...",
    "....#-+..+-#....",
    ".....#-++-#.....",
    "......#--#......",
    ".......##.......",
    "................",
    "................",
    "................",
    "................",
)


def person(rows: tuple[str, ...], hair: str, skin: str, clothes: str) -> Grid:
    """Fill the person template's hair/skin/clothes placeholders with shades."""
    table = str.maketrans({"h": hair, "s": skin, "c": clothes})
    return parse_art([r.translate(table) for r in rows], 16, 16)


def sprites() -> dict[str, Grid]:
    """Every 16x16 sprite, by name; the order is the tile order in VRAM (4 tiles each)."""
    return {
        "player_down": person(_PERSON_DOWN, "+", "-", "+"),
        "player_up": person(_PERSON_UP, "+", "-", "+"),
        "player_left": person(_PERSON_LEFT, "+", "-", "+"),
        "mom": person(_PERSON_DOWN, "#", "-", "-"),
        "elder": person(_PERSON_DOWN, "-", "-", "#"),
        "kid": person(_PERSON_DOWN, "#", "-", "+"),
        "traveler": person(_PERSON_DOWN, "#", "+", "-"),
        "gem": parse_art(GEM, 16, 16),
    }


# ----- map blocks ------------------------------------------------------------------------------
def _pattern(fn: Callable[[int, int], int]) -> Grid:
    return [[fn(x, y) for x in range(16)] for y in range(16)]


def planks() -> Grid:
    return _pattern(lambda x, y: 1 if y % 4 == 3 or x == (0 if (y // 4) % 2 else 8) else 0)


def bricks() -> Grid:
    return _pattern(lambda x, y: 2 if y % 4 == 3 or x % 8 == (0 if (y // 4) % 2 else 4) else 1)


def grass() -> Grid:
    tufts = {(2, 3), (3, 2), (4, 3), (10, 10), (11, 9), (12, 10), (12, 2), (6, 12)}
    return _pattern(lambda x, y: 1 if (x, y) in tufts else 0)


def meadow() -> Grid:
    return _pattern(lambda x, y: 1 if (x + 2 * y) % 7 == 0 and y % 2 == 0 else 0)


def flowers() -> Grid:
    base = meadow()
    petal = (" + ", "+#+", " + ")
    for x0, y0 in ((2, 2), (9, 4), (4, 10), (11, 11)):
        base = overlay(base, petal, x0, y0)
    return base


def path() -> Grid:
    return _pattern(lambda x, y: 2 if (x * 5 + y * 3) % 11 == 0 else 1)


def tree() -> Grid:
    def px(x: int, y: int) -> int:
        d = (x - 7.5) ** 2 + (y - 6) ** 2
        if y >= 12:
            return 3 if 6 <= x <= 9 else 0
        if d <= 20:
            return 1 if (x + y) % 5 == 0 else 2
        return 3 if d <= 40 else 0

    return _pattern(px)


def bush() -> Grid:
    def px(x: int, y: int) -> int:
        d = (x - 7.5) ** 2 + (y - 8) ** 2
        if d <= 30:
            return 3 if (x * 3 + y) % 7 == 0 else 2
        return 3 if d <= 56 else 1

    return _pattern(px)


def water() -> Grid:
    return _pattern(lambda x, y: 2 if (y % 4 == 1 and 2 <= (x + y) % 8 <= 5) else 1)


def rock() -> Grid:
    return _pattern(lambda x, y: 1 if (x == y or x + y == 15) and 3 < x < 12 else
                    (3 if x in (0, 15) or y in (0, 15) else 2))


def cave_floor() -> Grid:
    return _pattern(lambda x, y: 2 if (x * 7 + y * 5) % 13 == 0 else 1)


def pit() -> Grid:
    """A hole in the cave floor: a dark disc with a rim, on the floor's shade."""
    def px(x: int, y: int) -> int:
        r2 = (x - 7.5) ** 2 + (y - 7.5) ** 2
        return 3 if r2 <= 26 else (2 if r2 <= 40 else 1)

    return _pattern(px)


def doorway(outside: int, inside: int) -> Grid:
    """An arch: ``inside`` shade in a rounded opening, ``outside`` around it."""
    def px(x: int, y: int) -> int:
        opening = 3 <= x <= 12 and (y >= 6 or (x - 7.5) ** 2 + (y - 6) ** 2 <= 22)
        return inside if opening else outside

    return _pattern(px)


def house_door() -> Grid:
    grid = blank(3)
    return overlay(grid, ("--------",) * 2, 4, 13)


def table() -> Grid:
    top = ("############",) + ("#++++++++++#",) * 5 + ("############",)
    legs = ("##        ##",) * 4
    return overlay(overlay(planks(), top, 2, 2), legs, 2, 9)


def shelf() -> Grid:
    books = ("################",) + ("#-+-#-++-#+-+-+#",) * 6 + ("################",)
    return overlay(overlay(bricks(), books, 0, 0), books, 0, 8)


def roof() -> Grid:
    return _pattern(lambda x, y: 3 if (x + y) % 4 == 0 else 2)


def house_wall() -> Grid:
    window = ("######", "#-..-#", "#....#", "######")
    return overlay(_pattern(lambda x, y: 2 if y % 4 == 3 else 1), window, 5, 4)


def village_door() -> Grid:
    frame = ("########",) + ("#++++++#",) * 11 + ("#++++-+#",) + ("#++++++#",) * 3
    return overlay(_pattern(lambda x, y: 2 if y % 4 == 3 else 1), frame, 4, 0)


def sign() -> Grid:
    board = ("############", "#----------#", "#-++-+++-+-#", "#----------#", "############")
    post = ("##",) * 6
    return overlay(overlay(grass(), board, 2, 2), post, 7, 7)


def arrow(base: Grid, right: bool) -> Grid:
    rows: tuple[str, ...] = ("#   ", "##  ", "### ", "####", "### ", "##  ", "#   ")
    if not right:
        rows = tuple(r[::-1] for r in rows)
    return overlay(overlay(base, rows, 2, 4), rows, 9, 4)


def gem_block() -> Grid:
    """The gem as a background block (white where the sprite is transparent)."""
    return parse_art(GEM, 16, 16)


def star() -> Grid:
    return parse_art((
        "...#....",
        "...#....",
        "..###...",
        "#######.",
        ".#####..",
        "..###...",
        ".##.##..",
        ".#...#..",
    ), 8, 8)


def frame_tiles() -> dict[str, Grid]:
    """8x8 pieces of the text box border: a 2-pixel black line, white inside."""
    def piece(top: bool, bottom: bool, left: bool, right: bool, corner: bool) -> Grid:
        def px(x: int, y: int) -> int:
            on_h = ((top and y in (2, 3)) or (bottom and y in (4, 5)))
            on_v = ((left and x in (2, 3)) or (right and x in (4, 5)))
            if corner:
                in_x = x >= 2 if left else x <= 5
                in_y = y >= 2 if top else y <= 5
                return 3 if (on_h and in_x) or (on_v and in_y) else 0
            return 3 if on_h or on_v else 0

        return [[px(x, y) for x in range(8)] for y in range(8)]

    return {
        "tl": piece(True, False, True, False, True),
        "tr": piece(True, False, False, True, True),
        "bl": piece(False, True, True, False, True),
        "br": piece(False, True, False, True, True),
        "top": piece(True, False, False, False, False),
        "bottom": piece(False, True, False, False, False),
        "left": piece(False, False, True, False, False),
        "right": piece(False, False, False, True, False),
    }
