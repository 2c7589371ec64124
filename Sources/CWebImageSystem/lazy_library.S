// The first call of a lazily loaded function (CWILazyLibrary.h): %r11 holds its
// descriptor. Saves what the caller may have passed (%rdi, %rsi, %rdx, %rcx, %r8,
// %r9, %xmm0-7, %al with the count of vector registers of a variadic call, %r10),
// asks cwi_lazy_resolve (lazy_library.c) for the function, restores, jumps.
// On entry %rsp is 8 past a multiple of 16 (the caller's call pushed the return
// address); after the push of %rbp and 192 bytes it is aligned for the call.
#if defined(__x86_64__) && defined(__linux__)
    .text
    .globl cwi_lazy_entry
    .hidden cwi_lazy_entry
    .type cwi_lazy_entry, @function
    .p2align 4
cwi_lazy_entry:
    endbr64
    pushq %rbp
    movq %rsp, %rbp
    subq $192, %rsp
    movq %rdi, 0(%rsp)
    movq %rsi, 8(%rsp)
    movq %rdx, 16(%rsp)
    movq %rcx, 24(%rsp)
    movq %r8, 32(%rsp)
    movq %r9, 40(%rsp)
    movq %rax, 48(%rsp)
    movq %r10, 56(%rsp)
    movdqa %xmm0, 64(%rsp)
    movdqa %xmm1, 80(%rsp)
    movdqa %xmm2, 96(%rsp)
    movdqa %xmm3, 112(%rsp)
    movdqa %xmm4, 128(%rsp)
    movdqa %xmm5, 144(%rsp)
    movdqa %xmm6, 160(%rsp)
    movdqa %xmm7, 176(%rsp)
    movq %r11, %rdi
    call cwi_lazy_resolve
    movq %rax, %r11
    movq 0(%rsp), %rdi
    movq 8(%rsp), %rsi
    movq 16(%rsp), %rdx
    movq 24(%rsp), %rcx
    movq 32(%rsp), %r8
    movq 40(%rsp), %r9
    movq 48(%rsp), %rax
    movq 56(%rsp), %r10
    movdqa 64(%rsp), %xmm0
    movdqa 80(%rsp), %xmm1
    movdqa 96(%rsp), %xmm2
    movdqa 112(%rsp), %xmm3
    movdqa 128(%rsp), %xmm4
    movdqa 144(%rsp), %xmm5
    movdqa 160(%rsp), %xmm6
    movdqa 176(%rsp), %xmm7
    leave
    jmp *%r11
    .size cwi_lazy_entry, . - cwi_lazy_entry
#endif

#if defined(__linux__) && defined(__ELF__)
    .section .note.GNU-stack, "", @progbits
#endif
