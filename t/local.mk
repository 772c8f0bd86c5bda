# Unit tests: small C programs printing TAP, run by automake's TAP driver
# (LOG_DRIVER in Makefile.am; the programs have no extension).
SBX_UNIT_TESTS = \
	t/unit/id_test \
	t/unit/auth_test \
	t/unit/json_test \
	t/unit/page_test \
	t/unit/settings_test \
	t/unit/router_test \
	t/unit/err_test \
	t/unit/errcode_test \
	t/unit/msg_test \
	t/unit/outbox_test \
	t/unit/sandbox_state_test \
	t/unit/frame_test \
	t/unit/chanauth_test \
	t/unit/blake2b_test \
	t/unit/usage_test \
	t/unit/stats_view_test \
	t/unit/egress_test \
	t/unit/dns_test \
	t/unit/idset_test \
	t/unit/nomad_job_test \
	t/unit/nomad_net_test \
	t/unit/docker_test \
	t/unit/runsc_ids_test \
	t/unit/cgwarm_test \
	t/unit/cron_test

check_PROGRAMS += $(SBX_UNIT_TESTS)
TESTS += $(SBX_UNIT_TESTS)
EXTRA_DIST += t/tap.h t/integration
# Each is built from t/unit/NAME.c (automake's default source) and linked
# with $(SBX_LIBS) (the LDADD default of Makefile.am).
# The Nomad driver's JSON lives in workers/ (no I/O there): compiled in.
t_unit_nomad_job_test_SOURCES = t/unit/nomad_job_test.c workers/nomad_job.c workers/nomad_job.h
t_unit_nomad_job_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
# The sbx CNI network's agent side (libsbxnode) and the plugin (run as
# ./workers/sbx-cni, built with the rest).
t_unit_nomad_net_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
t_unit_nomad_net_test_LDADD = $(SBX_NODE_LIBS)
# The Docker Engine API calls of the node agent (libsbxnode), against a fake
# dockerd on a unix socket.
t_unit_docker_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
t_unit_docker_test_LDADD = $(SBX_NODE_LIBS)
# the node's DNS wire format and its egress-resolved file (libsbxnode)
t_unit_dns_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
t_unit_dns_test_LDADD = $(SBX_NODE_LIBS)
# the orphan pass's set of ids (libsbxnode)
t_unit_idset_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
t_unit_idset_test_LDADD = $(SBX_NODE_LIBS)
# runsc's containers under the node's --root, read from its files (libsbxnode)
t_unit_runsc_ids_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
t_unit_runsc_ids_test_LDADD = $(SBX_NODE_LIBS)
# the start's cgroup warm-up thread (libsbxnode)
t_unit_cgwarm_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
t_unit_cgwarm_test_LDADD = $(SBX_NODE_LIBS)

# Run the unit tests under valgrind: a memory error or leak (exit 99) or a
# failing test fails the target.
valgrind-check: $(SBX_UNIT_TESTS)
	@fail=0; for t in $(SBX_UNIT_TESTS); do \
	  valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	    ./$$t >/dev/null 2>$$t.valgrind; rc=$$?; \
	  case $$rc in \
	  0) echo "PASS: $$t (valgrind clean)";; \
	  99) echo "FAIL: $$t: valgrind errors, see $$t.valgrind"; fail=1;; \
	  *) echo "FAIL: $$t: test failed (exit $$rc) under valgrind"; fail=1;; \
	  esac; \
	done; exit $$fail
.PHONY: valgrind-check
CLEANFILES += t/unit/*.valgrind

# The host-side client the integration tests (t/integration/sbxinit-*.t)
# drive sbx-init with (from t/init/initctl.c, as above).
check_PROGRAMS += t/init/initctl
