# sbx-init: static PID 1 inside every sandbox (bind-mounted read-only from the
# host). Static, libc and libsodium (the channel handshake's MAC) only:
# frame.c, chanauth.c, clock.c and err.c are compiled in directly, and
# the sanitizers of --enable-asan are switched off again (they cannot link
# -static; -fno-sanitize=all comes after SBX_CFLAGS, so it wins).
pkglibexec_PROGRAMS = src/init/sbx-init
src_init_sbx_init_SOURCES = src/init/main.c src/init/conn.c src/init/proc.c src/init/spare.c \
	src/init/xfer.c src/init/attach.c src/init/file.c \
	src/init/init.h src/lib/frame.c src/lib/frame.h \
	src/lib/chanauth.c src/lib/chanauth.h src/lib/clock.c src/lib/clock.h \
	src/lib/err.c src/lib/err.h
src_init_sbx_init_CFLAGS = $(SBX_CFLAGS) -fno-sanitize=all
src_init_sbx_init_LDFLAGS = -static
src_init_sbx_init_LDADD = $(SODIUM_STATIC_LIBS)
