/* sbx-worker: the worker master. It reads the config, writes its pidfile
 * and pre-forks its roles under the supervisor of src/lib/daemon.c, which
 * keeps the signal contract (HUP reload, TERM drain, second TERM exits). */
#include "config.h"
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cleanup.h"
#include "daemon.h"
#include "log.h"
#include "roles.h"
#include "settings.h"

#define PROG "sbx-worker"

static const struct sbx_role worker_roles[] = {
	{ .name = "provisioner", .count_setting = "worker_provisioners", .run = provisioner_run },
	/* the node agent leaves its warm pool to its successor on a reload (pool.c) */
	{ .name = "node", .count_setting = "worker_nodes", .run = node_run, .hands_over = true },
	{ .name = "reaper", .count_setting = "worker_reapers", .run = reaper_run },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [-c CONF] [-d | -f]\n"
		"       " PROG " [-c CONF] --check-config\n"
		"       " PROG " --help-config | --help-config-md | --sample-config\n"
		"  -c CONF          config file (default " SBX_SYSCONFDIR "/sbx/sbx.conf)\n"
		"  -d               detach and run in the background\n"
		"  -f               stay in the foreground (default)\n"
		"  --check-config   load and check the config, print \"config ok\" or the error\n"
		"  --help-config    describe every setting sbx-worker reads\n"
		"  --help-config-md every setting of sbx (API and worker) as a Markdown table\n"
		"  --sample-config  print a config file with the defaults\n");
}

/* The master chdirs to / when it detaches and re-reads its config on
 * SIGHUP, so paths it keeps must not depend on the starting directory. */
static char *absolute(const char *path)
{
	char cwd[4096], *out;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (asprintf(&out, "%s/%s", cwd, path) < 0)
		return NULL;
	return out;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "check-config", no_argument, NULL, 'C' },
		{ "help-config", no_argument, NULL, 'H' },
		{ "help-config-md", no_argument, NULL, 'M' },
		{ "sample-config", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *conf = SBX_SYSCONFDIR "/sbx/sbx.conf";
	cleanup_free char *conf_abs = NULL, *pidfile = NULL;
	bool detach = false, check_only = false;
	sbx_config *cfg = NULL;
	sbx_err err = SBX_ERR_INIT;
	int c, status;

	while ((c = getopt_long(argc, argv, "c:dfh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': conf = optarg; break;
		case 'd': detach = true; break;
		case 'f': detach = false; break;
		case 'C': check_only = true; break;
		case 'H': sbx_config_print_help(stdout, SBX_FOR_WORKER); return 0;
		case 'M': sbx_config_print_markdown(stdout); return 0;
		case 'S': sbx_config_print_sample(stdout, SBX_FOR_WORKER); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}

	if (sbx_config_load(conf, &cfg, &err) < 0 || sbx_config_check(cfg, SBX_FOR_WORKER, &err) < 0) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		sbx_config_free(cfg);
		return 1;
	}
	if (check_only) {
		printf("config ok\n");
		sbx_config_free(cfg);
		return 0;
	}
	conf_abs = absolute(conf);
	pidfile = absolute(sbx_cfg_str(cfg, "worker_pidfile"));
	if (!conf_abs || !pidfile) {
		fprintf(stderr, PROG ": %s\n", strerror(errno));
		return 1;
	}
	if (sodium_init() < 0) {
		fprintf(stderr, PROG ": sodium_init failed\n");
		return 1;
	}
	if (sbx_log_init(PROG, sbx_cfg_str(cfg, "log_file"), sbx_cfg_str(cfg, "log_level")) < 0) {
		fprintf(stderr, PROG ": cannot open log file %s\n", sbx_cfg_str(cfg, "log_file"));
		return 1;
	}
	if (detach) {
		/* Refuse here too, while the caller can still see the answer; the
		 * exclusive create below is the check that counts. */
		long pid = sbx_pidfile_read(pidfile);
		if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) {
			fprintf(stderr, PROG ": already running (pid %ld, %s)\n", pid, pidfile);
			return 1;
		}
		if (sbx_daemonize(&err) < 0) {
			fprintf(stderr, PROG ": %s\n", err.msg);
			return 1;
		}
	}
	if (sbx_pidfile_create(pidfile, &err) < 0) {
		if (!detach)
			fprintf(stderr, PROG ": %s\n", err.msg);
		log_warnx("%s", err.msg);
		sbx_config_free(cfg);
		return 1;
	}
	log_info("starting (config %s, pid %d)", conf_abs, (int)getpid());
	status = sbx_super_run(&(struct sbx_super){ .prog = PROG,
						    .config_path = conf_abs,
						    .who = SBX_FOR_WORKER,
						    .roles = worker_roles,
						    .nroles = (int)SBX_ARRAY_LEN(worker_roles) },
			       cfg);
	sbx_pidfile_remove(pidfile);
	log_info("exiting with status %d", status);
	return status;
}
