/* `sbx shell ID [CMD...]`: an interactive terminal in a sandbox. The command
 * (a login shell by default) starts as a background process on a
 * pseudo-terminal of our terminal's size (exec with `pty`); its output is
 * followed (GET .../processes/PID/output, NDJSON) by a second thread and
 * written to our terminal as it comes; what is typed goes, in raw mode, to
 * POST .../stdin over one kept-alive connection; SIGWINCH becomes POST
 * .../resize. Our terminal is put back as it was on every way out (atexit).
 * sbx exits with the command's exit code. */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "sbx.h"

#define LOGIN_SHELL "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"

static struct termios saved_tty;
static bool tty_raw;
static int winch_pipe[2] = { -1, -1 };

static void restore_tty(void)
{
	if (tty_raw) {
		tcsetattr(0, TCSADRAIN, &saved_tty);
		tty_raw = false;
	}
}

static void on_winch(int sig)
{
	int e = errno;
	ssize_t w = write(winch_pipe[1], "w", 1);

	(void)sig;
	(void)w;
	errno = e;
}

static void term_size(unsigned *cols, unsigned *rows)
{
	struct winsize ws;

	if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*cols = ws.ws_col > 1000 ? 1000 : ws.ws_col;
		*rows = ws.ws_row > 1000 ? 1000 : ws.ws_row;
	} else {
		*cols = 80;
		*rows = 24;
	}
}

struct follow {
	const struct cli *c;
	char path[160];
	int done_pipe[2];
	int exit_code;
};

/* Follows the output until the process ends; a stream that ends without an
 * exit code (a proxy's timeout) is taken up again where it stopped. */
static void *follow_output(void *arg)
{
	struct follow *f = arg;
	struct cli own = *f->c;
	unsigned long long seen = 0;
	char p[224];
	ssize_t w;

	own.curl = NULL; /* this thread's requests have their own handles */
	for (int tries = 0; tries < 1000; tries++) {
		snprintf(p, sizeof(p), "%s?follow=1&offset=%llu", f->path, seen);
		f->exit_code = stream_frames(&own, p, NULL, "shell", &seen);
		if (f->exit_code >= 0)
			break;
	}
	w = write(f->done_pipe[1], "x", 1);
	(void)w;
	return NULL;
}

/* POST .../stdin with these bytes (none and close: the end of input). */
static void send_input(const struct cli *c, const char *base, const char *data, size_t n, bool close_it)
{
	char p[224];
	struct call k = { .raw = data, .rawlen = n, .has_raw = true };

	snprintf(p, sizeof(p), "%s/stdin%s", base, close_it ? "?close=1" : "");
	request(c, "POST", p, NULL, NULL, NULL, &k);
	/* 404: the process ended while this was typed; its exit code follows */
	if ((k.status < 200 || k.status >= 300) && k.status != 404)
		api_fail(&k, "shell: input");
	buf_free(&k.body);
}

static void send_size(const struct cli *c, const char *base)
{
	char p[224];
	unsigned cols, rows;
	json_t *b;
	struct call k = { 0 };

	term_size(&cols, &rows);
	b = json_pack("{s:i, s:i}", "cols", (int)cols, "rows", (int)rows);
	snprintf(p, sizeof(p), "%s/resize", base);
	request(c, "POST", p, b, NULL, NULL, &k);
	json_decref(b);
	buf_free(&k.body); /* a resize that does not land is not worth ending the session for */
}

int cmd_shell(struct cli *c, int argc, char **argv)
{
	static const struct option lo[] = { { "env", required_argument, NULL, 'e' },
					    { "cwd", required_argument, NULL, 'w' },
					    { 0 } };
	json_t *env = json_object(), *body, *v;
	const char *cwd = NULL;
	cleanup_free char *cmd = NULL;
	char base[160];
	unsigned cols, rows;
	struct follow f = { .c = c, .done_pipe = { -1, -1 }, .exit_code = -1 };
	pthread_t th;
	struct sigaction sa = { .sa_handler = on_winch };
	int ch;

	while ((ch = getopt_long(argc, argv, "+e:w:", lo, NULL)) != -1) {
		if (ch == '?')
			exit(EXIT_USAGE);
		if (ch == 'w')
			cwd = optarg;
		else if (ch == 'e') {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg)
				die(EXIT_USAGE, "--env must be KEY=VALUE: %s", optarg);
			char *k = strndup(optarg, (size_t)(eq - optarg));
			json_object_set_new(env, k, json_string(eq + 1));
			free(k);
		}
	}
	if (optind >= argc)
		die(EXIT_USAGE, "usage: sbx shell [-e K=V]... [-w DIR] ID [CMD [ARG...]]");
	check_id(argv[optind], "sandbox");
	if (!isatty(0) || !isatty(1))
		die(EXIT_USAGE, "shell needs a terminal on stdin and stdout; for scripts use `sbx exec`");
	if (optind + 1 < argc) {
		struct buf b = { 0 };
		for (int i = optind + 1; i < argc; i++) {
			buf_add(&b, i > optind + 1 ? " '" : "'", i > optind + 1 ? 2 : 1);
			for (const char *s = argv[i]; *s; s++)
				buf_add(&b, *s == '\'' ? "'\\''" : s, *s == '\'' ? 4 : 1);
			buf_add(&b, "'", 1);
		}
		cmd = b.s;
	} else {
		cmd = strdup(LOGIN_SHELL);
	}
	term_size(&cols, &rows);
	body = json_pack("{s:s, s:b, s:{s:i, s:i}}", "cmd", cmd, "background", 1, "pty", "cols", (int)cols, "rows",
			 (int)rows);
	if (json_object_size(env))
		json_object_set(body, "env", env);
	if (cwd)
		json_object_set_new(body, "cwd", json_string(cwd));
	snprintf(base, sizeof(base), "/sandboxes/%s/exec", argv[optind]);
	v = call_json(c, "POST", base, body, "shell");
	json_int_t pid = json_integer_value(json_object_get(json_object_get(v, "data"), "pid"));
	json_decref(v);
	json_decref(body);
	json_decref(env);
	if (pid < 1)
		die(EXIT_API, "shell: the API answered no pid");
	snprintf(base, sizeof(base), "/sandboxes/%s/processes/%lld", argv[optind], (long long)pid);

	if (pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(f.done_pipe, O_CLOEXEC) < 0)
		die(EXIT_USAGE, "pipe: %s", strerror(errno));
	sigaction(SIGWINCH, &sa, NULL);
	if (tcgetattr(0, &saved_tty) == 0) {
		struct termios raw = saved_tty;
		cfmakeraw(&raw);
		atexit(restore_tty);
		if (tcsetattr(0, TCSADRAIN, &raw) == 0)
			tty_raw = true;
	}
	snprintf(f.path, sizeof(f.path), "%s/output", base);
	if (pthread_create(&th, NULL, follow_output, &f) != 0)
		die(EXIT_USAGE, "cannot start the output thread");
	c->curl = curl_easy_init(); /* typed keys reuse one connection */

	bool in_open = true;
	for (;;) {
		struct pollfd pf[3] = { { in_open ? 0 : -1, POLLIN, 0 }, { winch_pipe[0], POLLIN, 0 },
					{ f.done_pipe[0], POLLIN, 0 } };
		char buf[4096];
		ssize_t n;

		if (poll(pf, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			die(EXIT_USAGE, "poll: %s", strerror(errno));
		}
		if (pf[2].revents)
			break;
		if (pf[1].revents) {
			while (read(winch_pipe[0], buf, sizeof(buf)) > 0)
				;
			send_size(c, base);
		}
		if (pf[0].revents) {
			n = read(0, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				in_open = false;
				send_input(c, base, NULL, 0, true);
			} else {
				send_input(c, base, buf, (size_t)n, false);
			}
		}
	}
	pthread_join(th, NULL);
	curl_easy_cleanup(c->curl);
	c->curl = NULL;
	restore_tty();
	return f.exit_code < 0 ? EXIT_CONN : f.exit_code;
}
