; gbx quest: a small top-down adventure for the Game Boy (DMG).
; Assembled with gbx's own assembler (gbx_gameboy.asm); data comes from assets.inc, which
; gbx_gameboy.game.assets generates.  See README.md for the map, controls and stages.
;
; Frame loop: HALT until the VBlank interrupt, then (still in VBlank) OAM DMA from HRAM,
; scroll/window registers and pending text; then joypad, game logic and the shadow OAM.
; One step of the player is 16 frames at 1 pixel per frame, so a button held for 8 frames
; and released moves exactly one 16x16 block.  Nothing depends on uninitialised memory (all
; RAM is cleared at boot) and nothing is random.

; ----- hardware -------------------------------------------------------------------------------
DEF rP1   EQU $FF00
DEF rIF   EQU $FF0F
DEF rLCDC EQU $FF40
DEF rSCY  EQU $FF42
DEF rSCX  EQU $FF43
DEF rLY   EQU $FF44
DEF rDMA  EQU $FF46
DEF rBGP  EQU $FF47
DEF rOBP0 EQU $FF48
DEF rOBP1 EQU $FF49
DEF rWY   EQU $FF4A
DEF rWX   EQU $FF4B
DEF rIE   EQU $FFFF

; LCD on, window map $9C00, tiles at $8000, BG map $9800, 8x8 sprites on, BG on
DEF LCDC_ON     EQU %11010011
DEF LCDC_WINDOW EQU %00100000
DEF TEXTBOX_Y   EQU 104             ; the 5-row text box at the bottom of the screen

; joypad bits as ReadJoypad stores them
DEF PAD_A      EQU 0
DEF PAD_B      EQU 1
DEF PAD_SELECT EQU 2
DEF PAD_START  EQU 3
DEF PAD_RIGHT  EQU 4
DEF PAD_LEFT   EQU 5
DEF PAD_UP     EQU 6
DEF PAD_DOWN   EQU 7

DEF STATE_WALK EQU 0
DEF STATE_TEXT EQU 1
DEF STATE_MENU EQU 2
DEF STATE_DONE EQU 3

DEF FACE_DOWN  EQU 0
DEF FACE_UP    EQU 1
DEF FACE_LEFT  EQU 2
DEF FACE_RIGHT EQU 3

DEF STEP_FRAMES EQU 16              ; frames (= pixels) per block step
DEF DMA_ROUTINE_SIZE EQU 10         ; bytes of DMARoutine, checked below

INCLUDE "assets.inc"

HEADER_TITLE "GBX QUEST"
HEADER_CART_TYPE $00
HEADER_ROM_SIZE 0
HEADER_RAM_SIZE 0
HEADER_VERSION 1

; ----- RAM ------------------------------------------------------------------------------------
SECTION "shadow oam", WRAM0[$C000]
wShadowOAM: ds 160

SECTION "collision", WRAM0[$C100]
wCollision: ds 256                  ; 16x16 block attributes of the current room

SECTION "game state", WRAM0[$C200]
wRoom:         ds 1                 ; current room index
wX:            ds 1                 ; player block x (target block while moving)
wY:            ds 1
wPX:           ds 1                 ; player pixel position in the room
wPY:           ds 1
wFacing:       ds 1                 ; FACE_*
wDX:           ds 1                 ; facing as a step: -1/0/+1
wDY:           ds 1
wMoveCount:    ds 1                 ; frames left in the current step
wState:        ds 1                 ; STATE_*
wHasGem:       ds 1
wGemTaken:     ds 1
wQuestDone:    ds 1
wQuestPending: ds 1                 ; the elder thanked us: complete when the box closes
wJoyHeld:      ds 1
wJoyNew:       ds 1
wCamX:         ds 1
wCamY:         ds 1
wRoomW:        ds 1
wRoomH:        ds 1
wMaxCamX:      ds 1
wMaxCamY:      ds 1
wBGP:          ds 1
wWindowOn:     ds 1
wWindowY:      ds 1
wTextPending:  ds 1
wTextPtr:      ds 2
wDoorsPtr:     ds 2
wActorsPtr:    ds 2
wIter:         ds 2
wFrame:        ds 1                 ; frame counter (wraps)
wSteps:        ds 2                 ; blocks walked, little-endian
wGameOver:     ds 1                 ; the hero fell into a pit: the game is over
wShownBGP:     ds 1                 ; the BG shades shown: wBGP, lit while the gem is carried

SECTION "hram", HRAM[$FF80]
hOAMDMA:       ds DMA_ROUTINE_SIZE
hVBlankFlag:   ds 1

; ----- vectors and header -------------------------------------------------------------------
SECTION "vblank interrupt", ROM0[$0040]
    push af
    ld a, 1
    ldh [hVBlankFlag], a
    pop af
    reti

SECTION "entry", ROM0[$0100]
    nop
    jp Boot

; ----- boot -----------------------------------------------------------------------------------
SECTION "main", ROM0[$0150]
Boot:
    di
    ld sp, $E000
    ldh a, [rLCDC]
    bit 7, a
    jr z, .lcdIsOff                 ; (LY stays 0 while the LCD is off)
.waitVBlank:                        ; the LCD may only be switched off during VBlank
    ldh a, [rLY]
    cp 144
    jr c, .waitVBlank
    xor a
    ldh [rLCDC], a
.lcdIsOff:
    ld hl, $C000                    ; clear all of WRAM (inline: the stack lives there)
    ld bc, $2000
.clearWram:
    xor a
    ld [hl+], a
    dec bc
    ld a, b
    or c
    jr nz, .clearWram
    ld hl, $FF80                    ; clear HRAM
    ld b, $7F
.clearHram:
    ld [hl+], a
    dec b
    jr nz, .clearHram
    ld hl, $8000                    ; clear VRAM
    ld bc, $2000
    call MemClear
    ld de, TileData
    ld hl, $8000
    ld bc, TileDataEnd - TileData
    call MemCopy
    ld de, DMARoutine
    ld hl, hOAMDMA
    ld bc, DMARoutineEnd - DMARoutine
    call MemCopy
    ld de, WindowFrame              ; the text box border stays in the window map
    ld hl, $9C00
    ld b, 5
    call CopyRows20
    ld a, %11100100
    ldh [rOBP0], a
    ldh [rOBP1], a
    ld a, 7
    ldh [rWX], a
    ld a, TEXTBOX_Y
    ld [wWindowY], a
    ldh [rWY], a
    ld a, START_ROOM
    ld [wRoom], a
    ld a, START_X
    ld [wX], a
    ld a, START_Y
    ld [wY], a
    ld a, 1
    ld [wDY], a                     ; facing down
    call SetPixelFromBlock
    call LoadRoom                   ; turns the LCD on
    xor a
    ldh [rIF], a
    ld a, 1                         ; VBlank interrupt only
    ldh [rIE], a
    ei

MainLoop:
    halt
    ldh a, [hVBlankFlag]
    and a
    jr z, MainLoop
    xor a
    ldh [hVBlankFlag], a
    call hOAMDMA
    call VBlankUpdates
    call ReadJoypad
    call UpdateGame
    call UpdateCamera
    call BuildOAM
    ld hl, wFrame
    inc [hl]
    jr MainLoop

; ----- memory helpers ---------------------------------------------------------------------------
MemClear:                           ; hl = dest, bc = count
    xor a
    ld [hl+], a
    dec bc
    ld a, b
    or c
    jr nz, MemClear
    ret

MemCopy:                            ; de = source, hl = dest, bc = count
    ld a, [de]
    inc de
    ld [hl+], a
    dec bc
    ld a, b
    or c
    jr nz, MemCopy
    ret

CopyRows20:                         ; de = source, hl = map address, b = rows of 20 tiles
    ld c, 20
.tile:
    ld a, [de]
    inc de
    ld [hl+], a
    dec c
    jr nz, .tile
    ld a, l
    add a, 32 - 20
    ld l, a
    jr nc, .next
    inc h
.next:
    dec b
    jr nz, CopyRows20
    ret

DMARoutine:                         ; copied to HRAM: the CPU may only run there during DMA
    ld a, HIGH(wShadowOAM)
    ldh [rDMA], a
    ld a, 40
.wait:
    dec a
    jr nz, .wait
    ret
DMARoutineEnd:
    ASSERT DMARoutineEnd - DMARoutine == DMA_ROUTINE_SIZE, "update DMA_ROUTINE_SIZE"

LcdOff:                             ; wait for VBlank, then switch the LCD off
    ldh a, [rLCDC]
    bit 7, a
    ret z
.wait:
    ldh a, [rLY]
    cp 144
    jr nz, .wait
    xor a
    ldh [rLCDC], a
    ret

; ----- rooms ---------------------------------------------------------------------------------
SetPixelFromBlock:
    ld a, [wX]
    swap a
    ld [wPX], a
    ld a, [wY]
    swap a
    ld [wPY], a
    ret

LoadRoom:                           ; loads room [wRoom] with the LCD off, then turns it on
    call LcdOff
    ld a, [wRoom]
    add a, a
    ld l, a
    ld h, 0
    ld de, RoomTable
    add hl, de
    ld a, [hl+]
    ld h, [hl]
    ld l, a                         ; hl = room header
    ld a, [hl+]
    ld [wRoomW], a
    ld a, [hl+]
    ld [wRoomH], a
    ld a, [hl+]
    ld [wMaxCamX], a
    ld a, [hl+]
    ld [wMaxCamY], a
    ld a, [hl+]
    ld [wBGP], a
    call UpdateShownBGP
    ldh [rBGP], a                   ; the LCD is off: no need to wait for VBlank
    ld a, [hl+]
    ld e, a
    ld a, [hl+]
    ld d, a                         ; de = tile map
    push hl
    ld hl, $9800                    ; blank the whole BG map first
    ld bc, $400
.blank:
    ld a, TILE_SPACE
    ld [hl+], a
    dec bc
    ld a, b
    or c
    jr nz, .blank
    ld hl, $9800
    ld a, [wRoomH]
    add a, a
    ld b, a                         ; b = tile rows
.row:
    push hl
    ld a, [wRoomW]
    add a, a
    ld c, a                         ; c = tiles per row
.col:
    ld a, [de]
    inc de
    ld [hl+], a
    dec c
    jr nz, .col
    pop hl
    ld a, l
    add a, 32
    ld l, a
    jr nc, .sameHigh
    inc h
.sameHigh:
    dec b
    jr nz, .row
    pop hl
    ld a, [hl+]
    ld e, a
    ld a, [hl+]
    ld d, a                         ; de = collision map
    push hl
    ld hl, wCollision
    ld bc, 256
    call MemCopy
    pop hl
    ld a, [hl+]
    ld [wDoorsPtr], a
    ld a, [hl+]
    ld [wDoorsPtr + 1], a
    ld a, [hl+]
    ld [wActorsPtr], a
    ld a, [hl]
    ld [wActorsPtr + 1], a
    xor a
    ld [wMoveCount], a
    call UpdateCamera
    call BuildOAM
    call hOAMDMA
    ld a, [wCamX]
    ldh [rSCX], a
    ld a, [wCamY]
    ldh [rSCY], a
    ld a, LCDC_ON
    ldh [rLCDC], a
    ret

; camera = player - (72, 64), clamped to the room
UpdateCamera:
    ld a, [wPX]
    sub 72
    jr nc, .xPositive
    xor a
.xPositive:
    ld b, a
    ld a, [wMaxCamX]
    cp b
    jr c, .xSet                     ; max < wanted: stay at max
    ld a, b
.xSet:
    ld [wCamX], a
    ld a, [wPY]
    sub 64
    jr nc, .yPositive
    xor a
.yPositive:
    ld b, a
    ld a, [wMaxCamY]
    cp b
    jr c, .ySet
    ld a, b
.ySet:
    ld [wCamY], a
    ret

; ----- VBlank work -------------------------------------------------------------------------------
VBlankUpdates:
    ld a, [wTextPending]
    and a
    jr z, .registers
    xor a
    ld [wTextPending], a
    ld a, [wTextPtr]
    ld e, a
    ld a, [wTextPtr + 1]
    ld d, a
    ld hl, $9C21                    ; window row 1, column 1
    call CopyLine18
    ld hl, $9C61                    ; window row 3, column 1
    call CopyLine18
    ld a, 1
    ld [wWindowOn], a
.registers:
    ld a, [wShownBGP]
    ldh [rBGP], a
    ld a, [wCamX]
    ldh [rSCX], a
    ld a, [wCamY]
    ldh [rSCY], a
    ld a, [wWindowY]
    ldh [rWY], a
    ld a, [wWindowOn]
    and a
    ld a, LCDC_ON
    jr z, .setLcdc
    or LCDC_WINDOW
.setLcdc:
    ldh [rLCDC], a
    ret

CopyLine18:                         ; de = text, hl = map address
    ld c, 18
.loop:
    ld a, [de]
    inc de
    ld [hl+], a
    dec c
    jr nz, .loop
    ret

; ----- input ------------------------------------------------------------------------------------
; wJoyHeld: bit 0 A, 1 B, 2 SELECT, 3 START, 4 RIGHT, 5 LEFT, 6 UP, 7 DOWN (1 = pressed)
ReadJoypad:
    ld a, $20                       ; select the direction keys
    ldh [rP1], a
    ldh a, [rP1]
    ldh a, [rP1]
    cpl
    and $0F
    swap a
    ld b, a
    ld a, $10                       ; select the buttons
    ldh [rP1], a
    ldh a, [rP1]
    ldh a, [rP1]
    ldh a, [rP1]
    ldh a, [rP1]
    cpl
    and $0F
    or b
    ld b, a
    ld a, $30
    ldh [rP1], a
    ld a, [wJoyHeld]
    cpl
    and b
    ld [wJoyNew], a
    ld a, b
    ld [wJoyHeld], a
    ret

; ----- game logic ---------------------------------------------------------------------------------
UpdateGame:
    ld a, [wState]
    cp STATE_WALK
    jr z, UpdateWalk
    cp STATE_TEXT
    jr z, UpdateText
    cp STATE_MENU
    jr z, UpdateMenu
    ret                             ; STATE_DONE: the game is over

UpdateText:                         ; A or B closes the text box
    ld a, [wJoyNew]
    and (1 << PAD_A) | (1 << PAD_B)
    ret z
    call CloseWindow
    ld a, [wQuestPending]
    and a
    ret z
    jp ShowCompleteScreen

UpdateMenu:                         ; START or B closes the menu
    ld a, [wJoyNew]
    and (1 << PAD_START) | (1 << PAD_B)
    ret z
    jp CloseWindow

CloseWindow:
    xor a
    ld [wWindowOn], a
    ld [wState], a                  ; STATE_WALK
    ret

UpdateWalk:
    ld a, [wMoveCount]
    and a
    jr z, .idle
    dec a
    ld [wMoveCount], a
    ld a, [wDX]
    ld b, a
    ld a, [wPX]
    add a, b
    ld [wPX], a
    ld a, [wDY]
    ld b, a
    ld a, [wPY]
    add a, b
    ld [wPY], a
    ld a, [wMoveCount]
    and a
    ret nz
    jp ArriveOnBlock
.idle:
    ld a, [wJoyNew]
    bit PAD_START, a
    jp nz, OpenMenu
    bit PAD_A, a
    jp nz, Interact
    ld a, [wJoyHeld]
    ld b, FACE_DOWN
    ld de, $0001                    ; d = dx, e = dy
    bit PAD_DOWN, a
    jr nz, TryStep
    ld b, FACE_UP
    ld e, $FF
    bit PAD_UP, a
    jr nz, TryStep
    ld b, FACE_LEFT
    ld de, $FF00
    bit PAD_LEFT, a
    jr nz, TryStep
    ld b, FACE_RIGHT
    ld d, $01
    bit PAD_RIGHT, a
    ret z
    ; fall through
TryStep:                            ; b = facing, d = dx, e = dy: turn, then step if free
    ld a, b
    ld [wFacing], a
    ld a, d
    ld [wDX], a
    ld a, e
    ld [wDY], a
    call FacedBlock
    ret c                           ; outside the room
    ld l, a
    ld h, HIGH(wCollision)
    ld a, [hl]
    cp ATTR_WALL
    ret z
    ld a, b
    ld [wX], a
    ld a, c
    ld [wY], a
    ld a, STEP_FRAMES
    ld [wMoveCount], a
    ld hl, wSteps
    inc [hl]
    ret nz
    inc hl
    inc [hl]
    ret

; returns b = x, c = y of the block in front of the player, a = y * 16 + x; carry if outside
FacedBlock:
    ld a, [wDX]
    ld b, a
    ld a, [wX]
    add a, b
    ld b, a
    ld a, [wRoomW]
    dec a
    cp b
    ret c
    ld a, [wDY]
    ld c, a
    ld a, [wY]
    add a, c
    ld c, a
    ld a, [wRoomH]
    dec a
    cp c
    ret c
    ld a, c
    swap a
    or b                            ; clears carry
    ret

ArriveOnBlock:
    ld a, [wY]
    swap a
    ld b, a
    ld a, [wX]
    or b
    ld l, a
    ld h, HIGH(wCollision)
    ld a, [hl]
    cp ATTR_DOOR
    jr z, TakeDoor
    cp ATTR_HAZARD
    jp z, ShowGameOverScreen
    cp ATTR_ITEM
    ret nz
    ld a, [wGemTaken]               ; the gem lies here until taken
    and a
    ret nz
    ld a, 1
    ld [wGemTaken], a
    ld [wHasGem], a
    call UpdateShownBGP             ; shown from the next VBlank on
    ld hl, TextFoundGem
    jp OpenText

; The shades the BG and window are shown in (returned in a and kept in wShownBGP): the
; room's own (wBGP), or, while the gem is carried, each shade one step lighter (the gem's
; light). Every room then looks different with the gem than without it, not only in the
; corner icon. Keeps bc, de and hl.
UpdateShownBGP:
    push bc
    push de
    ld a, [wBGP]
    ld b, a
    ld a, [wHasGem]
    and a
    ld a, b
    jr z, .store
    ; each 2-bit shade (h, l) becomes max(shade - 1, 0): h' = h and l, l' = h and not l
    and %10101010
    ld c, a                         ; c = the high bits
    ld a, b
    add a, a                        ; the low bits, moved up to the high bits' places
    and c
    ld d, a                         ; d = h'
    ld a, b
    cpl
    add a, a
    and c
    srl a                           ; h and not l, moved down to the low bits' places
    or d
.store:
    ld [wShownBGP], a
    pop de
    pop bc
    ret

TakeDoor:
    ld a, [wDoorsPtr]
    ld l, a
    ld a, [wDoorsPtr + 1]
    ld h, a
.find:
    ld a, [hl+]
    cp $FF
    ret z
    ld b, a
    ld a, [hl+]
    ld c, a
    ld a, [wX]
    cp b
    jr nz, .next
    ld a, [wY]
    cp c
    jr nz, .next
    ld a, [hl+]
    ld [wRoom], a
    ld a, [hl+]
    ld [wX], a
    ld a, [hl]
    ld [wY], a
    call SetPixelFromBlock
    jp LoadRoom
.next:
    inc hl
    inc hl
    inc hl
    jr .find

Interact:                           ; A: talk to the actor in front of the player
    call FacedBlock
    ret c
    ld d, b
    ld e, c
    ld a, [wActorsPtr]
    ld l, a
    ld a, [wActorsPtr + 1]
    ld h, a
.find:
    ld a, [hl+]                     ; x
    cp $FF
    ret z
    cp d
    jr nz, .skip
    ld a, [hl]                      ; y
    cp e
    jr nz, .skip
    inc hl
    inc hl                          ; -> kind
    ld a, [hl+]
    ld b, a
    ld a, [hl+]
    ld h, [hl]
    ld l, a                         ; hl = text
    ld a, b
    cp KIND_ELDER
    jr z, TalkElder
    jr OpenText
.skip:                              ; hl points at y: 5 more bytes to the next actor
    ld a, l
    add a, 5
    ld l, a
    jr nc, .find
    inc h
    jr .find

TalkElder:
    ld a, [wHasGem]
    and a
    jr z, OpenText
    ld a, 1
    ld [wQuestPending], a
    ld hl, TextElderThanks
    ; fall through
OpenText:                           ; hl = 36 characters: two lines of 18
    ld a, l
    ld [wTextPtr], a
    ld a, h
    ld [wTextPtr + 1], a
    ld a, 1
    ld [wTextPending], a
    ld a, STATE_TEXT
    ld [wState], a
    ret

OpenMenu:
    ld a, [wRoom]
    add a, a
    ld b, a
    ld a, [wHasGem]
    add a, b
    add a, a
    ld l, a
    ld h, 0
    ld de, MenuTextTable
    add hl, de
    ld a, [hl+]
    ld h, [hl]
    ld l, a
    call OpenText
    ld a, STATE_MENU
    ld [wState], a
    ret

ShowGameOverScreen:                 ; a pit: the game-over screen, for good
    ld a, 1
    ld [wGameOver], a
    ld de, GameOverScreen
    jr ShowEndScreen

ShowCompleteScreen:                 ; the window covers the screen for good
    ld a, 1
    ld [wQuestDone], a
    ld de, CompleteScreen
ShowEndScreen:                      ; de = the screen's 20x18 tiles
    ld a, STATE_DONE
    ld [wState], a
    call LcdOff                     ; keeps de
    ld hl, $9C00
    ld b, 18
    call CopyRows20
    xor a
    ld [wWindowY], a
    ldh [rWY], a
    ld a, %11100100
    ldh [rBGP], a
    ld [wShownBGP], a               ; VBlankUpdates keeps the end screen's shades
    ld a, 1
    ld [wWindowOn], a
    call BuildOAM                   ; no sprites in this state
    call hOAMDMA
    ld a, LCDC_ON | LCDC_WINDOW
    ldh [rLCDC], a
    ret

; ----- sprites -------------------------------------------------------------------------------------
MACRO oam_entry                     ; \1 = y offset, \2 = x offset, \3 = tile offset
    ld a, e
    add a, \1
    ld [hl+], a
    ld a, d
    add a, \2
    ld [hl+], a
    ld a, c
    add a, \3
    ld [hl+], a
    ld a, b
    ld [hl+], a
ENDM

; hl = OAM slot, d = OAM x, e = OAM y, c = first tile, b = attributes (bit 5: mirrored)
Draw16:
    bit 5, b
    jr nz, .mirrored
    oam_entry 0, 0, 0
    oam_entry 0, 8, 1
    oam_entry 8, 0, 2
    oam_entry 8, 8, 3
    ret
.mirrored:
    oam_entry 0, 0, 1
    oam_entry 0, 8, 0
    oam_entry 8, 0, 3
    oam_entry 8, 8, 2
    ret

; d = block x, e = block y -> d, e = OAM x, y of that block on screen
BlockToOam:
    ld a, [wCamX]
    ld b, a
    ld a, d
    swap a
    sub b
    add a, 8
    ld d, a
    ld a, [wCamY]
    ld b, a
    ld a, e
    swap a
    sub b
    add a, 16
    ld e, a
    ret

BuildOAM:
    ld hl, wShadowOAM
    ld b, 160
    xor a
.clear:
    ld [hl+], a
    dec b
    jr nz, .clear
    ld a, [wState]
    cp STATE_DONE
    ret z
    ld hl, wShadowOAM
    ld a, [wCamX]                   ; the player
    ld b, a
    ld a, [wPX]
    sub b
    add a, 8
    ld d, a
    ld a, [wCamY]
    ld b, a
    ld a, [wPY]
    sub b
    add a, 16
    ld e, a
    ld a, [wFacing]
    add a, a
    push hl
    ld hl, PlayerFrames
    add a, l
    ld l, a
    jr nc, .frameHigh
    inc h
.frameHigh:
    ld a, [hl+]
    ld c, a
    ld b, [hl]
    pop hl
    call Draw16
    ld a, [wHasGem]                 ; the gem in the top-right corner while carried
    and a
    jr z, .actors
    ld d, 8 + 144
    ld e, 16
    ld c, TILE_GEM
    ld b, 0
    call Draw16
.actors:
    push hl
    ld a, [wActorsPtr]
    ld l, a
    ld a, [wActorsPtr + 1]
    ld h, a
.actor:
    ld a, [hl+]
    cp $FF
    jr z, .actorsDone
    ld d, a
    ld a, [hl+]
    ld e, a
    ld a, [hl+]
    ld c, a
    inc hl
    inc hl
    inc hl
    ld a, c
    cp $FF                          ; signs have no sprite
    jr z, .actor
    call BlockToOam
    ld a, l
    ld [wIter], a
    ld a, h
    ld [wIter + 1], a
    pop hl
    ld b, 0
    call Draw16
    push hl
    ld a, [wIter]
    ld l, a
    ld a, [wIter + 1]
    ld h, a
    jr .actor
.actorsDone:
    pop hl
    ld a, [wRoom]                   ; the gem on the cave floor until taken
    cp GEM_ROOM
    jr nz, .hideUnderWindow
    ld a, [wGemTaken]
    and a
    jr nz, .hideUnderWindow
    ld d, GEM_X
    ld e, GEM_Y
    call BlockToOam
    ld c, TILE_GEM
    ld b, 0
    call Draw16
.hideUnderWindow:                   ; sprites would show on top of the text box
    ld a, [wState]
    and a                           ; STATE_WALK
    ret z
    ld hl, wShadowOAM
    ld b, 40
.entry:
    ld a, [hl]
    cp TEXTBOX_Y + 16 - 7           ; any row of the sprite reaches the box
    jr c, .keep
    xor a
    ld [hl], a
.keep:
    ld a, l
    add a, 4
    ld l, a
    dec b
    jr nz, .entry
    ret

PlayerFrames:                       ; per FACE_*: first tile, attributes
    db TILE_PLAYER_DOWN, 0
    db TILE_PLAYER_UP, 0
    db TILE_PLAYER_LEFT, 0
    db TILE_PLAYER_LEFT, %00100000
