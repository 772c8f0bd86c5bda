# Test driver for the sandbox lifecycle on a node (t/integration/sandbox-*.t);
# needs `include t/sandbox/local.mk` in Makefile.am.
noinst_PROGRAMS += t/sandbox/sandboxctl
t_sandbox_sandboxctl_SOURCES = t/sandbox/sandboxctl.c
t_sandbox_sandboxctl_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
t_sandbox_sandboxctl_LDADD = $(SBX_NODE_LIBS)
