sbin_PROGRAMS += src/api/sbx-api
src_api_sbx_api_SOURCES = src/api/api.h src/api/main.c src/api/http.c src/api/h_meta.c \
	src/api/h_sandboxes.c src/api/bodies.c src/api/bodies.h src/api/runtime.c src/api/runtime.h \
	src/api/h_volumes.c src/api/volumes.h src/api/h_pause.c src/api/h_snapshots.c \
	src/api/h_exec.c src/api/h_files.c src/api/h_procs.c src/api/limits.c src/api/ratelimit.c src/api/auth_cache.c src/api/turns.c \
	src/api/warm.c src/api/sql.h \
	src/api/h_egress.c src/api/h_stats.c \
	src/api/metrics.c src/api/metrics.h
src_api_sbx_api_LDADD = $(SBX_LIBS) $(FCGI_LIBS)
