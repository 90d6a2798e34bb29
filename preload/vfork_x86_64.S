/* vfork() cannot be wrapped by a C function: the child would return from the
 * wrapper's frame and clobber the stack the suspended parent resumes on. This
 * trampoline asks for the real vfork's address (a normal call that returns
 * before anything forks) and then jumps to it, so the real vfork returns
 * straight to our caller, exactly as without the library. */
#if defined(__x86_64__)
    .text
    .globl  vfork
    .type   vfork, @function
vfork:
    .cfi_startproc
    subq    $8, %rsp
    .cfi_adjust_cfa_offset 8
    call    vsock_real_vfork_address
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    jmp     *%rax
    .cfi_endproc
    .size   vfork, .-vfork
#endif
    .section .note.GNU-stack,"",@progbits
