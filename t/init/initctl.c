/* initctl: a host-side test client for sbx-init's channel (frame.h).
 *
 *   initctl SOCK ping [N]     (N: time N round trips, print p50/p99)
 *   initctl SOCK exec [options] -- ARGV...
 *   initctl SOCK bench N -- ARGV...
 *
 * exec prints the command's stdout and stderr bytes exactly on its own
 * stdout and stderr and exits with the command's exit code (125 and a
 * message when the command could not start, 3 on a protocol error).
 * Options:
 *   --timeout-ms N        kill the process group after N ms (exit 124)
 *   --stdin DATA          send DATA on stdin, then close it
 *   --stdin-file FILE     the same with a file's bytes (sent within the
 *                         stdin window, following STDIN_ACK)
 *   --keep-stdin          open stdin but send nothing and never close it
 *   --cwd DIR             working directory (default /)
 *   --env NAME=VALUE      environment (repeatable; default only PATH)
 *   --credit N            output credit window in bytes (default 1 MiB):
 *                         more is granted as output is written out
 *   --credit-delay-ms N   wait N ms before each grant (a slow reader)
 *   --background          the process survives the channel closing
 *   --signal-on-output S  send signal S once the first output arrived
 *   --quit-on-output      exit 0 (closing the channel) once output arrived
 *   --status FILE         write "exit=C signal=S timed_out=T pid=P" there
 *   --stream N            stream id (default 1)
 *
 * Protocol 2 (exit 0, or 4 with "initctl: errno=N (text)" on an errno EXIT):
 *   initctl SOCK put PATH [--mkdir] [--mode OCTAL] < data
 *   initctl SOCK get PATH [--credit N] [--credit-delay-ms N] [--stat] > data
 *                           (--stat: "size=N mode=OCT mtime=T" on stderr)
 *   initctl SOCK ls PATH     (the entries' lines as sent)
 *   initctl SOCK rm PATH [-r] | mkdir PATH [-p] [--mode OCTAL]
 *   initctl SOCK bg [exec options] -- ARGV...   (prints the pid)
 *   initctl SOCK procs       (the PROCS lines as sent)
 *   initctl SOCK attach PID [--offset N] [--follow] [--credit N]
 *                  [--credit-delay-ms N] [--status FILE] [--quit-after BYTES]
 *       output as exec; exits with the process's code (0 when detached);
 *       --status gets "exit=C signal=S flags=F"; --quit-after drops the
 *       connection once that many bytes arrived
 *   initctl SOCK pstdin PID DATA | pstdin PID --close | psignal PID SIG
 * bench runs ARGV N times, one after the other on one connection (as the
 * node agent would), and prints "n=N p50_us=.. p90_us=.. p99_us=.. max_us=..".
 * Frames from sbx-init are parsed with the same strict decoder the node
 * agent uses: anything malformed is a failure of sbx-init. */
#include "config.h"
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include "fdio.h"
#include "chanauth.h"
#include "frame.h"

static int sock = -1;

static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("initctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(code);
}

static void write_all(int fd, const void *p, size_t n)
{
	if (sbx_write_all(fd, p, n) < 0)
		die(3, "write: %s", strerror(errno));
}

static void send_frame(uint8_t type, uint32_t stream, const void *payload, size_t len)
{
	uint8_t h[SBX_FRAME_HDR];

	sbx_frame_header(h, type, stream, (uint32_t)len);
	write_all(sock, h, sizeof(h));
	if (len)
		write_all(sock, payload, len);
}

static void send_u32(uint8_t type, uint32_t stream, uint32_t v)
{
	uint8_t b[4] = { v >> 24, v >> 16, v >> 8, v };

	send_frame(type, stream, b, 4);
}

/* Frame reader over the blocking socket. */
static uint8_t rbuf[2 * (SBX_FRAME_HDR + SBX_FRAME_MAX_PAYLOAD)];
static size_t rlen, roff;

static void next_frame(struct sbx_frame *f)
{
	sbx_err err = SBX_ERR_INIT;

	for (;;) {
		long n = sbx_frame_parse(rbuf + roff, rlen - roff, 1, f, &err);
		if (n < 0)
			die(3, "bad frame from sbx-init: %s", err.msg);
		if (n > 0) {
			roff += (size_t)n;
			return;
		}
		if (roff) {
			memmove(rbuf, rbuf + roff, rlen - roff);
			rlen -= roff;
			roff = 0;
		}
		ssize_t r = read(sock, rbuf + rlen, sizeof(rbuf) - rlen);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die(3, "channel closed by sbx-init%s%s", r < 0 ? ": " : "",
			    r < 0 ? strerror(errno) : "");
		rlen += (size_t)r;
	}
}

/* The channel key and sandbox id, as the node agent has them: from the
 * environment (SBX_CHANNEL_KEY, SBX_SANDBOX_ID), like sbx-init's. */
static void connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint8_t key[SBX_CHAN_KEY_LEN];
	const char *id = getenv(SBX_CHAN_ID_ENV);
	sbx_err err = SBX_ERR_INIT;

	if (sbx_chan_key_parse(getenv(SBX_CHAN_KEY_ENV), key, &err) < 0 || !id)
		die(2, "set %s and %s as sbx-init has them", SBX_CHAN_KEY_ENV, SBX_CHAN_ID_ENV);
	if (strlen(path) >= sizeof(sa.sun_path))
		die(2, "socket path too long");
	strcpy(sa.sun_path, path);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die(3, "connect %s: %s", path, strerror(errno));
	if (sbx_chan_client_handshake(sock, key, id, 5000, &err) < 0)
		die(3, "%s", err.msg);
}

static void msleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static long long now_us(void);
static int cmp_ll(const void *a, const void *b);

/* One PING, or N of them timed (the channel's own round trip). */
static int cmd_ping(int n)
{
	long long t[1000];
	struct sbx_frame f;

	if (n > 1000)
		n = 1000;
	for (int i = 0; i < (n > 0 ? n : 1); i++) {
		long long t0 = now_us();
		send_frame(SBX_F_PING, 0, "cookie", 6);
		next_frame(&f);
		if (f.type != SBX_F_PONG || f.len != 6 || memcmp(f.payload, "cookie", 6))
			die(3, "expected PONG");
		t[i] = now_us() - t0;
	}
	if (n < 1) {
		puts("pong");
		return 0;
	}
	qsort(t, (size_t)n, sizeof(t[0]), cmp_ll);
	printf("n=%d p50_us=%lld p99_us=%lld\n", n, t[n / 2], t[n * 99 / 100]);
	return 0;
}

static uint8_t *read_file(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *p;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t off = 0;

	if (fd < 0 || fstat(fd, &st) < 0)
		die(2, "%s: %s", path, strerror(errno));
	p = malloc((size_t)st.st_size + 1);
	if (!p)
		die(2, "out of memory");
	while (off < (size_t)st.st_size) {
		ssize_t r = read(fd, p + off, (size_t)st.st_size - off);
		if (r <= 0)
			die(2, "%s: short read", path);
		off += (size_t)r;
	}
	close(fd);
	*len = off;
	return p;
}

static int cmd_exec(int argc, char **argv)
{
	struct sbx_exec_req req = { 0 };
	const char *envs[256], *status_file = NULL, *cwd = "/";
	const uint8_t *in = NULL;
	uint8_t *payload, *file = NULL;
	size_t in_len = 0, in_off = 0, plen, unacked = 0;
	uint32_t credit = 1024 * 1024, stream = 1, pid = 0;
	long credit_delay = 0, timeout = 0;
	int envc = 0, has_stdin = 0, keep_stdin = 0, background = 0, sig_on_output = 0;
	int quit_on_output = 0, stdin_closed = 0, i;
	uint64_t consumed = 0;
	sbx_err err = SBX_ERR_INIT;
	struct sbx_frame f;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "--background")) {
			background = 1;
			continue;
		}
		if (!strcmp(a, "--keep-stdin")) {
			has_stdin = keep_stdin = 1;
			continue;
		}
		if (!strcmp(a, "--quit-on-output")) {
			quit_on_output = 1;
			continue;
		}
		if (!v)
			die(2, "%s needs a value", a);
		i++;
		if (!strcmp(a, "--timeout-ms"))
			timeout = atol(v);
		else if (!strcmp(a, "--stdin"))
			in = (const uint8_t *)v, in_len = strlen(v), has_stdin = 1;
		else if (!strcmp(a, "--stdin-file"))
			in = file = read_file(v, &in_len), has_stdin = 1;
		else if (!strcmp(a, "--cwd"))
			cwd = v;
		else if (!strcmp(a, "--env") && envc < 255)
			envs[envc++] = v;
		else if (!strcmp(a, "--credit"))
			credit = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--credit-delay-ms"))
			credit_delay = atol(v);
		else if (!strcmp(a, "--signal-on-output"))
			sig_on_output = atoi(v);
		else if (!strcmp(a, "--status"))
			status_file = v;
		else if (!strcmp(a, "--stream"))
			stream = (uint32_t)strtoul(v, NULL, 10);
		else
			die(2, "unknown option %s", a);
	}
	if (i >= argc)
		die(2, "exec needs -- ARGV...");
	if (envc == 0)
		envs[envc++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	envs[envc] = NULL;
	argv[argc] = NULL;
	req.flags = (has_stdin ? SBX_EXEC_STDIN : 0) | (background ? SBX_EXEC_BACKGROUND : 0);
	req.timeout_ms = (uint32_t)timeout;
	req.credit = credit;
	req.cwd = cwd;
	req.argc = argc - i;
	req.argv = (const char **)argv + i;
	req.envc = envc;
	req.envp = envs;
	if (sbx_exec_encode(&req, &payload, &plen, &err) < 0)
		die(2, "%s", err.msg);
	send_frame(SBX_F_EXEC, stream, payload, plen);
	free(payload);

	for (;;) {
		/* stdin within the window; closed once all is sent */
		while (has_stdin && !keep_stdin && !stdin_closed && in_off < in_len &&
		       unacked < SBX_STDIN_WINDOW) {
			size_t n = in_len - in_off;
			if (n > 65536)
				n = 65536;
			if (n > SBX_STDIN_WINDOW - unacked)
				n = SBX_STDIN_WINDOW - unacked;
			send_frame(SBX_F_STDIN, stream, in + in_off, n);
			in_off += n;
			unacked += n;
		}
		if (has_stdin && !keep_stdin && !stdin_closed && in_off == in_len) {
			send_frame(SBX_F_STDIN, stream, NULL, 0);
			stdin_closed = 1;
		}
		next_frame(&f);
		if (f.stream != stream)
			die(3, "frame for stream %u", f.stream);
		switch (f.type) {
		case SBX_F_STARTED:
			sbx_frame_decode_u32(&f, &pid, NULL);
			break;
		case SBX_F_STDOUT:
		case SBX_F_STDERR:
			write_all(f.type == SBX_F_STDOUT ? 1 : 2, f.payload, f.len);
			if (quit_on_output)
				exit(0);
			if (sig_on_output) {
				send_u32(SBX_F_SIGNAL, stream, (uint32_t)sig_on_output);
				sig_on_output = 0;
			}
			consumed += f.len;
			if (consumed >= credit / 2 || consumed >= 65536) {
				if (credit_delay)
					msleep(credit_delay);
				send_u32(SBX_F_CREDIT, stream, (uint32_t)consumed);
				consumed = 0;
			}
			break;
		case SBX_F_STDIN_ACK: {
			uint32_t v = 0;
			sbx_frame_decode_u32(&f, &v, NULL);
			if (v > unacked)
				die(3, "STDIN_ACK of %u bytes, %zu outstanding", v, unacked);
			unacked -= v;
			break;
		}
		case SBX_F_ERROR:
			die(125, "error: %.*s", (int)f.len, (const char *)f.payload);
		case SBX_F_EXIT: {
			struct sbx_exit_info x;
			if (sbx_frame_decode_exit(&f, &x, &err) < 0)
				die(3, "%s", err.msg);
			if (background != !!(x.flags & SBX_EXIT_DETACHED))
				die(3, "EXIT flags 0x%x for a %s exec", x.flags,
				    background ? "background" : "foreground");
			if (background)
				printf("%u\n", pid);
			if (status_file) {
				FILE *sf = fopen(status_file, "we");
				if (sf) {
					fprintf(sf, "exit=%d signal=%u timed_out=%d pid=%u\n", x.code, x.signal,
						x.timed_out, pid);
					fclose(sf);
				}
			}
			free(file);
			return x.code;
		}
		default:
			die(3, "unexpected frame type 0x%02x", f.type);
		}
	}
}

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

static int cmd_bench(int argc, char **argv)
{
	const char *envs[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	struct sbx_exec_req req = { 0 };
	sbx_err err = SBX_ERR_INIT;
	struct sbx_frame f;
	long long *t;
	uint8_t *payload;
	size_t plen;
	int n;

	if (argc < 3 || strcmp(argv[1], "--") || (n = atoi(argv[0])) < 1)
		die(2, "usage: initctl SOCK bench N -- ARGV...");
	t = calloc((size_t)n, sizeof(*t));
	req.credit = 1024 * 1024;
	req.cwd = "/";
	req.argc = argc - 2;
	req.argv = (const char **)argv + 2;
	req.envc = 1;
	req.envp = envs;
	if (!t || sbx_exec_encode(&req, &payload, &plen, &err) < 0)
		die(2, "%s", t ? err.msg : "out of memory");
	for (int i = 0; i < n; i++) {
		long long t0 = now_us();
		send_frame(SBX_F_EXEC, (uint32_t)i + 1, payload, plen);
		do
			next_frame(&f);
		while (f.type != SBX_F_EXIT && f.type != SBX_F_ERROR);
		if (f.type == SBX_F_ERROR)
			die(125, "error: %.*s", (int)f.len, (const char *)f.payload);
		t[i] = now_us() - t0;
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_ll);
	printf("n=%d p50_us=%lld p90_us=%lld p99_us=%lld max_us=%lld\n", n, t[n / 2], t[n * 9 / 10],
	       t[n * 99 / 100], t[n - 1]);
	free(payload);
	free(t);
	return 0;
}


/* ---- protocol 2 ------------------------------------------------------------ */

/* Waits for the EXIT of `stream`; output frames go to out(). Returns the
 * decoded EXIT; an errno EXIT ends the program with 4. */
static struct sbx_exit_info wait_exit(uint32_t stream, void (*out)(const struct sbx_frame *))
{
	sbx_err err = SBX_ERR_INIT;
	struct sbx_exit_info x;
	struct sbx_frame f;

	for (;;) {
		next_frame(&f);
		if (f.stream != stream)
			die(3, "frame for stream %u", f.stream);
		if (f.type == SBX_F_EXIT)
			break;
		if ((f.type == SBX_F_STDOUT || f.type == SBX_F_STDERR || f.type == SBX_F_STAT) && out)
			out(&f);
		else
			die(3, "unexpected frame type 0x%02x", f.type);
	}
	if (sbx_frame_decode_exit(&f, &x, &err) < 0)
		die(3, "%s", err.msg);
	if (x.flags & SBX_EXIT_ERRNO)
		die(4, "errno=%d (%s)", x.err, strerror(x.err));
	return x;
}

static void send_file(uint32_t op, uint32_t flags, uint32_t mode, uint32_t credit, const char *path)
{
	struct sbx_file_req req = { op, flags, mode, credit, path };
	uint8_t b[SBX_FILE_MAX];
	sbx_err err = SBX_ERR_INIT;
	long n = sbx_file_encode(&req, b, &err);

	if (n < 0)
		die(2, "%s", err.msg);
	send_frame(SBX_F_FILE, 1, b, (size_t)n);
}

/* PATH may come before or after the options: moved to argv[0]. */
static void path_first(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (argv[i][0] == '/') {
			char *p = argv[i];
			memmove(argv + 1, argv, (size_t)i * sizeof(*argv));
			argv[0] = p;
			return;
		}
		if (!strcmp(argv[i], "--mode") || !strcmp(argv[i], "--credit") ||
		    !strcmp(argv[i], "--credit-delay-ms"))
			i++;
	}
}

static int cmd_put(int argc, char **argv)
{
	static uint8_t chunk[65536];
	uint32_t flags = 0, mode = 0;
	size_t unacked = 0;
	int eof = 0;
	sbx_err err = SBX_ERR_INIT;
	struct sbx_frame f;

	path_first(argc, argv);
	if (argc < 1)
		die(2, "put PATH [--mkdir] [--mode OCTAL]");
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mkdir"))
			flags |= SBX_FILE_PARENTS;
		else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
			mode = (uint32_t)strtoul(argv[++i], NULL, 8);
		else
			die(2, "unknown option %s", argv[i]);
	}
	send_file(SBX_FILE_WRITE, flags, mode, 0, argv[0]);
	for (;;) {
		/* our own stdin is read only as the window allows: bounded here too */
		while (!eof && unacked + sizeof(chunk) <= SBX_STDIN_WINDOW) {
			ssize_t r = read(0, chunk, sizeof(chunk));
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				die(2, "stdin: %s", strerror(errno));
			if (r == 0) {
				send_frame(SBX_F_STDIN, 1, NULL, 0);
				eof = 1;
				break;
			}
			send_frame(SBX_F_STDIN, 1, chunk, (size_t)r);
			unacked += (size_t)r;
		}
		next_frame(&f);
		if (f.stream != 1)
			die(3, "frame for stream %u", f.stream);
		if (f.type == SBX_F_STDIN_ACK) {
			uint32_t v = 0;
			sbx_frame_decode_u32(&f, &v, NULL);
			if (v > unacked)
				die(3, "STDIN_ACK of %u bytes, %zu outstanding", v, unacked);
			unacked -= v;
			continue;
		}
		if (f.type != SBX_F_EXIT)
			die(3, "unexpected frame type 0x%02x", f.type);
		struct sbx_exit_info x;
		if (sbx_frame_decode_exit(&f, &x, &err) < 0)
			die(3, "%s", err.msg);
		if (x.flags & SBX_EXIT_ERRNO)
			die(4, "errno=%d (%s)", x.err, strerror(x.err));
		if (!eof)
			die(3, "EXIT 0 before the end of the data");
		return 0;
	}
}

/* Output of get/attach: written out, credit granted back as it is. */
static uint64_t g_consumed, g_received, g_quit_after;
static uint32_t g_credit = 1024 * 1024, g_stream = 1;
static long g_credit_delay;
static int g_print_stat;

static void out_bytes(const struct sbx_frame *f)
{
	if (f->type == SBX_F_STAT) {
		struct sbx_file_stat st;
		sbx_err err = SBX_ERR_INIT;
		if (sbx_frame_decode_stat(f, &st, &err) < 0)
			die(3, "%s", err.msg);
		if (g_print_stat)
			fprintf(stderr, "size=%llu mode=%04o mtime=%lld\n", (unsigned long long)st.size,
				st.mode, (long long)st.mtime);
		return;
	}
	write_all(f->type == SBX_F_STDERR ? 2 : 1, f->payload, f->len);
	g_received += f->len;
	if (g_quit_after && g_received >= g_quit_after)
		exit(0);
	g_consumed += f->len;
	if (g_consumed >= g_credit / 2 || g_consumed >= 65536) {
		if (g_credit_delay)
			msleep(g_credit_delay);
		send_u32(SBX_F_CREDIT, g_stream, (uint32_t)g_consumed);
		g_consumed = 0;
	}
}

static void out_line(const struct sbx_frame *f)
{
	if (f->type != SBX_F_STDOUT)
		die(3, "unexpected frame type 0x%02x", f->type);
	write_all(1, f->payload, f->len);
	write_all(1, "\n", 1);
}

static void out_list(const struct sbx_frame *f)
{
	struct sbx_list_entry e;
	sbx_err err = SBX_ERR_INIT;

	if (f->type != SBX_F_STDOUT || sbx_list_entry_decode(f->payload, f->len, &e, &err) < 0)
		die(3, "bad list entry: %s", err.msg);
	out_line(f);
}

static void out_proc(const struct sbx_frame *f)
{
	struct sbx_proc_info pi;
	sbx_err err = SBX_ERR_INIT;

	if (f->type != SBX_F_STDOUT || sbx_proc_info_decode(f->payload, f->len, &pi, &err) < 0)
		die(3, "bad process entry: %s", err.msg);
	out_line(f);
}

static int cmd_get(int argc, char **argv)
{
	path_first(argc, argv);
	if (argc < 1)
		die(2, "get PATH [--credit N] [--credit-delay-ms N] [--stat]");
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--credit") && i + 1 < argc)
			g_credit = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--credit-delay-ms") && i + 1 < argc)
			g_credit_delay = atol(argv[++i]);
		else if (!strcmp(argv[i], "--stat"))
			g_print_stat = 1;
		else
			die(2, "unknown option %s", argv[i]);
	}
	send_file(SBX_FILE_READ, 0, 0, g_credit, argv[0]);
	wait_exit(1, out_bytes);
	return 0;
}

static int cmd_simple(const char *what, int argc, char **argv)
{
	uint32_t flags = 0, mode = 0, op;

	path_first(argc, argv);
	if (argc < 1)
		die(2, "%s PATH", what);
	op = !strcmp(what, "ls") ? SBX_FILE_LIST : !strcmp(what, "rm") ? SBX_FILE_DELETE : SBX_FILE_MKDIR;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-r") || !strcmp(argv[i], "-p"))
			flags |= SBX_FILE_PARENTS;
		else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
			mode = (uint32_t)strtoul(argv[++i], NULL, 8);
		else
			die(2, "unknown option %s", argv[i]);
	}
	send_file(op, flags, mode, 1 << 20, argv[0]);
	if (op == SBX_FILE_LIST) {
		/* the list is small: credit is granted line by line */
		for (;;) {
			struct sbx_frame f;
			next_frame(&f);
			if (f.type == SBX_F_STDOUT) {
				out_list(&f);
				send_u32(SBX_F_CREDIT, 1, f.len);
				continue;
			}
			roff -= SBX_FRAME_HDR + f.len; /* put it back for wait_exit */
			break;
		}
	}
	wait_exit(1, NULL);
	return 0;
}

static int cmd_procs(void)
{
	send_frame(SBX_F_PROCS, 1, NULL, 0);
	wait_exit(1, out_proc);
	return 0;
}

static int cmd_attach(int argc, char **argv)
{
	struct sbx_attach_req req = { 0 };
	const char *status_file = NULL;
	struct sbx_exit_info x;
	uint8_t b[SBX_ATTACH_LEN];

	if (argc < 1)
		die(2, "attach PID [options]");
	req.pid = (uint32_t)strtoul(argv[0], NULL, 10);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--follow")) {
			req.flags |= SBX_ATTACH_FOLLOW;
			continue;
		}
		if (!v)
			die(2, "%s needs a value", a);
		i++;
		if (!strcmp(a, "--offset"))
			req.offset = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--credit"))
			g_credit = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--credit-delay-ms"))
			g_credit_delay = atol(v);
		else if (!strcmp(a, "--status"))
			status_file = v;
		else if (!strcmp(a, "--quit-after"))
			g_quit_after = strtoull(v, NULL, 10);
		else
			die(2, "unknown option %s", a);
	}
	req.credit = g_credit;
	sbx_attach_encode(&req, b);
	send_frame(SBX_F_ATTACH, 1, b, sizeof(b));
	x = wait_exit(1, out_bytes);
	if (status_file) {
		FILE *sf = fopen(status_file, "we");
		if (sf) {
			fprintf(sf, "exit=%d signal=%u flags=%u\n", x.code, x.signal, x.flags);
			fclose(sf);
		}
	}
	return x.code;
}

static int cmd_pstdin(int argc, char **argv)
{
	uint8_t b[4 + 65536];
	size_t n = 0;
	uint32_t pid;

	if (argc != 2)
		die(2, "pstdin PID DATA|--close");
	pid = (uint32_t)strtoul(argv[0], NULL, 10);
	b[0] = pid >> 24, b[1] = pid >> 16, b[2] = pid >> 8, b[3] = pid;
	if (strcmp(argv[1], "--close")) {
		n = strlen(argv[1]);
		if (n > 65536)
			die(2, "DATA too long");
		memcpy(b + 4, argv[1], n);
	}
	send_frame(SBX_F_PSTDIN, 1, b, 4 + n);
	wait_exit(1, NULL);
	return 0;
}

static int cmd_psignal(int argc, char **argv)
{
	uint8_t b[8];

	if (argc != 2)
		die(2, "psignal PID SIG");
	sbx_psignal_encode((uint32_t)strtoul(argv[0], NULL, 10), (uint32_t)atoi(argv[1]), b);
	send_frame(SBX_F_PSIGNAL, 1, b, sizeof(b));
	wait_exit(1, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		die(2, "usage: initctl SOCK ping | initctl SOCK exec [options] -- ARGV...");
	connect_to(argv[1]);
	if (!strcmp(argv[2], "ping"))
		return cmd_ping(argc > 3 ? atoi(argv[3]) : 0);
	if (!strcmp(argv[2], "exec"))
		return cmd_exec(argc - 3, argv + 3);
	if (!strcmp(argv[2], "bench"))
		return cmd_bench(argc - 3, argv + 3);
	if (!strcmp(argv[2], "bg")) {
		/* exec --background, its options before the -- */
		char **v = calloc((size_t)argc + 2, sizeof(*v));
		if (!v)
			die(2, "out of memory");
		v[0] = "--background";
		memcpy(v + 1, argv + 3, (size_t)(argc - 3) * sizeof(*v));
		int rc = cmd_exec(argc - 2, v);
		free(v);
		return rc;
	}
	if (!strcmp(argv[2], "put"))
		return cmd_put(argc - 3, argv + 3);
	if (!strcmp(argv[2], "get"))
		return cmd_get(argc - 3, argv + 3);
	if (!strcmp(argv[2], "ls") || !strcmp(argv[2], "rm") || !strcmp(argv[2], "mkdir"))
		return cmd_simple(argv[2], argc - 3, argv + 3);
	if (!strcmp(argv[2], "procs"))
		return cmd_procs();
	if (!strcmp(argv[2], "attach"))
		return cmd_attach(argc - 3, argv + 3);
	if (!strcmp(argv[2], "pstdin"))
		return cmd_pstdin(argc - 3, argv + 3);
	if (!strcmp(argv[2], "psignal"))
		return cmd_psignal(argc - 3, argv + 3);
	die(2, "unknown command %s", argv[2]);
}
