/* dl_b.S — dl_a.S with a larger frame: the same addresses, other unwind
 * rules (tests/agent/detail_dl.c). */
        .text
        .globl g
        .type g,@function
g:
        .cfi_startproc
        nop
        nop
        ret
        .cfi_endproc
        .size g, .-g
        .globl f
        .type f,@function
        .p2align 4
f:
        .cfi_startproc
        sub $0x48, %rsp
        .cfi_def_cfa_offset 0x50
        call malloc@PLT
        add $0x48, %rsp
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size f, .-f
        .section .note.GNU-stack,"",@progbits
