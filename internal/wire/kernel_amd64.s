#include "textflag.h"

// AVX2 and AVX-512 string kernels (contract: kernel.go; how they work: docs/design/wire.md,
// "String kernels"). SI = src, DX = len(src), R8 = i, R10 = &escDecode, R11 = &utf8Lead;
// Y1/Y2/Y3 = '"', '\\', 0x1f; each step takes the 64 bytes at src[i] (Y0, Y9).

// SETUP loads the tables and the comparison vectors (from memory); the nibble tables are
// loaded where they are used, so a call for a short string loads three vectors only.
#define SETUP \
	LEAQ    ·escDecode(SB), R10;     \
	LEAQ    ·utf8Lead(SB), R11;      \
	VMOVDQU vecs<>+QUOTE(SB), Y1;    \
	VMOVDQU vecs<>+BSLASH(SB), Y2;   \
	VMOVDQU vecs<>+CTL(SB), Y3

#define QUOTE 0
#define BSLASH 32
#define CTL 64
#define NIB 96
#define E0 128
#define F0 160
#define HI 192

// vecs holds 32 copies each of '"', '\\', 0x1f, 0x0f, 0xdf, 0xef and 0x80.
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
DATA vecs<>+96(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vecs<>+104(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vecs<>+112(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vecs<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vecs<>+128(SB)/8, $0xdfdfdfdfdfdfdfdf
DATA vecs<>+136(SB)/8, $0xdfdfdfdfdfdfdfdf
DATA vecs<>+144(SB)/8, $0xdfdfdfdfdfdfdfdf
DATA vecs<>+152(SB)/8, $0xdfdfdfdfdfdfdfdf
DATA vecs<>+160(SB)/8, $0xefefefefefefefef
DATA vecs<>+168(SB)/8, $0xefefefefefefefef
DATA vecs<>+176(SB)/8, $0xefefefefefefefef
DATA vecs<>+184(SB)/8, $0xefefefefefefefef
DATA vecs<>+192(SB)/8, $0x8080808080808080
DATA vecs<>+200(SB)/8, $0x8080808080808080
DATA vecs<>+208(SB)/8, $0x8080808080808080
DATA vecs<>+216(SB)/8, $0x8080808080808080
GLOBL vecs<>(SB), RODATA|NOPTR, $224

// MASK64 sets dst to the 64-bit mask of the bytes where the comparison op holds:
// op a0, b0 for the block's first half, op a1, b1 for its second. Clobbers Y4, R12.
#define MASK64(op, a0, b0, a1, b1, dst) \
	op        a0, b0, Y4; \
	VPMOVMSKB Y4, dst;    \
	op        a1, b1, Y4; \
	VPMOVMSKB Y4, R12;    \
	SHLQ      $32, R12;   \
	ORQ       R12, dst

// SPECIAL sets CX to the quotes of the block Y0:Y9, BX to its backslashes and AX to its
// bytes that are not plain: '"', '\\', control characters and non-ASCII bytes (a plain
// byte is above 0x1f as a signed byte and is neither a quote nor a backslash).
#define SPECIAL \
	MASK64(VPCMPEQB, Y0, Y1, Y9, Y1, CX); \
	MASK64(VPCMPEQB, Y0, Y2, Y9, Y2, BX); \
	MASK64(VPCMPGTB, Y3, Y0, Y3, Y9, AX); \
	NOTQ AX;                              \
	ORQ  CX, AX;                          \
	ORQ  BX, AX

// REGION analyses the block Y0:Y9 with special bytes AX (not 0), quotes CX and backslashes
// BX: it jumps to slow unless vector checks clear the region, else leaves CX = its length
// (1..64), BX = its backslashes, R13 = its mask.
#define REGION(slow) \
	VPMOVMSKB Y0, R12;                 \
	VPMOVMSKB Y9, R13;                 \
	SHLQ      $32, R13;                \
	ORQ       R13, R12;                \
	MOVQ      BX, R13;                 \
	ORQ       CX, R13;                 \
	ORQ       R12, R13;                \
	NOTQ      R13;                     \
	ANDQ      AX, R13;                 \
	LEAQ      (BX)(BX*1), R14;         \
	TESTQ     R14, BX;                 \
	JNZ       slow;                    \
	NOTQ      R14;                     \
	ANDQ      R14, CX;                 \
	ORQ       R13, CX;                 \
	MOVQ      $64, R13;                \
	BSFQ      CX, CX;                  \
	CMOVQEQ   R13, CX;                 \
	TESTQ     CX, CX;                  \
	JZ        slow;                    \
	LEAQ      -1(CX), R13;             \
	BTQ       R13, BX;                 \
	SBBQ      $0, CX;                  \
	JZ        slow;                    \
	MOVQ      $-1, R13;                \
	BZHIQ     CX, R13, R13;            \
	LEAQ      1(R13)(R13*1), R14;      \
	TESTQ     R14, R12;                \
	JZ        rgdone;                  \
	VMOVDQU   ·utf8Prev1High(SB), Y10; \
	VMOVDQU   ·utf8Prev1Low(SB), Y11;  \
	VMOVDQU   ·utf8CurHigh(SB), Y12;   \
	UTF8ERR(Y0, $0x08, Y0, R12);       \
	UTF8ERR(Y9, $0x21, Y0, R13);       \
	SHLQ      $32, R13;                \
	ORQ       R13, R12;                \
	MOVQ      $-1, R13;                \
	BZHIQ     CX, R13, R13;            \
	ANDQ      R14, R12;                \
	JNZ       slow;                    \
	CMPQ      CX, $64;                 \
	JNE       rgdone;                  \
	MOVBLZX   63(SI)(R8*1), R12;       \
	MOVQ      $63, R14;                \
	CMPL      R12, $0xc0;              \
	JAE       rgtrim;                  \
	MOVBLZX   62(SI)(R8*1), R12;       \
	MOVQ      $62, R14;                \
	CMPL      R12, $0xe0;              \
	JAE       rgtrim;                  \
	MOVBLZX   61(SI)(R8*1), R12;       \
	MOVQ      $61, R14;                \
	CMPL      R12, $0xf0;              \
	JB        rgdone;                  \
rgtrim:                                \
	MOVQ      R14, CX;                 \
	MOVQ      $-1, R13;                \
	BZHIQ     CX, R13, R13;            \
rgdone:                                \
	ANDQ      R13, BX

// LOOKUP2 sets dst to thigh[src>>4] & tlow[src&15] for every byte of src (a nibble
// lookup in each 128-bit lane); tmp may be src.
#define LOOKUP2(src, thigh, tlow, dst, tmp) \
	VPSRLW  $4, src, dst;            \
	VPAND   vecs<>+NIB(SB), dst, dst; \
	VPSHUFB dst, thigh, dst;         \
	VPAND   vecs<>+NIB(SB), src, tmp; \
	VPSHUFB tmp, tlow, tmp;          \
	VPAND   tmp, dst, dst

// UTF8ERR sets r to the bytes of cur where the vector UTF-8 validation finds an error;
// VPERM2I128 with perm puts the 16 bytes before cur's lanes into Y8's (first half: zeros,
// taken as ASCII; second: the end of Y0). Clobbers Y6, Y7, Y8, Y15.
#define UTF8ERR(cur, perm, prev, r) \
	VPERM2I128 perm, cur, prev, Y8;   \
	VPALIGNR   $15, Y8, cur, Y15;     \
	VPALIGNR   $14, Y8, cur, Y6;      \
	VPALIGNR   $13, Y8, cur, Y7;      \
	VPSUBUSB   vecs<>+E0(SB), Y6, Y6; \
	VPSUBUSB   vecs<>+F0(SB), Y7, Y7; \
	VPOR       Y6, Y7, Y6;            \
	VPXOR      Y8, Y8, Y8;            \
	VPCMPGTB   Y8, Y6, Y6;            \
	VPAND      vecs<>+HI(SB), Y6, Y6; \
	LOOKUP2(Y15, Y10, Y11, Y7, Y15);  \
	VPSRLW     $4, cur, Y15;          \
	VPAND      vecs<>+NIB(SB), Y15, Y15; \
	VPSHUFB    Y15, Y12, Y15;         \
	VPAND      Y15, Y7, Y7;           \
	VPXOR      Y6, Y7, Y7;            \
	VPCMPEQB   Y8, Y7, Y7;            \
	VPMOVMSKB  Y7, r;                 \
	NOTL       r

// ESCOK jumps to slow unless every byte after a backslash of the region (BX) is a valid
// two-byte escape. Clobbers R12, R13, R14, Y6, Y7, Y8.
#define ESCOK(slow) \
	VMOVDQU   ·escLow(SB), Y13;       \
	VMOVDQU   ·escHigh(SB), Y14;      \
	LOOKUP2(Y0, Y14, Y13, Y7, Y6);    \
	VPXOR     Y8, Y8, Y8;             \
	VPCMPEQB  Y8, Y7, Y7;             \
	VPMOVMSKB Y7, R14;                \
	LOOKUP2(Y9, Y14, Y13, Y7, Y6);    \
	VPCMPEQB  Y8, Y7, Y7;             \
	VPMOVMSKB Y7, R13;                \
	SHLQ      $32, R13;               \
	ORQ       R13, R14;               \
	LEAQ      (BX)(BX*1), R12;        \
	TESTQ     R14, R12;               \
	JNZ       slow

// AFTER ends a region at src[i]: at the end of src, or at a quote or control character,
// the call is done; otherwise the next block.
#define AFTER(done, loop) \
	CMPQ    R8, DX;         \
	JAE     done;           \
	MOVBLZX (SI)(R8*1), CX; \
	CMPL    CX, $0x22;      \
	JEQ     done;           \
	CMPL    CX, $0x20;      \
	JB      done;           \
	JMP     loop

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

// UTF8SEQ checks the sequence led by CX = src[i], setting BX to its size and R13 to the four
// bytes at src[i]; it jumps to fail for ASCII, an invalid sequence, or under four bytes left.
#define UTF8SEQ(fail) \
	CMPL  CX, $0x80;           \
	JB    fail;                \
	MOVQ  (R11)(CX*8), BX;     \
	TESTQ BX, BX;              \
	JZ    fail;                \
	LEAQ  4(R8), R13;          \
	CMPQ  R13, DX;             \
	JA    fail;                \
	MOVL  (SI)(R8*1), R13;     \
	MOVL  R13, CX;             \
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
	MOVL  R13, CX;             \
	XORL  $0x80808080, CX;     \
	ANDL  R12, CX;             \
	JNZ   fail;                \
	ANDL  $0xff, BX

// BLOCK loads the 64 bytes at src[i] into Y0 and Y9, or jumps to tail when fewer
// remain (clobbers CX, not the mask AX).
#define BLOCK(tail) \
	MOVQ    DX, CX;           \
	SUBQ    R8, CX;           \
	CMPQ    CX, $64;          \
	JB      tail;             \
	VMOVDQU (SI)(R8*1), Y0;   \
	VMOVDQU 32(SI)(R8*1), Y9

// CLEAR drops from the mask AX the bits before src[i] (all from i - R14 >= 64 on) and jumps
// to next when special bytes remain; else it moves i (and delta) to the block's end, unless
// a sequence took i past it, and jumps to loop.
#define CLEAR(delta, next, loop) \
	MOVQ    R8, CX;      \
	SUBQ    R14, CX;     \
	MOVQ    $-1, R12;    \
	SHLQ    CX, R12;     \
	XORL    R13, R13;    \
	CMPQ    CX, $64;     \
	CMOVQCC R13, R12;    \
	ANDQ    R12, AX;     \
	JNZ     next;        \
	LEAQ    64(R14), CX; \
	SUBQ    R8, CX;      \
	JLE     loop;        \
	ADDQ    CX, R8;      \
	ADDQ    CX, delta;   \
	JMP     loop

// NEXT moves i (and the register delta) to the next special byte of the block, the
// lowest bit of AX, and loads it into CX.
#define NEXT(delta) \
	BSFQ    AX, BX;         \
	ADDQ    R14, BX;        \
	MOVQ    BX, CX;         \
	SUBQ    R8, CX;         \
	ADDQ    CX, delta;      \
	MOVQ    BX, R8;         \
	MOVBLZX (SI)(R8*1), CX

// DECODEARGS loads dst (DI), src (SI) and len(src) clamped to len(dst) (DX) and sets i
// (R8) and j (R9) to 0.
#define DECODEARGS \
	MOVQ    dst_base+0(FP), DI; \
	MOVQ    dst_len+8(FP), BX;  \
	MOVQ    src_base+24(FP), SI; \
	MOVQ    src_len+32(FP), DX; \
	CMPQ    BX, DX;             \
	CMOVQLT BX, DX;             \
	XORQ    R8, R8;             \
	XORQ    R9, R9

// VDECODE writes the decoded byte (escDecode) over each escaped byte R13 of Z0, or jumps
// to fail when one does not decode.
#define VDECODE(fail) \
	VMOVDQA64 Z0, Z6;     \
	VPERMI2B  Z5, Z4, Z6; \
	VPTESTNMB Z6, Z6, K4; \
	KMOVQ     K4, CX;     \
	TESTQ     CX, R13;    \
	JNZ       fail;       \
	KMOVQ     R13, K5;    \
	VMOVDQU8  Z6, K5, Z0

// VSTORE stores the bytes of Z0 that K6 selects, in order, at dst[j].
#define VSTORE \
	VPCOMPRESSB Z0, K6, Z7; \
	VMOVDQU64   Z7, (DI)(R9*1)

// func decodeRunAVX2(dst, src []byte) (n, m int)
// DI = dst, R9 = j <= i. A store of k bytes happens only while k bytes of src remain (an
// escape move's, up to 127 bytes on, while 128 do), so all stay inside dst[:len(src)].
TEXT ·decodeRunAVX2(SB), NOSPLIT, $0-64
	DECODEARGS
	SETUP

dloop:
	BLOCK(dtail)
	VMOVDQU Y0, (DI)(R9*1)
	VMOVDQU Y9, 32(DI)(R9*1)
	SPECIAL
	TESTQ   AX, AX
	JNZ     dregion
	ADDQ    $64, R8
	ADDQ    $64, R9
	JMP     dloop

dregion:
	REGION(dslow)
	TESTQ BX, BX
	JNZ   descapes
	ADDQ  CX, R8
	ADDQ  CX, R9
	AFTER(ddone, dloop)

descapes:
	// The 64-byte moves below read up to 128 bytes from the block's start.
	MOVQ DX, R12
	SUBQ R8, R12
	CMPQ R12, $128
	JB   dslow
	ESCOK(dslow)

	// Each escape, in order: the text after it moves down over its backslash (two
	// 32-byte loads and stores), then the escaped byte is decoded in place. R9 runs as
	// j minus the escapes done.
descape:
	BSFQ    BX, R12
	LEAQ    -1(BX), R13
	ANDQ    R13, BX
	LEAQ    (R8)(R12*1), R13
	MOVBLZX 1(SI)(R13*1), R14
	MOVBLZX (R10)(R14*1), R14
	VMOVDQU 1(SI)(R13*1), Y6
	VMOVDQU 33(SI)(R13*1), Y7
	ADDQ    R9, R12
	VMOVDQU Y6, (DI)(R12*1)
	VMOVDQU Y7, 32(DI)(R12*1)
	MOVB    R14, (DI)(R12*1)
	DECQ    R9
	TESTQ   BX, BX
	JNZ     descape
	ADDQ    CX, R8
	ADDQ    CX, R9
	AFTER(ddone, dloop)

dslow:
	MOVQ R8, R14

dnext:
	NEXT(R9)
	CMPL CX, $0x5c
	JNE  dutf8
	ESCAPE(ddone)
	MOVB CX, (DI)(R9*1)
	ADDQ $2, R8
	INCQ R9
	BLOCK(dtail)
	VMOVDQU Y0, (DI)(R9*1)
	VMOVDQU Y9, 32(DI)(R9*1)
	CLEAR(R9, dnext, dloop)

dutf8:
	UTF8SEQ(ddone)
	MOVL R13, (DI)(R9*1)
	ADDQ BX, R8
	ADDQ BX, R9
	CLEAR(R9, dnext, dloop)

ddone:
	VZEROUPPER
	MOVQ R8, n+48(FP)
	MOVQ R9, m+56(FP)
	RET

dtail:
	TAILBYTE(ddone, dtailspecial)
	MOVB CX, (DI)(R9*1)
	INCQ R8
	INCQ R9
	JMP  dtail

dtailspecial:
	CMPL CX, $0x5c
	JNE  dtailutf8
	ESCAPE(ddone)
	MOVB CX, (DI)(R9*1)
	ADDQ $2, R8
	INCQ R9
	JMP  dtail

dtailutf8:
	UTF8SEQ(ddone)
	MOVL R13, (DI)(R9*1)
	ADDQ BX, R8
	ADDQ BX, R9
	JMP  dtail

// func scanRunAVX2(src []byte) (n int, escaped bool)
// DI is free (nothing is written).
TEXT ·scanRunAVX2(SB), NOSPLIT, $0-33
	MOVQ    src_base+0(FP), SI
	MOVQ    src_len+8(FP), DX
	MOVB    $0, escaped+32(FP)
	XORQ    R8, R8
	SETUP

sloop:
	BLOCK(stail)
	SPECIAL
	TESTQ AX, AX
	JNZ   sregion
	ADDQ  $64, R8
	JMP   sloop

sregion:
	REGION(sslow)
	ADDQ  CX, R8
	TESTQ BX, BX
	JZ    safter
	ESCOK(sslowback)
	MOVB  $1, escaped+32(FP)

safter:
	AFTER(sdone, sloop)

sslowback:
	SUBQ CX, R8
	VMOVDQU (SI)(R8*1), Y0
	SPECIAL

sslow:
	MOVQ R8, R14

snext:
	NEXT(DI)
	CMPL  CX, $0x5c
	JNE   sutf8
	ESCAPE(sdone)
	MOVB  $1, escaped+32(FP)
	ADDQ  $2, R8
	CLEAR(DI, snext, sloop)

sutf8:
	UTF8SEQ(sdone)
	ADDQ BX, R8
	CLEAR(DI, snext, sloop)

sdone:
	VZEROUPPER
	MOVQ R8, n+24(FP)
	RET

stail:
	TAILBYTE(sdone, stailspecial)
	INCQ R8
	JMP  stail

stailspecial:
	CMPL  CX, $0x5c
	JNE   stailutf8
	ESCAPE(sdone)
	MOVB  $1, escaped+32(FP)
	ADDQ  $2, R8
	JMP   stail

stailutf8:
	UTF8SEQ(sdone)
	ADDQ BX, R8
	JMP  stail

// func decodeRunVBMI2(dst, src []byte) (n, m int)
// Plain ASCII and two-byte escapes, 64 bytes per step; registers as in decodeRunAVX2,
// Z1/Z2/Z3 = '"', '\\', 0x1f and Z4:Z5 = escDecode[:128].
TEXT ·decodeRunVBMI2(SB), NOSPLIT, $0-64
	DECODEARGS
	VPBROADCASTB vecs<>+QUOTE(SB), Z1
	VPBROADCASTB vecs<>+BSLASH(SB), Z2
	VPBROADCASTB vecs<>+CTL(SB), Z3
	VMOVDQU64    ·escDecode+0(SB), Z4
	VMOVDQU64    ·escDecode+64(SB), Z5

vloop:
	MOVQ      DX, CX
	SUBQ      R8, CX
	CMPQ      CX, $64
	JB        vdone
	VMOVDQU64 (SI)(R8*1), Z0
	VPCMPUB   $2, Z3, Z0, K1
	VPMOVB2M  Z0, K2
	KORQ      K1, K2, K1
	KMOVQ     K1, AX
	VPCMPEQB  Z1, Z0, K2
	KMOVQ     K2, CX
	VPCMPEQB  Z2, Z0, K3
	KMOVQ     K3, BX
	MOVQ      AX, R12
	ORQ       CX, R12
	ORQ       BX, R12
	JNZ       vspecial
	VMOVDQU64 Z0, (DI)(R9*1)
	ADDQ      $64, R8
	ADDQ      $64, R9
	JMP       vloop

vspecial:
	// R13 = the escaped bytes; a backslash that is itself escaped is left to AVX2.
	LEAQ   (BX)(BX*1), R13
	TESTQ  R13, BX
	JNZ    vdone
	// The region ends at the first unescaped quote, control or non-ASCII byte (R12 =
	// its length e), less a backslash at its end (its escape continues past it). A whole
	// block with escapes only takes the short way, which does not wait for e.
	ANDNQ  CX, R13, CX
	ORQ    CX, AX
	JNZ    vregion
	BTQ    $63, BX
	JCS    vregion
	VDECODE(vdone)
	KNOTQ     K3, K6
	VSTORE
	POPCNTQ   BX, BX
	ADDQ      $64, R9
	SUBQ      BX, R9
	ADDQ      $64, R8
	JMP       vloop

vregion:
	TZCNTQ AX, R12
	TESTQ  R12, R12
	JZ     vdone
	LEAQ   -1(R12), R14
	BTQ    R14, BX
	SBBQ   $0, R12
	JZ     vdone
	MOVQ   $-1, R14
	BZHIQ  R12, R14, R14
	ANDQ   R14, BX
	LEAQ   (BX)(BX*1), R13
	VDECODE(vdone)
	ANDNQ     R14, BX, R14
	KMOVQ     R14, K6
	VSTORE
	POPCNTQ   R14, R14
	ADDQ      R12, R8
	ADDQ      R14, R9
	// Go on after a block taken whole or cut before a backslash; stop at anything else.
	CMPQ      R12, $64
	JEQ       vloop
	MOVBLZX   (SI)(R8*1), CX
	CMPL      CX, $0x5c
	JEQ       vloop

vdone:
	VZEROUPPER
	MOVQ R8, n+48(FP)
	MOVQ R9, m+56(FP)
	RET
