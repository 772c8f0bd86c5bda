# Test driver for the node agent's runtime relay (t/integration/relay-*.t):
# speaks the AMQP contract of doc/internal-protocol.md like the API does.
# Needs `include t/relay/local.mk` in Makefile.am.
noinst_PROGRAMS += t/relay/relayctl
t_relay_relayctl_SOURCES = t/relay/relayctl.c
t_relay_relayctl_LDADD = $(SBX_LIBS)
