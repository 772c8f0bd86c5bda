# libFuzzer targets, built only with ./configure --enable-fuzzing CC=clang
# (scripts/fuzz-smoke does that in build-fuzz/). The libsbx sources a target
# exercises are compiled into it with $(FUZZ_FLAGS), so the parsers themselves
# carry coverage and ASan/UBSan instrumentation; $(SBX_LIBS) resolves the rest.
EXTRA_DIST += fuzz/corpus fuzz/router.dict fuzz/json.dict
if FUZZING
FUZZ_TARGETS = fuzz/fuzz_json_body fuzz/fuzz_router fuzz/fuzz_query fuzz/fuzz_config fuzz/fuzz_frame \
	fuzz/fuzz_egress fuzz/fuzz_nomad fuzz/fuzz_cron fuzz/fuzz_cni fuzz/fuzz_chanhs fuzz/fuzz_docker \
	fuzz/fuzz_json_escape
noinst_PROGRAMS += $(FUZZ_TARGETS)

# the API's own body tables (src/api/bodies.c), so it checks exactly the API's rules
fuzz_fuzz_json_body_SOURCES = fuzz/fuzz_json_body.c src/api/bodies.c src/lib/json.c src/lib/err.c
fuzz_fuzz_json_body_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/api
fuzz_fuzz_json_body_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_json_body_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_json_body_LDADD = $(SBX_LIBS)

fuzz_fuzz_router_SOURCES = fuzz/fuzz_router.c src/lib/router.c src/lib/page.c src/lib/id.c \
	src/lib/err.c
fuzz_fuzz_router_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_router_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_router_LDADD = $(SBX_LIBS)

fuzz_fuzz_query_SOURCES = fuzz/fuzz_query.c src/lib/page.c src/lib/err.c
fuzz_fuzz_query_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_query_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_query_LDADD = $(SBX_LIBS)

fuzz_fuzz_config_SOURCES = fuzz/fuzz_config.c src/lib/settings.c src/lib/log.c src/lib/err.c
fuzz_fuzz_config_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_config_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_config_LDADD = $(SBX_LIBS)

# the JSON text of a sandbox's streamed output, against jansson
fuzz_fuzz_json_escape_SOURCES = fuzz/fuzz_json_escape.c src/lib/json.c src/lib/err.c
fuzz_fuzz_json_escape_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_json_escape_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_json_escape_LDADD = $(SBX_LIBS)

fuzz_fuzz_frame_SOURCES = fuzz/fuzz_frame.c src/lib/frame.c src/lib/err.c
fuzz_fuzz_frame_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_frame_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_frame_LDADD = $(SBX_LIBS)

# egress allow entries (API bodies) and DNS queries from sandboxes (the forwarder)
fuzz_fuzz_egress_SOURCES = fuzz/fuzz_egress.c src/lib/egress_policy.c workers/dns.c src/lib/err.c src/lib/clock.c
fuzz_fuzz_egress_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
fuzz_fuzz_egress_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_egress_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_egress_LDADD = $(SBX_LIBS)

# Nomad's answers to the Nomad driver (workers/nomad_job.c)
fuzz_fuzz_nomad_SOURCES = fuzz/fuzz_nomad.c workers/nomad_job.c src/lib/err.c src/lib/id.c
fuzz_fuzz_nomad_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
fuzz_fuzz_nomad_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_nomad_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_nomad_LDADD = $(SBX_LIBS)

# sbx's CNI plugin and the node agent's side of it (workers/cni.c)
fuzz_fuzz_cni_SOURCES = fuzz/fuzz_cni.c workers/cni.c
fuzz_fuzz_cni_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
fuzz_fuzz_cni_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_cni_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_cni_LDADD = $(SBX_LIBS)

# the Docker daemon's answers and /proc/PID/cgroup to the node agent (workers/docker_answer.c)
fuzz_fuzz_docker_SOURCES = fuzz/fuzz_docker.c workers/docker_answer.c src/lib/err.c
fuzz_fuzz_docker_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
fuzz_fuzz_docker_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_docker_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_docker_LDADD = $(SBX_LIBS)

# snapshotFrequency (API bodies, the node's schedule)
fuzz_fuzz_cron_SOURCES = fuzz/fuzz_cron.c src/lib/cron.c src/lib/err.c
fuzz_fuzz_cron_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_cron_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_cron_LDADD = $(SBX_LIBS)

# the host's side of the channel handshake, step by step (src/lib/chanauth.c)
fuzz_fuzz_chanhs_SOURCES = fuzz/fuzz_chanhs.c src/lib/chanauth.c src/lib/frame.c src/lib/clock.c src/lib/err.c
fuzz_fuzz_chanhs_CFLAGS = $(AM_CFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_chanhs_LDFLAGS = $(AM_LDFLAGS) $(FUZZ_FLAGS)
fuzz_fuzz_chanhs_LDADD = $(SBX_LIBS)

# Build just the fuzzers (not the daemons): make fuzz-targets
fuzz-targets: $(FUZZ_TARGETS)
else
fuzz-targets:
	@echo "fuzz-targets: configure with --enable-fuzzing CC=clang" >&2; exit 1
endif
.PHONY: fuzz-targets
