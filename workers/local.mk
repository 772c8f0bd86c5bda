# sbx-worker: the worker master and one file per role.
sbin_PROGRAMS += workers/sbx-worker
workers_sbx_worker_SOURCES = workers/main.c workers/roles.h workers/common.c workers/provisioner.c \
	workers/driver.h workers/driver_local.c \
	workers/node.c workers/reaper.c
workers_sbx_worker_SOURCES += workers/net.c workers/net.h
workers_sbx_worker_SOURCES += workers/sandbox.c workers/sandbox.h
workers_sbx_worker_SOURCES += workers/relay.c workers/relay.h workers/relay_int.h workers/chan.c
workers_sbx_worker_LDADD = $(SBX_LIBS)

# Test helper: one ping through RabbitMQ (t/integration/worker-master.t).
noinst_PROGRAMS += workers/sbx-worker-ping
workers_sbx_worker_ping_SOURCES = workers/sbx-worker-ping.c
workers_sbx_worker_ping_LDADD = $(SBX_LIBS)
