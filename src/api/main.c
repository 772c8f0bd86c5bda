/* sbx-api: a master that opens the FastCGI socket and pre-forks children;
 * each child keeps its own Postgres and RabbitMQ connections and serves one
 * request at a time. The master's signal contract is in daemon.h. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "api.h"
#include "cleanup.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"

static int listen_fd = -1;

static int open_socket(const sbx_config *cfg, sbx_err *err)
{
	const char *path = sbx_cfg_str(cfg, "api_socket");
	const char *group = sbx_cfg_str(cfg, "api_socket_group");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (path[0] != '/') {
		/* HOST:PORT: libfcgi binds it */
		fd = FCGX_OpenSocket(path, 1024);
		if (fd < 0)
			return sbx_err_set(err, 0, "socket", "cannot listen on %s", path);
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		return fd;
	}
	if (strlen(path) >= sizeof(sa.sun_path))
		return sbx_err_set(err, 0, "socket", "api_socket path is too long");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return sbx_err_sys(err, "socket", "socket");
	/* the pidfile already proved no other sbx-api owns it: a leftover is stale */
	if (unlink(path) < 0 && errno != ENOENT) {
		close(fd);
		return sbx_err_sys(err, "socket", "unlink %s", path);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return sbx_err_sys(err, "socket", "bind %s", path);
	}
	if (group[0]) {
		struct group *g = getgrnam(group);
		if (!g) {
			close(fd);
			return sbx_err_set(err, 0, "socket", "api_socket_group: no group '%s'", group);
		}
		if (chown(path, (uid_t)-1, g->gr_gid) < 0 || chmod(path, 0660) < 0) {
			close(fd);
			return sbx_err_sys(err, "socket", "chown/chmod %s", path);
		}
	} else if (chmod(path, 0600) < 0) {
		close(fd);
		return sbx_err_sys(err, "socket", "chmod %s", path);
	}
	if (listen(fd, 1024) < 0) {
		close(fd);
		return sbx_err_sys(err, "socket", "listen %s", path);
	}
	return fd;
}

static int child_run(const sbx_config *cfg, int index, void *unused)
{
	struct api_ctx ctx = { .cfg = cfg };
	sbx_err err = SBX_ERR_INIT;
	FCGX_Request req;
	unsigned warmed = 0;

	if (sbx_auth_init(&ctx.auth, sbx_cfg_str(cfg, "auth_secret"), &err) < 0)
		fatalx("%s", err.msg);
	/* neither being down is fatal: requests answer 503 and we reconnect */
	if (sbx_db_open(&ctx.db, sbx_cfg_str(cfg, "db_url"), &err) < 0)
		log_warnx("%s (will retry per request)", err.msg);
	if (sbx_mq_open(&ctx.mq, sbx_cfg_str(cfg, "amqp_url"), &err) < 0)
		log_warnx("%s (will retry per request)", err.msg);
	if (FCGX_Init() != 0)
		fatalx("FCGX_Init failed");
	if (FCGX_InitRequest(&req, listen_fd, FCGI_FAIL_ACCEPT_ON_INTR) != 0)
		fatalx("FCGX_InitRequest failed");
	log_debug("child %d ready", index);
	while (!sbx_child_stop) {
		/* a new Postgres session (the first, or one opened during the last
		 * request: Postgres came back) is warmed before the next request,
		 * not on its time */
		if (ctx.db.sessions != warmed) {
			api_db_warm(&ctx);
			warmed = ctx.db.sessions;
		}
		/* a child keeps its turn from one short request to the next
		 * (it stays hot); it waits for one again after a long request */
		if (api_turn_take() < 0)
			continue;
		/* a turn given back by an exiting child can wake us after the
		 * SIGTERM that told us to exit too: accept would then block */
		if (sbx_child_stop)
			break;
		if (FCGX_Accept_r(&req) < 0) {
			if (sbx_child_stop)
				break;
			if (errno == EINTR)
				continue;
			log_warn("accept");
			continue;
		}
		api_handle(&ctx, &req);
		FCGX_Finish_r(&req);
	}
	FCGX_Free(&req, 1);
	sbx_db_close(&ctx.db);
	sbx_mq_close(ctx.mq);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sbx-api [-c CONF] [-d] [-f] [--check-config] [--help-config] [--sample-config]\n");
}

int main(int argc, char **argv)
{
	const char *conf = getenv("SBX_CONF");
	int daemonize = 0, check = 0, c;
	sbx_config *cfg = NULL;
	sbx_err err = SBX_ERR_INIT;
	const char *pidfile;
	int rc;
	static const struct sbx_role roles[] = {
		{ .name = "child", .count_setting = "api_children", .run = child_run },
	};
	struct sbx_super sup = { .prog = "sbx-api", .who = SBX_FOR_API, .roles = roles, .nroles = 1 };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' }, { "check-config", no_argument, NULL, 'C' },
		{ "help-config", no_argument, NULL, 'H' }, { "sample-config", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};

	while ((c = getopt_long(argc, argv, "c:dfh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': conf = optarg; break;
		case 'd': daemonize = 1; break;
		case 'f': daemonize = 0; break;
		case 'C': check = 1; break;
		case 'H': sbx_config_print_help(stdout, SBX_FOR_API); return 0;
		case 'S': sbx_config_print_sample(stdout, SBX_FOR_API); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!conf)
		conf = SBX_SYSCONFDIR "/sbx/sbx.conf";
	if (sbx_config_load(conf, &cfg, &err) < 0 || sbx_config_check(cfg, SBX_FOR_API, &err) < 0) {
		fprintf(stderr, "sbx-api: %s\n", err.msg);
		return 1;
	}
	if (check) {
		printf("config ok\n");
		sbx_config_free(cfg);
		return 0;
	}
	if (sodium_init() < 0) {
		fprintf(stderr, "sbx-api: libsodium failed to initialise\n");
		return 1;
	}
	if (sbx_log_init("sbx-api", sbx_cfg_str(cfg, "log_file"), sbx_cfg_str(cfg, "log_level")) < 0) {
		fprintf(stderr, "sbx-api: cannot open log file %s\n", sbx_cfg_str(cfg, "log_file"));
		return 1;
	}
	pidfile = sbx_cfg_str(cfg, "api_pidfile");
	/* refuse early, before touching a socket a running instance owns */
	{
		long pid = sbx_pidfile_read(pidfile);
		if (pid > 0 && kill((pid_t)pid, 0) == 0) {
			fprintf(stderr, "sbx-api: already running (pid %ld, %s)\n", pid, pidfile);
			return 1;
		}
	}
	if (daemonize && sbx_daemonize(&err) < 0)
		fatalx("%s", err.msg);
	if (sbx_pidfile_create(pidfile, &err) < 0) {
		log_error("%s", err.msg);
		if (!daemonize)
			fprintf(stderr, "sbx-api: %s\n", err.msg);
		return 1;
	}
	listen_fd = open_socket(cfg, &err);
	if (listen_fd < 0) {
		log_error("%s", err.msg);
		if (!daemonize)
			fprintf(stderr, "sbx-api: %s\n", err.msg);
		sbx_pidfile_remove(pidfile);
		return 1;
	}
	if (api_metrics_init(&err) < 0)
		log_warnx("%s (/metrics will show no request counts)", err.msg);
	if (api_rate_init(&err) < 0)
		log_warnx("%s (no requests-per-second limit per key)", err.msg);
	{
		long long n = sbx_cfg_int(cfg, "api_short_requests");
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		if (n == 0)
			n = 4 * (cpus > 0 ? cpus : 1);
		if (n >= sbx_cfg_int(cfg, "api_children"))
			n = 0; /* no fewer turns than children: nothing to share */
		else if (api_turns_new((int)n, &err) < 0) {
			log_warnx("%s: every child serves short requests at once", err.msg);
			n = 0;
		}
		log_info("listening on %s with %lld children, %lld of them on short requests at once",
			 sbx_cfg_str(cfg, "api_socket"), sbx_cfg_int(cfg, "api_children"),
			 n ? n : sbx_cfg_int(cfg, "api_children"));
	}
	sup.config_path = conf;
	{
		/* the pidfile and socket names are not reloadable: keep our own copies */
		cleanup_free char *pf = strdup(pidfile);
		cleanup_free char *sock = strdup(sbx_cfg_str(cfg, "api_socket"));
		rc = sbx_super_run(&sup, cfg);
		api_turns_free();
		if (sock && sock[0] == '/')
			unlink(sock);
		if (pf)
			sbx_pidfile_remove(pf);
	}
	log_info("exiting");
	return rc;
}
