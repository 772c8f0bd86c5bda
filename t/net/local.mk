# Test driver for the network plumbing (t/integration/net-*.t); needs
# `include t/net/local.mk` in Makefile.am.
noinst_PROGRAMS += t/net/netctl
t_net_netctl_SOURCES = t/net/netctl.c
t_net_netctl_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/workers
t_net_netctl_LDADD = $(SBX_NODE_LIBS)
EXTRA_DIST += t/net/net-lib.sh
