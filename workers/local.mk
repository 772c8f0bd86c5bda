# The node side as one library (the sandbox on a node, its network): sbx-worker
# and the test drivers (t/sandbox, t/net) link it rather than compile it again.
noinst_LIBRARIES += workers/libsbxnode.a
workers_libsbxnode_a_SOURCES = \
	workers/host.c workers/host.h \
	workers/net.c workers/net_run.c workers/net_link.c workers/net_node.c workers/net.h workers/net_int.h workers/net_list.c \
	workers/egress.c workers/egress.h \
	workers/dns.c workers/dns.h \
	workers/disk.c workers/disk.h \
	workers/runsc.c workers/runsc.h workers/cgwarm.c workers/cgwarm.h \
	workers/oci.c workers/oci.h \
	workers/volume.c workers/volume.h \
	workers/pause.c workers/snapshot.c \
	workers/sandbox.c workers/sandbox.h workers/adopt.c workers/docker.c workers/docker.h workers/docker_answer.c workers/docker_answer.h workers/nomad_net.c workers/nomad_net.h workers/nomad_vol.c workers/nomad_vol.h workers/cni.c workers/cni.h \
	workers/freezer.c workers/freezer.h \
	workers/stats.c workers/stats.h
SBX_NODE_LIBS = $(top_builddir)/workers/libsbxnode.a $(SBX_LIBS) $(NFTABLES_LIBS)

# sbx-worker: the worker master and one file per role.
sbin_PROGRAMS += workers/sbx-worker
workers_sbx_worker_SOURCES = workers/main.c workers/roles.h workers/common.c workers/provisioner.c \
	workers/driver.h workers/driver_local.c workers/driver_nomad.c workers/nomad_job.c workers/nomad_job.h \
	workers/node.c workers/node_int.h workers/node_op.c workers/node_start.c workers/node_health.c workers/node_volume.c workers/node_pause.c workers/node_snapshot.c workers/node_disk.c \
	workers/pool.c workers/reaper.c \
	workers/egress_node.c workers/egress_node.h workers/egress_node_int.h workers/egress_fwd.c \
	workers/idle.c workers/idle.h workers/execlog.c workers/execlog.h workers/node_stats.c
workers_sbx_worker_SOURCES += workers/relay.c workers/relay.h workers/relay_int.h workers/relay_req.c workers/chan.c
workers_sbx_worker_LDADD = $(SBX_NODE_LIBS)

# The sbx CNI plugin (doc/nomad.md): Nomad's client runs it from its
# cni_path as the type "sbx-cni" of the sbx network; it asks this node's
# agent to wire the allocation's network namespace.
pkglibexec_PROGRAMS += workers/sbx-cni
workers_sbx_cni_SOURCES = workers/sbx-cni.c workers/cni.c workers/cni.h
workers_sbx_cni_LDADD = $(JANSSON_LIBS)

# Test helper: one ping through RabbitMQ (t/integration/worker-master.t).
noinst_PROGRAMS += workers/sbx-worker-ping
workers_sbx_worker_ping_SOURCES = workers/sbx-worker-ping.c
workers_sbx_worker_ping_LDADD = $(SBX_LIBS)

# The registry side of a snapshot (pack, push, pull), a script run by the
# node agent's snapshot process: copied into the build tree beside
# sbx-worker (which looks there first, then in libexec) and installed with
# sbx-init.
pkglibexec_SCRIPTS = workers/sbx-snapshot
EXTRA_DIST += workers/sbx-snapshot.sh
CLEANFILES += workers/sbx-snapshot
workers/sbx-snapshot: $(srcdir)/workers/sbx-snapshot.sh
	@mkdir -p workers
	cp $(srcdir)/workers/sbx-snapshot.sh $@ && chmod 0755 $@
