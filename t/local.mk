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
	t/unit/sandbox_state_test \
	t/unit/frame_test \
	t/unit/chanauth_test

check_PROGRAMS += $(SBX_UNIT_TESTS)
TESTS += $(SBX_UNIT_TESTS)
EXTRA_DIST += t/tap.h t/integration

t_unit_id_test_SOURCES = t/unit/id_test.c t/tap.h
t_unit_id_test_LDADD = $(SBX_LIBS)
t_unit_auth_test_SOURCES = t/unit/auth_test.c t/tap.h
t_unit_auth_test_LDADD = $(SBX_LIBS)
t_unit_json_test_SOURCES = t/unit/json_test.c t/tap.h
t_unit_json_test_LDADD = $(SBX_LIBS)
t_unit_page_test_SOURCES = t/unit/page_test.c t/tap.h
t_unit_page_test_LDADD = $(SBX_LIBS)
t_unit_settings_test_SOURCES = t/unit/settings_test.c t/tap.h
t_unit_settings_test_LDADD = $(SBX_LIBS)
t_unit_router_test_SOURCES = t/unit/router_test.c t/tap.h
t_unit_router_test_LDADD = $(SBX_LIBS)
t_unit_err_test_SOURCES = t/unit/err_test.c t/tap.h
t_unit_err_test_LDADD = $(SBX_LIBS)
t_unit_errcode_test_SOURCES = t/unit/errcode_test.c t/tap.h
t_unit_errcode_test_LDADD = $(SBX_LIBS)
t_unit_msg_test_SOURCES = t/unit/msg_test.c t/tap.h
t_unit_msg_test_LDADD = $(SBX_LIBS)
t_unit_sandbox_state_test_SOURCES = t/unit/sandbox_state_test.c t/tap.h
t_unit_sandbox_state_test_LDADD = $(SBX_LIBS)

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

# sbx-init's channel: the frame codec's unit test, and the host-side client
# the integration tests (t/integration/sbxinit-*.t) drive sbx-init with.
t_unit_frame_test_SOURCES = t/unit/frame_test.c t/tap.h
t_unit_frame_test_LDADD = $(SBX_LIBS)
t_unit_chanauth_test_SOURCES = t/unit/chanauth_test.c t/tap.h
t_unit_chanauth_test_LDADD = $(SBX_LIBS)
check_PROGRAMS += t/init/initctl
t_init_initctl_SOURCES = t/init/initctl.c
t_init_initctl_LDADD = $(SBX_LIBS)
