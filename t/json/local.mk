# jget: `jq -r PATH` for the integration tests' `j` without jq's start
# (t/json/jget.c; anything but a plain path is handed to jq). A noinst
# program so that a plain `make` (scripts/stack-up) builds it too.
noinst_PROGRAMS += t/json/jget
t_json_jget_SOURCES = t/json/jget.c
t_json_jget_LDADD = $(JANSSON_LIBS)
# It answers as jq does (a comparison with jq, which install-deps installs).
TESTS += t/json/jget_test
EXTRA_DIST += t/json/jget_test
