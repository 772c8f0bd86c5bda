noinst_LIBRARIES += src/lib/libsbx.a
src_lib_libsbx_a_SOURCES = \
	src/lib/cleanup.h \
	src/lib/clock.c src/lib/clock.h \
	src/lib/fdio.c src/lib/fdio.h \
	src/lib/curlbody.c src/lib/curlbody.h \
	src/lib/err.c src/lib/err.h \
	src/lib/errcode.c src/lib/errcode.h \
	src/lib/log.c src/lib/log.h \
	src/lib/settings.c src/lib/settings.h src/lib/usage.c src/lib/usage.h \
	src/lib/id.c src/lib/id.h \
	src/lib/auth.c src/lib/auth.h \
	src/lib/json.c src/lib/json.h \
	src/lib/page.c src/lib/page.h \
	src/lib/cron.c src/lib/cron.h \
	src/lib/db.c src/lib/db.h \
	src/lib/sandbox_state.c src/lib/sandbox_state.h \
	src/lib/mq.c src/lib/mq.h \
	src/lib/outbox.c src/lib/outbox.h \
	src/lib/msg.c src/lib/msg.h \
	src/lib/reply.c src/lib/reply.h src/lib/stats_view.c src/lib/stats_view.h \
	src/lib/daemon.c src/lib/daemon.h \
	src/lib/router.c src/lib/router.h \
	src/lib/frame.c src/lib/frame.h \
	src/lib/chanauth.c src/lib/chanauth.h src/lib/blake2b.c src/lib/blake2b.h src/lib/hex.h src/lib/hash.h \
	src/lib/egress_policy.c src/lib/egress_policy.h
