/* Test driver for workers/sandbox.c (t/integration/sandbox-*.t).
 *
 *   sandboxctl [options] start ID [--memory MB] [--disk GB] [--cpu MHZ]
 *                                 [--template NAME] [--env K=V]...
 *   sandboxctl [options] destroy ID
 *   sandboxctl [options] alive ID        prints "alive" or "dead: WHY"; exit 0/1/2
 *   sandboxctl [options] oom ID          OOM kills in its memory cgroup
 *   sandboxctl [options] list            one id a line
 *   sandboxctl [options] net-setup       net_node_setup (bridge and nft table)
 *   sandboxctl [options] exec ID -- CMD...   (runsc exec; stdio passed through)
 *   sandboxctl [options] cycle N [start options]
 *       starts and destroys N sandboxes one after the other in this process
 *       (a child subreaper that reaps, like the node agent) and prints
 *       "start_ms destroy_ms" per sandbox
 *   sandboxctl [options] hold ID [start options]
 *       start, print "started", then stay (reaping) until SIGTERM/stdin EOF,
 *       then destroy: a sandbox whose sentry has a live, reaping parent
 *
 * options: --state DIR (required) --runsc PATH --platform P --init PATH
 *          --uplink NETNS --bridge BR --subnet CIDR --nproc N --pids N
 *          --timeout MS
 * Errors go to stderr once; exit status 1. */
#include "config.h"
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "fdio.h"
#include "err.h"
#include "clock.h"
#include "frame.h"
#include "log.h"
#include "net.h"
#include "sandbox.h"

static struct net_config net = { "sbx0", "10.213.0.0/16", "", NULL, NULL };
static struct sandbox_node_cfg cfg = { NULL, "/usr/bin/runsc", "systrap", "", 2048, 16384, false, &net, 0, false, NULL, NULL, NULL, NULL };

static int usage(void)
{
	fprintf(stderr, "usage: sandboxctl --state DIR [--runsc P] [--platform P] [--init P] [--uplink NS]\n"
			"         [--bridge BR] [--subnet CIDR] [--nproc N] [--pids N] [--timeout MS]\n"
			"         start ID [--memory MB] [--disk GB] [--cpu MHZ] [--template T] [--env K=V]...\n"
			"       | destroy ID | alive ID | list | exec ID -- CMD... | cycle N [...] | hold ID [...]\n");
	return 2;
}

static void reap(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* start options after the id: fills spec; env is a static array. */
static int spec_args(int argc, char **argv, struct sandbox_spec *s)
{
	static const char *env[65];
	int ne = 0;

	s->template = "debian-12";
	s->cpu = 1000;
	s->memory_mb = 512;
	s->disk_gb = 1;
	s->env = env;
	for (int i = 0; i < argc; i++) {
		if (i + 1 >= argc)
			return -1;
		if (!strcmp(argv[i], "--memory"))
			s->memory_mb = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--disk"))
			s->disk_gb = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--cpu"))
			s->cpu = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--template"))
			s->template = argv[++i];
		else if (!strcmp(argv[i], "--env") && ne < 64)
			env[ne++] = argv[++i];
		else
			return -1;
	}
	env[ne] = NULL;
	return 0;
}

/* A fresh id: random hex, so the first 9 characters (the veth's name, net.h)
 * differ between sandboxes that live at the same time. */
static void random_id(char out[SBX_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[SBX_ID_LEN];
	FILE *f = fopen("/dev/urandom", "re");

	if (!f || fread(r, 1, sizeof(r), f) != sizeof(r))
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)rand();
	if (f)
		fclose(f);
	for (size_t i = 0; i < SBX_ID_LEN; i++)
		out[i] = hex[r[i] & 15];
	out[SBX_ID_LEN] = 0;
}


static int send_frame(int fd, uint8_t type, uint32_t stream, const void *payload, uint32_t len)
{
	uint8_t h[SBX_FRAME_HDR];
	sbx_frame_header(h, type, stream, len);
	return sbx_write_all(fd, h, sizeof(h)) < 0 || sbx_write_all(fd, payload, len) < 0 ? -1 : 0;
}

/* One command through sbx-init's channel: output to our stdout/stderr; the
 * exit status is the command's (128 + signal when killed). */
static int chan_exec(const char *id, char **cmd, int timeout_ms, sbx_err *err)
{
	static uint8_t buf[SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD];
	struct sbx_exec_req req = { 0 };
	uint8_t *payload;
	size_t plen, got = 0;
	int fd, argc = 0;

	while (cmd[argc])
		argc++;
	if (sandbox_connect(&cfg, id, 5000, &fd, err) < 0)
		return -1;
	req.timeout_ms = (uint32_t)timeout_ms;
	req.credit = 1u << 30;
	req.cwd = "/";
	req.argc = argc;
	req.argv = (const char **)cmd;
	req.envc = 0;
	{
		static const char *noenv[] = { NULL };
		req.envp = noenv;
	}
	if (sbx_exec_encode(&req, &payload, &plen, err) < 0)
		return -1;
	if (send_frame(fd, SBX_F_EXEC, 1, payload, (uint32_t)plen) < 0) {
		free(payload);
		return sbx_err_sys(err, "exec", "send EXEC");
	}
	free(payload);
	for (;;) {
		struct sbx_frame f;
		long n = sbx_frame_parse(buf, got, 1, &f, err);
		if (n < 0)
			return -1;
		if (n == 0) {
			ssize_t r = read(fd, buf + got, sizeof(buf) - got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return sbx_err_set(err, 500, "exec", "channel closed before EXIT");
			got += (size_t)r;
			continue;
		}
		if (f.type == SBX_F_STDOUT || f.type == SBX_F_STDERR) {
			uint8_t c[4] = { (uint8_t)(f.len >> 24), (uint8_t)(f.len >> 16), (uint8_t)(f.len >> 8),
					 (uint8_t)f.len };
			sbx_write_all(f.type == SBX_F_STDOUT ? 1 : 2, f.payload, f.len);
			send_frame(fd, SBX_F_CREDIT, f.stream, c, 4);
		} else if (f.type == SBX_F_ERROR) {
			return sbx_err_set(err, 500, "exec", "sbx-init: %.*s", (int)f.len, (const char *)f.payload);
		} else if (f.type == SBX_F_EXIT) {
			struct sbx_exit_info x;
			if (sbx_frame_decode_exit(&f, &x, err) < 0)
				return -1;
			close(fd);
			return x.signal ? 128 + (int)x.signal : x.code;
		}
		memmove(buf, buf + n, got - (size_t)n);
		got -= (size_t)n;
	}
}

static volatile sig_atomic_t stop;
static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state", required_argument, NULL, 's' }, { "runsc", required_argument, NULL, 'r' },
		{ "platform", required_argument, NULL, 'p' }, { "init", required_argument, NULL, 'i' },
		{ "uplink", required_argument, NULL, 'u' }, { "bridge", required_argument, NULL, 'b' },
		{ "subnet", required_argument, NULL, 'n' }, { "nproc", required_argument, NULL, 'N' },
		{ "pids", required_argument, NULL, 'P' }, { "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 }
	};
	sbx_err err = SBX_ERR_INIT;
	struct sandbox_spec s;
	int opt, rc = -1;
	const char *cmd;

	while ((opt = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (opt) {
		case 's': cfg.state_dir = optarg; break;
		case 'r': cfg.runsc = optarg; break;
		case 'p': cfg.platform = optarg; break;
		case 'i': cfg.init_path = optarg; break;
		case 'u': net.uplink_netns = optarg; break;
		case 'b': net.bridge = optarg; break;
		case 'n': net.subnet = optarg; break;
		case 'N': cfg.nproc_limit = atoi(optarg); break;
		case 'P': cfg.pids_max = atoi(optarg); break;
		case 't': cfg.start_timeout_ms = atoi(optarg); break;
		default: return usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1 || !cfg.state_dir)
		return usage();
	sbx_log_init("sandboxctl", NULL, "info");
	srand((unsigned)(time(NULL) ^ getpid()));
	memset(&s, 0, sizeof(s));
	cmd = argv[0];
	if (!strcmp(cmd, "start") && argc >= 2) {
		snprintf(s.id, sizeof(s.id), "%s", argv[1]);
		if (spec_args(argc - 2, argv + 2, &s) < 0)
			return usage();
		rc = sandbox_start(&cfg, &s, &err);
	} else if (!strcmp(cmd, "hold") && argc >= 2) {
		struct sigaction sa = { .sa_handler = on_term };
		snprintf(s.id, sizeof(s.id), "%s", argv[1]);
		if (spec_args(argc - 2, argv + 2, &s) < 0)
			return usage();
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
		rc = sandbox_start(&cfg, &s, &err);
		if (rc == 0) {
			printf("started\n");
			fflush(stdout);
			while (!stop) {
				struct pollfd p = { 0, POLLIN, 0 };
				char b[64];
				reap();
				if (poll(&p, 1, 200) > 0 && read(0, b, sizeof(b)) <= 0)
					break;
			}
			rc = sandbox_destroy(&cfg, s.id, &err);
		}
	} else if (!strcmp(cmd, "net-setup") && argc == 1) {
		rc = net_node_setup(&net, &err);
	} else if (!strcmp(cmd, "destroy") && argc == 2) {
		rc = sandbox_destroy(&cfg, argv[1], &err);
	} else if (!strcmp(cmd, "alive") && argc == 2) {
		char why[256];
		int a = sandbox_alive(&cfg, argv[1], why, sizeof(why));
		if (a == 1)
			printf("alive\n");
		else
			printf("%s: %s\n", a == 0 ? "dead" : "unknown", why);
		return a == 1 ? 0 : a == 0 ? 1 : 2;
	} else if (!strcmp(cmd, "oom") && argc == 2) {
		printf("%ld\n", sandbox_oom_kills(argv[1]));
		return 0;
	} else if (!strcmp(cmd, "list") && argc == 1) {
		char **ids;
		size_t n;
		rc = sandbox_list(&cfg, true, &ids, &n, &err);
		if (rc == 0) {
			for (size_t i = 0; i < n; i++)
				printf("%s\n", ids[i]);
			sandbox_list_free(ids, n);
		}
	} else if (!strcmp(cmd, "exec") && argc >= 4 && !strcmp(argv[2], "--")) {
		/* through sbx-init when there is one; runsc exec otherwise */
		struct sandbox_paths p;
		char rootflag[600];
		const char *av[4096];
		int n = 0;
		if (cfg.init_path && *cfg.init_path) {
			int x = chan_exec(argv[1], argv + 3, 0, &err);
			if (x < 0) {
				fprintf(stderr, "sandboxctl: %s\n", err.msg);
				return 125;
			}
			return x;
		}
		sandbox_paths(&cfg, argv[1], &p);
		snprintf(rootflag, sizeof(rootflag), "--root=%s", p.runsc_root);
		av[n++] = cfg.runsc;
		av[n++] = rootflag;
		av[n++] = "exec";
		av[n++] = argv[1];
		for (int i = 3; i < argc && n < 4094; i++)
			av[n++] = argv[i];
		av[n] = NULL;
		execv(cfg.runsc, (char *const *)av);
		perror("sandboxctl: exec runsc");
		return 1;
	} else if (!strcmp(cmd, "cycle") && argc >= 2) {
		int n = atoi(argv[1]);
		/* SBX_CYCLE_IDS=FILE: each id is written there before its start,
		 * so a test can check for leftovers even if this dies */
		const char *idf = getenv("SBX_CYCLE_IDS");
		FILE *ids_out = idf ? fopen(idf, "ae") : NULL;
		if (spec_args(argc - 2, argv + 2, &s) < 0)
			return usage();
		for (int i = 0; i < n; i++) {
			long long t0, t1, t2;
			random_id(s.id);
			if (ids_out)
				fprintf(ids_out, "%s\n", s.id), fflush(ids_out);
			t0 = sbx_now_ms();
			if (sandbox_start(&cfg, &s, &err) < 0) {
				fprintf(stderr, "sandboxctl: %s\n", err.msg);
				return 1;
			}
			t1 = sbx_now_ms();
			reap();
			if (sandbox_destroy(&cfg, s.id, &err) < 0) {
				fprintf(stderr, "sandboxctl: %s\n", err.msg);
				return 1;
			}
			t2 = sbx_now_ms();
			reap();
			printf("%lld %lld\n", t1 - t0, t2 - t1);
			fflush(stdout);
		}
		return 0;
	} else {
		return usage();
	}
	if (rc < 0) {
		fprintf(stderr, "sandboxctl: %s\n", err.msg);
		return 1;
	}
	return 0;
}
