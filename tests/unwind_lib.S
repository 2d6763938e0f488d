/* unwind_lib.S -- a plug-in for test_profile's "reload" case (built twice by
 * tests/profile.mk: HAK_FRAME=24 and HAK_FRAME=56).  lib_alloc(n) returns
 * malloc(n) from a frame of HAK_FRAME bytes; both builds have the same bytes
 * everywhere but the frame size, so lib_ret (the return address of the
 * malloc call) has the same offset, and a build loaded where the other was
 * unloaded has it at the same address -- with another CFA offset.  The other
 * build's return-address slot holds 0 here, so a walk that takes the stale
 * rule stops right after lib_alloc instead of reaching its caller. */
#ifndef HAK_FRAME
#define HAK_FRAME 24
#endif
#if HAK_FRAME == 24
#define HAK_OTHER_RA 16          /* (a slot of this frame: the same instruction length) */
#else
#define HAK_OTHER_RA 24          /* where the 24-byte build keeps its return address */
#endif
    .text
    .globl lib_alloc
    .type lib_alloc, @function
lib_alloc:
    .cfi_startproc
    sub $HAK_FRAME, %rsp
    .cfi_def_cfa_offset HAK_FRAME + 8
    movq $0, HAK_OTHER_RA(%rsp)
    call malloc@PLT
    .globl lib_ret
lib_ret:
    add $HAK_FRAME, %rsp
    .cfi_def_cfa_offset 8
    ret
    .cfi_endproc
    .size lib_alloc, .-lib_alloc
    .section .note.GNU-stack,"",@progbits
