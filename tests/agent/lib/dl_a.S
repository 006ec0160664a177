/* dl_a.S — f allocates through a frame of 16 bytes; dl_b.S has the same
 * code at the same offsets with a frame of 80 (tests/agent/detail_dl.c). */
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
        sub $0x8, %rsp
        .cfi_def_cfa_offset 0x10
        call malloc@PLT
        add $0x8, %rsp
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size f, .-f
        .section .note.GNU-stack,"",@progbits
