/* relayctl: speaks the node agent's AMQP contract (doc/internal-protocol.md,
 * hop 1) the way the API does, so the relay can be tested without the API.
 *
 *   relayctl [-u AMQP_URL] [-n NODE] [-T SECONDS] [-j FILE] [-v] COMMAND ...
 *
 *   exec [-e K=V]... [-w CWD] [-t TIMEOUT_MS] [-c CREDIT] [-N] [-s MS] [-i] [-I] [-b] SANDBOX -- ARGV...
 *       stdout/stderr byte-exact to ours; exits with the command's code.
 *       -c initial credit (65536); -N never grant more; -s sleep MS before
 *       each grant (a slow client); -i stdin (<= 1 MiB) sent in the request;
 *       -I stdin streamed as `stdin` messages (stdin_open); -b background.
 *   bg SANDBOX -- ARGV...          background exec; prints the pid
 *   put [-p] SANDBOX PATH < data   file.write (streamed, file.credit window)
 *   get [-c CREDIT] [-s MS] SANDBOX PATH > data
 *   ls SANDBOX PATH | rm [-r] SANDBOX PATH | mkdir [-p] SANDBOX PATH
 *   procs SANDBOX                  the `done` JSON
 *   attach [-o OFFSET] [-f] [-c CREDIT] SANDBOX PID
 *   pstdin [-C] SANDBOX PID < data | pkill SANDBOX PID SIGNAL
 *
 * AMQP_URL defaults to $SBX_AMQP_URL, NODE to $SBX_NODE. An `error` event
 * prints "relayctl: error CODE: MESSAGE" and exits 250; no final event
 * within -T seconds (default 120) exits 254. -j FILE writes the final
 * event as "TYPE JSON". */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include <sodium.h>
#include "fdio.h"
#include "id.h"
#include "cleanup.h"
#include "clock.h"
#include "mq.h"
#include "msg.h"

#define WINDOW (1024 * 1024)
#define CHUNK (256 * 1024)

static sbx_mq *mq;
static char queue[300], op_id[SBX_ID_LEN + 1], sandbox[SBX_ID_LEN + 1];
static int verbose, total_s = 120;
static const char *jfile;
static long long deadline;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "relayctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void send_msg(const char *type, json_t *body /* stolen */, bool first)
{
	sbx_err err = SBX_ERR_INIT;
	const char *plc = getenv("RELAY_PLACEMENT");
	char *s;
	int rc;

	/* the node knows a sandbox by its placement (the test looks it up) */
	json_object_set_new(body, "sandbox_id", json_string(sandbox));
	json_object_set_new(body, "placement_id", json_string(plc && *plc ? plc : sandbox));
	json_object_set_new(body, "op_id", json_string(op_id));
	s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	/* follow-ups are plain publishes: ensuring the connection would find
	 * our socket readable with events and reconnect, losing them */
	if (first)
		rc = sbx_mq_request(mq, queue, type, s, strlen(s), op_id, &err);
	else
		rc = sbx_mq_publish(mq, queue, s, strlen(s),
				    &(struct sbx_mq_pub){ .type = type, .correlation_id = op_id }, &err);
	free(s);
	if (rc < 0)
		die("publish: %s", err.msg);
}

static void send_raw(const char *type, const void *p, size_t n)
{
	sbx_err err = SBX_ERR_INIT;

	if (sbx_mq_publish(mq, queue, p, n, &(struct sbx_mq_pub){ .type = type, .correlation_id = op_id }, &err) < 0)
		die("publish: %s", err.msg);
}

static void send_credit(size_t n)
{
	send_msg("credit", json_pack("{s:I}", "bytes", (json_int_t)n), false);
}

static char *b64(const void *p, size_t n)
{
	size_t l = sodium_base64_encoded_len(n, sodium_base64_VARIANT_ORIGINAL);
	char *s = malloc(l);
	if (!s)
		die("%s", "out of memory");
	sodium_bin2base64(s, l, p, n, sodium_base64_VARIANT_ORIGINAL);
	return s;
}

static void write_all(int fd, const void *p, size_t n)
{
	if (sbx_write_all(fd, p, n) < 0)
		exit(3);
}

static void final_event(const sbx_mq_msg *m)
{
	if (jfile) {
		FILE *f = fopen(jfile, "we");
		if (f) {
			fprintf(f, "%s %.*s\n", m->type, (int)m->len, m->body);
			fclose(f);
		}
	}
}

/* Next event of our op; exits on an `error` event or the deadline. */
static void next_event(sbx_mq_msg *m)
{
	sbx_err err = SBX_ERR_INIT;

	for (;;) {
		long long left = deadline - sbx_now_ms();
		int r;
		if (left <= 0) {
			fprintf(stderr, "relayctl: no final event within %d s\n", total_s);
			exit(254);
		}
		r = sbx_mq_next(mq, left > 1000 ? 1000 : (int)left, m, &err);
		if (r < 0)
			die("consume: %s", err.msg);
		if (r == 0)
			continue;
		if (strcmp(m->correlation_id, op_id)) {
			sbx_mq_msg_free(m);
			continue;
		}
		if (verbose && strcmp(m->type, "stdout") && strcmp(m->type, "stderr") && strcmp(m->type, "file.data"))
			fprintf(stderr, "relayctl: event %s %.*s\n", m->type, (int)(m->len > 300 ? 300 : m->len), m->body);
		if (!strcmp(m->type, "error")) {
			json_t *j = json_loadb(m->body, m->len, 0, NULL);
			final_event(m);
			fprintf(stderr, "relayctl: error %s: %s\n", j ? json_string_value(json_object_get(j, "code")) : "?",
				j ? json_string_value(json_object_get(j, "message")) : m->body);
			exit(250);
		}
		return;
	}
}

static int output_loop(long slow_ms, bool no_credit)
{
	for (;;) {
		sbx_mq_msg m;
		next_event(&m);
		if (!strcmp(m.type, "stdout") || !strcmp(m.type, "stderr") || !strcmp(m.type, "file.data")) {
			write_all(!strcmp(m.type, "stderr") ? 2 : 1, m.body, m.len);
			if (!no_credit) {
				if (slow_ms > 0) {
					struct timespec ts = { slow_ms / 1000, (slow_ms % 1000) * 1000000 };
					nanosleep(&ts, NULL);
				}
				send_credit(m.len);
			}
		} else if (!strcmp(m.type, "exit")) {
			json_t *j = json_loadb(m.body, m.len, 0, NULL);
			int code = j ? (int)json_integer_value(json_object_get(j, "exit_code")) : 255;
			final_event(&m);
			json_decref(j);
			sbx_mq_msg_free(&m);
			return code;
		} else if (!strcmp(m.type, "done")) {
			final_event(&m);
			if (strcmp(m.body, "{}"))
				printf("%s\n", m.body);
			sbx_mq_msg_free(&m);
			return 0;
		}
		sbx_mq_msg_free(&m);
	}
}

static size_t read_all(int fd, char **out, size_t max)
{
	size_t cap = 65536, len = 0;
	char *p = malloc(cap);
	for (;;) {
		ssize_t r;
		if (len == cap) {
			if (cap >= max)
				break;
			cap *= 2;
			p = realloc(p, cap);
		}
		r = read(fd, p + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	*out = p;
	return len;
}

int main(int argc, char **argv)
{
	const char *url = getenv("SBX_AMQP_URL"), *node = getenv("SBX_NODE"), *cmd;
	sbx_err err = SBX_ERR_INIT;
	int c;

	while ((c = getopt(argc, argv, "+u:n:T:j:v")) != -1) {
		switch (c) {
		case 'u': url = optarg; break;
		case 'n': node = optarg; break;
		case 'T': total_s = atoi(optarg); break;
		case 'j': jfile = optarg; break;
		case 'v': verbose = 1; break;
		default: return 2;
		}
	}
	if (optind >= argc || !url || !node) {
		fprintf(stderr, "usage: relayctl [-u AMQP_URL] [-n NODE] [-T S] [-j FILE] [-v] COMMAND ... (see the source)\n");
		return 2;
	}
	if (sodium_init() < 0)
		return 2;
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	optind = 1;
	if (sbx_msg_node_queue(node, queue, sizeof(queue), &err) < 0)
		die("%s", err.msg);
	sbx_id_new(op_id);
	deadline = sbx_now_ms() + (long long)total_s * 1000;
	if (sbx_mq_open(&mq, url, &err) < 0)
		die("%s", err.msg);

	if (!strcmp(cmd, "exec") || !strcmp(cmd, "bg")) {
		json_t *env = json_object(), *av = json_array();
		const char *cwd = NULL;
		long timeout = 0, credit = 65536, slow = 0;
		bool no_credit = false, in_req = false, in_stream = false, bg = !strcmp(cmd, "bg");
		json_t *req;
		while ((c = getopt(argc, argv, "+e:w:t:c:Ns:iIb")) != -1) {
			switch (c) {
			case 'e': {
				char *eq = strchr(optarg, '=');
				if (!eq)
					die("-e %s: not K=V", optarg);
				*eq = 0;
				json_object_set_new(env, optarg, json_string(eq + 1));
				break;
			}
			case 'w': cwd = optarg; break;
			case 't': timeout = atol(optarg); break;
			case 'c': credit = atol(optarg); break;
			case 'N': no_credit = true; break;
			case 's': slow = atol(optarg); break;
			case 'i': in_req = true; break;
			case 'I': in_stream = true; break;
			case 'b': bg = true; break;
			default: return 2;
			}
		}
		if (optind + 1 >= argc)
			die("%s", "exec SANDBOX -- ARGV");
		snprintf(sandbox, sizeof(sandbox), "%s", argv[optind++]);
		if (optind < argc && !strcmp(argv[optind], "--"))
			optind++;
		for (int i = optind; i < argc; i++)
			json_array_append_new(av, json_string(argv[i]));
		req = json_pack("{s:o, s:o, s:I, s:I, s:b, s:b}", "argv", av, "env", env, "timeout_ms",
				(json_int_t)timeout, "credit", (json_int_t)credit, "stdin_open", in_stream, "background",
				bg);
		if (cwd)
			json_object_set_new(req, "cwd", json_string(cwd));
		if (in_req) {
			char *data;
			size_t n = read_all(0, &data, WINDOW);
			char *s = b64(data, n);
			json_object_set_new(req, "stdin_b64", json_string(s));
			free(s);
			free(data);
		}
		send_msg("exec", req, true);
		if (in_stream) {
			/* all of our stdin, then close, at most a window unacknowledged
			 * (stdin.credit), handling output meanwhile */
			char buf[65536];
			size_t inflight = 0;
			for (;;) {
				sbx_mq_msg m;
				if (inflight + sizeof(buf) <= WINDOW) {
					ssize_t n = read(0, buf, sizeof(buf));
					if (n < 0 && errno == EINTR)
						continue;
					if (n <= 0)
						break;
					char *s = b64(buf, (size_t)n);
					send_msg("stdin", json_pack("{s:s, s:b}", "data_b64", s, "close", 0), false);
					free(s);
					inflight += (size_t)n;
					continue;
				}
				next_event(&m);
				if (!strcmp(m.type, "stdin.credit")) {
					json_t *j = json_loadb(m.body, m.len, 0, NULL);
					size_t b = (size_t)json_integer_value(json_object_get(j, "bytes"));
					inflight -= b > inflight ? inflight : b;
					json_decref(j);
				} else if (!strcmp(m.type, "stdout") || !strcmp(m.type, "stderr")) {
					write_all(!strcmp(m.type, "stderr") ? 2 : 1, m.body, m.len);
					send_credit(m.len);
				} else if (!strcmp(m.type, "exit")) {
					json_t *j = json_loadb(m.body, m.len, 0, NULL);
					int code = j ? (int)json_integer_value(json_object_get(j, "exit_code")) : 255;
					final_event(&m);
					json_decref(j);
					sbx_mq_msg_free(&m);
					return code;
				}
				sbx_mq_msg_free(&m);
			}
			send_msg("stdin", json_pack("{s:b}", "close", 1), false);
		}
		if (bg) {
			for (;;) {
				sbx_mq_msg m;
				next_event(&m);
				if (!strcmp(m.type, "started")) {
					json_t *j = json_loadb(m.body, m.len, 0, NULL);
					printf("%lld\n", (long long)json_integer_value(json_object_get(j, "pid")));
					fflush(stdout);
					json_decref(j);
				}
				if (!strcmp(m.type, "done") || !strcmp(m.type, "exit")) {
					final_event(&m);
					sbx_mq_msg_free(&m);
					return 0;
				}
				sbx_mq_msg_free(&m);
			}
		}
		return output_loop(slow, no_credit);
	}
	if (!strcmp(cmd, "put")) {
		bool parents = false;
		struct stat st;
		json_t *req;
		size_t inflight = 0;
		cleanup_free char *buf = malloc(CHUNK);
		bool eof = false;
		while ((c = getopt(argc, argv, "+p")) != -1)
			if (c == 'p')
				parents = true;
			else
				return 2;
		if (optind + 2 != argc)
			die("%s", "put [-p] SANDBOX PATH < data");
		snprintf(sandbox, sizeof(sandbox), "%s", argv[optind]);
		req = json_pack("{s:s, s:b}", "path", argv[optind + 1], "mkdir", parents);
		if (fstat(0, &st) == 0 && S_ISREG(st.st_mode))
			json_object_set_new(req, "size", json_integer((json_int_t)st.st_size));
		send_msg("file.write", req, true);
		while (!eof) {
			while (!eof && inflight + CHUNK <= WINDOW) {
				ssize_t n = read(0, buf, CHUNK);
				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0) {
					eof = true;
					break;
				}
				send_raw("file.data", buf, (size_t)n);
				inflight += (size_t)n;
			}
			if (eof)
				break;
			{
				sbx_mq_msg m;
				next_event(&m);
				if (!strcmp(m.type, "file.credit")) {
					json_t *j = json_loadb(m.body, m.len, 0, NULL);
					size_t b = (size_t)json_integer_value(json_object_get(j, "bytes"));
					inflight -= b > inflight ? inflight : b;
					json_decref(j);
				} else if (!strcmp(m.type, "done")) {
					die("%s", "done before the end of the data");
				}
				sbx_mq_msg_free(&m);
			}
		}
		send_msg("file.end", json_object(), false);
		for (;;) {
			sbx_mq_msg m;
			next_event(&m);
			if (!strcmp(m.type, "done")) {
				final_event(&m);
				sbx_mq_msg_free(&m);
				return 0;
			}
			sbx_mq_msg_free(&m);
		}
	}
	if (!strcmp(cmd, "get")) {
		long credit = WINDOW, slow = 0;
		while ((c = getopt(argc, argv, "+c:s:")) != -1)
			if (c == 'c')
				credit = atol(optarg);
			else if (c == 's')
				slow = atol(optarg);
			else
				return 2;
		if (optind + 2 != argc)
			die("%s", "get SANDBOX PATH");
		snprintf(sandbox, sizeof(sandbox), "%s", argv[optind]);
		send_msg("file.read", json_pack("{s:s, s:I}", "path", argv[optind + 1], "credit", (json_int_t)credit),
			 true);
		for (;;) {
			sbx_mq_msg m;
			next_event(&m);
			if (!strcmp(m.type, "file.data")) {
				write_all(1, m.body, m.len);
				if (slow > 0) {
					struct timespec ts = { slow / 1000, (slow % 1000) * 1000000 };
					nanosleep(&ts, NULL);
				}
				send_credit(m.len);
			} else if (!strcmp(m.type, "done")) {
				final_event(&m);
				sbx_mq_msg_free(&m);
				return 0;
			}
			sbx_mq_msg_free(&m);
		}
	}
	if (!strcmp(cmd, "ls") || !strcmp(cmd, "rm") || !strcmp(cmd, "mkdir") || !strcmp(cmd, "procs")) {
		bool flag = false;
		json_t *req;
		const char *type;
		while ((c = getopt(argc, argv, "+rp")) != -1)
			if (c == 'r' || c == 'p')
				flag = true;
			else
				return 2;
		if (optind + (strcmp(cmd, "procs") ? 2 : 1) != argc)
			die("%s: wrong arguments", cmd);
		snprintf(sandbox, sizeof(sandbox), "%s", argv[optind]);
		if (!strcmp(cmd, "procs")) {
			type = "proc.list";
			req = json_object();
		} else if (!strcmp(cmd, "ls")) {
			type = "file.list";
			req = json_pack("{s:s}", "path", argv[optind + 1]);
		} else if (!strcmp(cmd, "rm")) {
			type = "file.delete";
			req = json_pack("{s:s, s:b}", "path", argv[optind + 1], "recursive", flag);
		} else {
			type = "file.mkdir";
			req = json_pack("{s:s, s:b}", "path", argv[optind + 1], "parents", flag);
		}
		send_msg(type, req, true);
		return output_loop(0, false);
	}
	if (!strcmp(cmd, "attach")) {
		long long off = 0;
		long credit = 65536;
		bool follow = false;
		while ((c = getopt(argc, argv, "+o:fc:")) != -1)
			if (c == 'o')
				off = atoll(optarg);
			else if (c == 'f')
				follow = true;
			else if (c == 'c')
				credit = atol(optarg);
			else
				return 2;
		if (optind + 2 != argc)
			die("%s", "attach SANDBOX PID");
		snprintf(sandbox, sizeof(sandbox), "%s", argv[optind]);
		send_msg("proc.attach",
			 json_pack("{s:I, s:I, s:b, s:I}", "pid", (json_int_t)atoll(argv[optind + 1]), "offset",
				   (json_int_t)off, "follow", follow, "credit", (json_int_t)credit),
			 true);
		return output_loop(0, false);
	}
	if (!strcmp(cmd, "pstdin")) {
		bool close_ = false;
		char *data, *s;
		size_t n;
		while ((c = getopt(argc, argv, "+C")) != -1)
			if (c == 'C')
				close_ = true;
			else
				return 2;
		if (optind + 2 != argc)
			die("%s", "pstdin SANDBOX PID");
		snprintf(sandbox, sizeof(sandbox), "%s", argv[optind]);
		n = read_all(0, &data, 200 * 1024);
		s = b64(data, n);
		send_msg("proc.stdin",
			 json_pack("{s:I, s:s, s:b}", "pid", (json_int_t)atoll(argv[optind + 1]), "data_b64", s, "close",
				   close_),
			 true);
		return output_loop(0, false);
	}
	if (!strcmp(cmd, "pkill")) {
		if (argc != 4)
			die("%s", "pkill SANDBOX PID SIGNAL");
		snprintf(sandbox, sizeof(sandbox), "%s", argv[1]);
		send_msg("proc.signal",
			 json_pack("{s:I, s:o}", "pid", (json_int_t)atoll(argv[2]), "signal",
				   strspn(argv[3], "0123456789") == strlen(argv[3]) ? json_integer(atoi(argv[3]))
										: json_string(argv[3])),
			 true);
		return output_loop(0, false);
	}
	die("unknown command %s", cmd);
	return 2;
}
