#include "textflag.h"

// AVX2 string kernels (see kernel.go for the contract). Registers shared by both:
// SI = src, DX = len(src), R8 = i (bytes of src consumed), R10 = &escDecode,
// R11 = &utf8Lead, Y1/Y2/Y3 = 32 copies of '"', '\\' and 0x1f.

// SETUP loads the tables and the comparison vectors (from memory: moving a general
// register to a vector register here measured ~100× slower per call on this machine).
#define SETUP \
	LEAQ    ·escDecode(SB), R10; \
	LEAQ    ·utf8Lead(SB), R11;  \
	VMOVDQU vecs<>+0(SB), Y1;    \
	VMOVDQU vecs<>+32(SB), Y2;   \
	VMOVDQU vecs<>+64(SB), Y3

// vecs holds 32 copies each of '"', '\\' and 0x1f.
DATA vecs<>+0(SB)/8, $0x2222222222222222
DATA vecs<>+8(SB)/8, $0x2222222222222222
DATA vecs<>+16(SB)/8, $0x2222222222222222
DATA vecs<>+24(SB)/8, $0x2222222222222222
DATA vecs<>+32(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA vecs<>+40(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA vecs<>+48(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA vecs<>+56(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA vecs<>+64(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA vecs<>+72(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA vecs<>+80(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA vecs<>+88(SB)/8, $0x1f1f1f1f1f1f1f1f
GLOBL vecs<>(SB), RODATA|NOPTR, $96

// SPECIAL sets AX to the mask of the bytes of Y0 that are not plain: '"', '\\', control
// characters and non-ASCII bytes (a plain byte is above 0x1f as a signed byte and is
// neither a quote nor a backslash).
#define SPECIAL \
	VPCMPEQB  Y0, Y1, Y4; \
	VPCMPEQB  Y0, Y2, Y5; \
	VPOR      Y4, Y5, Y4; \
	VPCMPGTB  Y3, Y0, Y5; \
	VPANDN    Y5, Y4, Y4; \
	VPMOVMSKB Y4, AX;     \
	NOTL      AX

// TAILBYTE loads src[i] into CX and jumps to special unless it is plain; done at the
// end of src.
#define TAILBYTE(done, special) \
	CMPQ    R8, DX;          \
	JAE     done;            \
	MOVBLZX (SI)(R8*1), CX;  \
	CMPL    CX, $0x20;       \
	JB      special;         \
	CMPL    CX, $0x80;       \
	JAE     special;         \
	CMPL    CX, $0x22;       \
	JEQ     special;         \
	CMPL    CX, $0x5c;       \
	JEQ     special

// ESCAPE sets CX to the byte the two-byte escape at src[i] (a backslash) stands for,
// or jumps to fail when there is none (a \u escape, an invalid one, or the end of src).
#define ESCAPE(fail) \
	LEAQ    1(R8), BX;         \
	CMPQ    BX, DX;            \
	JAE     fail;              \
	MOVBLZX (SI)(BX*1), CX;    \
	MOVBLZX (R10)(CX*1), CX;   \
	TESTL   CX, CX;            \
	JZ      fail

// UTF8SEQ checks the sequence led by CX = src[i]. It sets BX to its size and AX to the
// four bytes at src[i], or jumps to fail when CX is ASCII (a quote or a control
// character), the sequence is invalid, or fewer than four bytes of src remain (the caller
// then decides byte by byte).
#define UTF8SEQ(fail) \
	CMPL  CX, $0x80;           \
	JB    fail;                \
	MOVQ  (R11)(CX*8), BX;     \
	TESTQ BX, BX;              \
	JZ    fail;                \
	LEAQ  4(R8), AX;           \
	CMPQ  AX, DX;              \
	JA    fail;                \
	MOVL  (SI)(R8*1), AX;      \
	MOVL  AX, CX;              \
	SHRL  $8, CX;              \
	ANDL  $0xff, CX;           \
	MOVL  BX, R12;             \
	SHRL  $8, R12;             \
	ANDL  $0xff, R12;          \
	SUBL  R12, CX;             \
	MOVL  BX, R12;             \
	SHRL  $16, R12;            \
	ANDL  $0xff, R12;          \
	CMPL  CX, R12;             \
	JA    fail;                \
	MOVQ  BX, R12;             \
	SHRQ  $32, R12;            \
	MOVL  AX, CX;              \
	XORL  $0x80808080, CX;     \
	ANDL  R12, CX;             \
	JNZ   fail;                \
	ANDL  $0xff, BX

// func decodeRunAVX2(dst, src []byte) (n, m int)
// DI = dst, R9 = j (bytes of dst written). j <= i always, and 32-byte stores happen only
// while 32 bytes of src remain (4-byte stores while 4 remain), so with len(src) clamped
// to len(dst) every store stays inside dst[:len(src)].
TEXT ·decodeRunAVX2(SB), NOSPLIT, $0-64
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), BX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), DX
	CMPQ BX, DX
	CMOVQLT BX, DX
	XORQ R8, R8
	XORQ R9, R9
	SETUP

dloop:
	MOVQ DX, AX
	SUBQ R8, AX
	CMPQ AX, $32
	JB   dtail
	VMOVDQU (SI)(R8*1), Y0
	VMOVDQU Y0, (DI)(R9*1)
	SPECIAL
	TESTL AX, AX
	JNZ  dspecial
	ADDQ $32, R8
	ADDQ $32, R9
	JMP  dloop

dspecial:
	BSFL    AX, AX
	ADDQ    AX, R8
	ADDQ    AX, R9
	MOVBLZX (SI)(R8*1), CX
	JMP     dhandle

dtail:
	TAILBYTE(ddone, dhandle)
	MOVB CX, (DI)(R9*1)
	INCQ R8
	INCQ R9
	JMP  dtail

dhandle:
	CMPL CX, $0x5c
	JNE  dnotesc
	ESCAPE(ddone)
	MOVB CX, (DI)(R9*1)
	ADDQ $2, R8
	INCQ R9
	JMP  dloop

dnotesc:
	UTF8SEQ(ddone)
	MOVL AX, (DI)(R9*1)
	ADDQ BX, R8
	ADDQ BX, R9
	JMP  dloop

ddone:
	VZEROUPPER
	MOVQ R8, n+48(FP)
	MOVQ R9, m+56(FP)
	RET

// func scanRunAVX2(src []byte, plain bool) (n int, escaped bool)
// R13 = escaped, R14 = plain.
TEXT ·scanRunAVX2(SB), NOSPLIT, $0-41
	MOVQ    src_base+0(FP), SI
	MOVQ    src_len+8(FP), DX
	MOVBLZX plain+24(FP), R14
	XORQ    R8, R8
	XORQ    R13, R13
	SETUP

sloop:
	MOVQ DX, AX
	SUBQ R8, AX
	CMPQ AX, $32
	JB   stail
	VMOVDQU (SI)(R8*1), Y0
	SPECIAL
	TESTL AX, AX
	JNZ  sspecial
	ADDQ $32, R8
	JMP  sloop

sspecial:
	BSFL    AX, AX
	ADDQ    AX, R8
	MOVBLZX (SI)(R8*1), CX
	JMP     shandle

sdone:
	VZEROUPPER
	MOVQ R8, n+32(FP)
	MOVB R13, escaped+40(FP)
	RET

stail:
	TAILBYTE(sdone, shandle)
	INCQ R8
	JMP  stail

shandle:
	CMPL  CX, $0x5c
	JNE   snotesc
	TESTQ R14, R14
	JNZ   sdone
	ESCAPE(sdone)
	MOVQ  $1, R13
	ADDQ  $2, R8
	JMP   sloop

snotesc:
	UTF8SEQ(sdone)
	ADDQ BX, R8
	JMP  sloop
