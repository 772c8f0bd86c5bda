# sbx-init: static PID 1 inside every sandbox (bind-mounted read-only from the
# host). Static and libc only: frame.c, chanauth.c, blake2b.c, clock.c and
# err.c are compiled in directly, and the sanitizers of --enable-asan are
# switched off again (they cannot link -static; -fno-sanitize=all comes after
# SBX_CFLAGS, so it wins).
#
# The libc is musl where configure found its gcc specs (musl-tools), else
# glibc. Under gVisor a static glibc program spends ~8 ms starting, a musl one
# ~1.6 ms (vfork+exec of each inside a sandbox, p50 of 200): glibc's start-up
# probes the CPU with ~43 CPUID instructions, each a trap into the sentry, and
# sbx-init's start is on every cold create's path.
pkglibexec_PROGRAMS = src/init/sbx-init
src_init_sbx_init_SOURCES = src/init/main.c src/init/conn.c src/init/proc.c src/init/spare.c \
	src/init/xfer.c src/init/attach.c src/init/file.c \
	src/init/init.h src/lib/frame.c src/lib/frame.h \
	src/lib/chanauth.c src/lib/chanauth.h src/lib/blake2b.c src/lib/blake2b.h src/lib/hex.h \
	src/lib/clock.c src/lib/clock.h src/lib/err.c src/lib/err.h
# (SBX_INIT_LIBC_CFLAGS, musl's -specs, goes in CFLAGS only: the link line
# repeats the target's CFLAGS, and gcc takes a specs file once)
src_init_sbx_init_CFLAGS = $(SBX_CFLAGS) -fno-sanitize=all $(SBX_INIT_LIBC_CFLAGS)
src_init_sbx_init_LDFLAGS = -static
src_init_sbx_init_LDADD =
