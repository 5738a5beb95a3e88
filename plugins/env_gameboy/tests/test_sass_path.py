"""sass_path.loop_path: the instruction loop's always-run blocks in a kernel's SASS."""

from __future__ import annotations

from gbx_gameboy.sass_path import loop_path

# An entry with Warp's grid-stride loop around an instruction loop. In the instruction
# loop: the header, a rare path that goes straight back (a ``continue``), the anchor (the
# predecoded entry's load), an arm that only some instructions take, the join and the back-edge.
# A callee follows; its spills are not the entry's.
SASS = """
        .text.k_cuda_kernel_forward:
        /*0000*/                   LDC R1, c[0x0][0x28] ;   /* 0x00000a00ff017b82 */
.L_x_0:
        /*0010*/                   STL [R1+0x0], R2 ;
.L_x_1:
        /*0020*/                   LDL R2, [R1+0x0] ;
        /*0030*/              @P3 BRA `(.L_x_4) ;
        /*0040*/              @P0 BRA `(.L_x_2) ;
        /*0050*/                   LDG.E.128.CONSTANT R12, desc[UR4][R4.64] ;
        /*0060*/                   LDG.E R5, desc[UR4][R4.64+0x8] ;
        /*0070*/                   STL [R1+0x4], R3 ;
        /*0080*/              @P1 BRA `(.L_x_3) ;
        /*0090*/                   LDL R6, [R1+0x8] ;
.L_x_3:
        /*00a0*/                   LDL R7, [R1+0xc] ;
        /*00b0*/                   BRA `(.L_x_1) ;
.L_x_2:
        /*00c0*/                   LDL R8, [R1+0x10] ;
        /*00d0*/                   STL [R1+0x14], R8 ;
        /*00e0*/                   BRA `(.L_x_1) ;
.L_x_4:
        /*00f0*/              @P2 BRA `(.L_x_0) ;
        /*0100*/                   EXIT ;
$k_cuda_kernel_forward$callee:
        /*0110*/                   LDL R9, [R1+0x18] ;
        /*0120*/                   RET.REL.NODEC R20 `(k_cuda_kernel_forward) ;
"""


def test_loop_path_counts_the_blocks_every_instruction_runs() -> None:
    path = loop_path(SASS, "k_cuda_kernel_forward")
    assert path is not None
    # header (LDL, branch), the rare path's test (branch), anchor (2 LDG, STL, branch),
    # join (LDL, BRA); not the arm's LDL, the rare path's LDL/STL, the grid loop's STL or
    # the callee's LDL
    assert (path.instructions, path.local_loads, path.local_stores) == (9, 2, 1)


def test_loop_path_without_the_entry_load_is_none() -> None:
    assert loop_path(SASS.replace("LDG.E.128", "LDG.E.64"), "k_cuda_kernel_forward") is None
    assert loop_path(SASS, "other_kernel") is None
