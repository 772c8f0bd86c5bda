/*
 * fcgi-req: a small FastCGI client for the integration tests.
 *
 * It speaks the FastCGI protocol itself (no libfcgi) and sends one request the
 * way a web server would, with REQUEST_URI exactly as given: the tests drive
 * sbx-api directly with it, so nginx's normalisation of `..`, `//` and `%2F`
 * cannot hide a bug in the API's own checks. The answer is printed like
 * `curl -i`: "HTTP/1.1 NNN", the headers, a blank line, the body.
 *
 *   fcgi-req -s SOCKET -m METHOD -u RAW_URI [-H 'Name: value']...
 *            [-d BODY | -f FILE | -] [-p NAME=VALUE | -p NAME]... [-t SECONDS]
 *            [-n COUNT [-P PARALLEL]]
 *
 * SOCKET is a unix socket path, or HOST:PORT on loopback only.
 * -p NAME=VALUE adds or replaces a parameter; -p NAME removes one (to send what
 * a broken or hostile front end might).
 * -n COUNT sends the request COUNT times, PARALLEL at a time (default 1), each
 * on its own connection, and prints only each answer's status line (in the
 * order they end): a burst from one process instead of a shell, a client and
 * a filter a request (api-recovery.t).
 *
 * Exit status: 0 a response came; 1 usage; 2 connect or I/O error;
 * 3 protocol error (bad record, no END_REQUEST, no CGI header block); 4 timeout.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"

enum {
	FCGI_VERSION_1 = 1,
	FCGI_BEGIN_REQUEST = 1,
	FCGI_ABORT_REQUEST = 2,
	FCGI_END_REQUEST = 3,
	FCGI_PARAMS = 4,
	FCGI_STDIN = 5,
	FCGI_STDOUT = 6,
	FCGI_STDERR = 7,
	FCGI_DATA = 8,
	FCGI_GET_VALUES_RESULT = 10,
	FCGI_UNKNOWN_TYPE = 11,
	FCGI_RESPONDER = 1,
	FCGI_REQUEST_COMPLETE = 0,
	FCGI_HEADER_LEN = 8,
	FCGI_MAX_CONTENT = 65535,
	REQUEST_ID = 1,
	STATUS_MAX = 128, /* a Status header's value, NUL included */
};

enum { EXIT_USAGE = 1, EXIT_IO = 2, EXIT_PROTO = 3, EXIT_TIMEOUT = 4 };

/* A growable byte buffer: the request is built whole before it is sent, and
 * the response is collected whole before it is printed. */
struct buf {
	unsigned char *p;
	size_t len, cap;
};

static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("fcgi-req: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static void buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;

		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			die(EXIT_IO, "out of memory");
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void buf_free(struct buf *b)
{
	free(b->p);
}

/* Appends records of one stream type; an empty `n` writes the empty record
 * that ends the stream. Content is padded to a multiple of 8 as the
 * specification recommends. */
static void add_records(struct buf *out, int type, const unsigned char *p, size_t n)
{
	static const unsigned char zeros[8];

	do {
		size_t chunk = n > FCGI_MAX_CONTENT ? FCGI_MAX_CONTENT : n;
		unsigned pad = (8 - chunk % 8) % 8;
		unsigned char h[FCGI_HEADER_LEN] = {
			FCGI_VERSION_1, (unsigned char)type, REQUEST_ID >> 8, REQUEST_ID & 0xff,
			(unsigned char)(chunk >> 8), (unsigned char)(chunk & 0xff), (unsigned char)pad, 0,
		};

		buf_add(out, h, sizeof(h));
		buf_add(out, p, chunk);
		buf_add(out, zeros, pad);
		p += chunk;
		n -= chunk;
	} while (n > 0);
}

static void add_length(struct buf *b, size_t n)
{
	if (n < 128) {
		unsigned char c = (unsigned char)n;

		buf_add(b, &c, 1);
	} else {
		unsigned char c[4] = {
			(unsigned char)(((n >> 24) & 0x7f) | 0x80), (unsigned char)(n >> 16),
			(unsigned char)(n >> 8), (unsigned char)n,
		};

		if (n > 0x7fffffffu)
			die(EXIT_USAGE, "parameter too long");
		buf_add(b, c, 4);
	}
}

/* The parameter list: kept in order, later settings replace earlier ones. */
struct param {
	char *name, *value;
};
static struct param params[512];
static size_t nparams;

static void param_set(const char *name, const char *value)
{
	size_t i;

	for (i = 0; i < nparams; i++) {
		if (!strcmp(params[i].name, name)) {
			free(params[i].value);
			params[i].value = value ? strdup(value) : NULL;
			return;
		}
	}
	if (!value)
		return;
	if (nparams == SBX_ARRAY_LEN(params))
		die(EXIT_USAGE, "too many parameters");
	params[nparams].name = strdup(name);
	params[nparams].value = strdup(value);
	if (!params[nparams].name || !params[nparams].value)
		die(EXIT_IO, "out of memory");
	nparams++;
}

static void read_all_fd(int fd, struct buf *b, const char *what)
{
	unsigned char tmp[65536];

	for (;;) {
		ssize_t n = read(fd, tmp, sizeof(tmp));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die(EXIT_IO, "reading %s: %s", what, strerror(errno));
		if (n == 0)
			return;
		buf_add(b, tmp, (size_t)n);
	}
}

static int remaining_ms(int64_t deadline)
{
	int64_t left = deadline - sbx_now_ms();

	if (left <= 0)
		die(EXIT_TIMEOUT, "timed out");
	return left > 1000000 ? 1000000 : (int)left;
}

/* Only loopback may be a target: the tests never send traffic anywhere else. */
static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

static void wait_connected(int fd, int64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int soerr = 0;
	socklen_t len = sizeof(soerr);

	for (;;) {
		int r = poll(&pfd, 1, remaining_ms(deadline));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die(EXIT_IO, "poll: %s", strerror(errno));
		if (r > 0)
			break;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		die(EXIT_IO, "getsockopt: %s", strerror(errno));
	if (soerr)
		die(EXIT_IO, "connect: %s", strerror(soerr));
}

static int connect_unix(const char *path, int64_t deadline)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sun.sun_path))
		die(EXIT_USAGE, "socket path too long: %s", path);
	strcpy(sun.sun_path, path);
	for (;;) {
		cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

		if (fd < 0)
			die(EXIT_IO, "socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			return sbx_steal_fd(&fd);
		if (errno == EINPROGRESS) {
			wait_connected(fd, deadline);
			return sbx_steal_fd(&fd);
		}
		/* A full listen backlog: the pool is busy, try again until the deadline. */
		if (errno != EAGAIN)
			die(EXIT_IO, "connect %s: %s", path, strerror(errno));
		remaining_ms(deadline);
		usleep(10000);
	}
}

static int connect_tcp(const char *spec, int64_t deadline)
{
	cleanup_free char *host = strdup(spec);
	char *port = host ? strrchr(host, ':') : NULL;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST }, *ai;
	int r;

	if (!port)
		die(EXIT_USAGE, "bad socket %s (a path, or HOST:PORT)", spec);
	*port++ = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	r = getaddrinfo(host, port, &hints, &ai);
	if (r)
		die(EXIT_USAGE, "bad address %s: %s", spec, gai_strerror(r));
	if (!is_loopback(ai->ai_addr)) {
		freeaddrinfo(ai);
		die(EXIT_USAGE, "refusing non-loopback address %s", spec);
	}
	cleanup_close int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die(EXIT_IO, "socket: %s", strerror(errno));
	r = connect(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (r < 0 && errno != EINPROGRESS)
		die(EXIT_IO, "connect %s: %s", spec, strerror(errno));
	if (r < 0)
		wait_connected(fd, deadline);
	return sbx_steal_fd(&fd);
}

/* Parses the header block of the CGI response: its status ("200" when there
 * is no Status header) into status, the other headers into hdrs (CRLF after
 * each). Returns the offset of the body. */
static size_t response_head(const struct buf *out, char status[STATUS_MAX], struct buf *hdrs)
{
	const char *p = (const char *)out->p, *end = p + out->len, *line = p;
	size_t body = 0;

	strcpy(status, "200");

	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t len;

		if (!nl)
			break;
		len = (size_t)(nl - line);
		if (len && line[len - 1] == '\r')
			len--;
		if (len == 0) {
			body = (size_t)(nl + 1 - p);
			break;
		}
		if (len > 7 && !strncasecmp(line, "Status:", 7)) {
			const char *v = line + 7;
			size_t vl = len - 7;

			while (vl && (*v == ' ' || *v == '\t'))
				v++, vl--;
			if (vl >= STATUS_MAX)
				vl = STATUS_MAX - 1;
			memcpy(status, v, vl);
			status[vl] = '\0';
		} else if (hdrs) {
			buf_add(hdrs, line, len);
			buf_add(hdrs, "\r\n", 2);
		}
		line = nl + 1;
	}
	if (!body) {
		fwrite(out->p, 1, out->len, stderr);
		die(EXIT_PROTO, "no CGI header block in the response (%zu bytes of STDOUT)", out->len);
	}
	if (strlen(status) < 3 || !isdigit((unsigned char)status[0]) ||
	    !isdigit((unsigned char)status[1]) || !isdigit((unsigned char)status[2]) ||
	    (status[3] && status[3] != ' '))
		die(EXIT_PROTO, "bad Status header: '%s'", status);
	return body;
}

/* Prints the head of the response the way `curl -i` does. Returns the offset
 * of the body. */
static size_t print_response_head(const struct buf *out)
{
	char status[STATUS_MAX];
	struct buf hdrs = { 0 };
	size_t body = response_head(out, status, &hdrs);

	printf("HTTP/1.1 %s\r\n", status);
	fwrite(hdrs.p, 1, hdrs.len, stdout);
	fputs("\r\n", stdout);
	buf_free(&hdrs);
	return body;
}

/* One request on its own connection: sends req, collects the STDOUT records
 * into out. Dies (exit status above) on any error. */
static void exchange(const char *sock, const struct buf *req, int64_t deadline, struct buf *out)
{
	struct buf inrec = { 0 };
	cleanup_close int fd = strchr(sock, '/') ? connect_unix(sock, deadline)
						 : connect_tcp(sock, deadline);

	/* Write and read at the same time: the server may answer (e.g. 413) and
	 * close before it has read the whole body; then writing stops and the
	 * answer is still read. */
	size_t sent = 0;
	bool writing = true, ended = false, eof = false;
	uint32_t app_status = 0;
	int proto_status = -1;

	while (!ended && !eof) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN | (writing ? POLLOUT : 0) };
		int r = poll(&pfd, 1, remaining_ms(deadline));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die(EXIT_IO, "poll: %s", strerror(errno));
		if (r == 0)
			continue;
		if (writing && (pfd.revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t n = send(fd, req->p + sent, req->len - sent, MSG_NOSIGNAL);

			if (n > 0) {
				sent += (size_t)n;
				if (sent == req->len)
					writing = false;
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				if (errno != EPIPE && errno != ECONNRESET)
					die(EXIT_IO, "send: %s", strerror(errno));
				writing = false;
				fprintf(stderr, "fcgi-req: server closed while %zu of %zu request bytes "
						"were unsent\n", req->len - sent, req->len);
			}
		}
		if (pfd.revents & (POLLIN | POLLERR | POLLHUP)) {
			unsigned char tmp[65536];
			ssize_t n = recv(fd, tmp, sizeof(tmp), 0);

			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (n < 0 && errno != ECONNRESET)
				die(EXIT_IO, "recv: %s", strerror(errno));
			if (n <= 0) {
				eof = true;
				n = 0;
			}
			buf_add(&inrec, tmp, (size_t)n);
			/* Consume every complete record; a partial one waits for more bytes. */
			size_t off = 0;

			while (!ended && inrec.len - off >= FCGI_HEADER_LEN) {
				const unsigned char *h = inrec.p + off;
				size_t clen = (size_t)h[4] << 8 | h[5], plen = h[6];
				unsigned id = (unsigned)h[2] << 8 | h[3];
				const unsigned char *content = h + FCGI_HEADER_LEN;

				if (h[0] != FCGI_VERSION_1)
					die(EXIT_PROTO, "record with version %u", h[0]);
				if (inrec.len - off < FCGI_HEADER_LEN + clen + plen)
					break;
				if (id != REQUEST_ID && h[1] != FCGI_GET_VALUES_RESULT &&
				    h[1] != FCGI_UNKNOWN_TYPE)
					die(EXIT_PROTO, "record for request id %u", id);
				switch (h[1]) {
				case FCGI_STDOUT:
					buf_add(out, content, clen);
					break;
				case FCGI_STDERR:
					if (!clen)
						break;
					fputs("fcgi-req: server STDERR: ", stderr);
					fwrite(content, 1, clen, stderr);
					if (clen && content[clen - 1] != '\n')
						fputc('\n', stderr);
					break;
				case FCGI_END_REQUEST:
					if (clen < 8)
						die(EXIT_PROTO, "short END_REQUEST (%zu bytes)", clen);
					app_status = (uint32_t)content[0] << 24 | (uint32_t)content[1] << 16 |
						     (uint32_t)content[2] << 8 | content[3];
					proto_status = content[4];
					ended = true;
					break;
				case FCGI_GET_VALUES_RESULT:
				case FCGI_UNKNOWN_TYPE:
					break;
				default:
					die(EXIT_PROTO, "unexpected record type %u", h[1]);
				}
				off += FCGI_HEADER_LEN + clen + plen;
			}
			if (off) {
				memmove(inrec.p, inrec.p + off, inrec.len - off);
				inrec.len -= off;
			}
		}
	}
	if (!ended)
		die(EXIT_PROTO, "connection closed without END_REQUEST (%zu bytes of STDOUT, "
				"%zu of a partial record)", out->len, inrec.len);
	if (proto_status != FCGI_REQUEST_COMPLETE)
		die(EXIT_PROTO, "END_REQUEST protocol status %d", proto_status);
	if (app_status)
		fprintf(stderr, "fcgi-req: application status %u\n", app_status);
	buf_free(&inrec);
}

/* -n: COUNT requests, PARALLEL processes sending them one after another,
 * each answer's status line written whole. The exit status is the first
 * failing process's (0 when every request got an answer). */
static int burst(const char *sock, const struct buf *req, int64_t deadline, long count, long par)
{
	pid_t pids[64];
	int rc = 0;

	fflush(NULL);
	for (long k = 0; k < par; k++) {
		pids[k] = fork();
		if (pids[k] < 0)
			die(EXIT_IO, "fork: %s", strerror(errno));
		if (pids[k] == 0) {
			for (long i = k; i < count; i += par) {
				struct buf out = { 0 };
				char status[STATUS_MAX], line[STATUS_MAX + 32];
				int n;

				exchange(sock, req, deadline, &out);
				response_head(&out, status, NULL);
				n = snprintf(line, sizeof(line), "HTTP/1.1 %s\r\n", status);
				if (write(STDOUT_FILENO, line, (size_t)n) != n)
					die(EXIT_IO, "writing a status line: %s", strerror(errno));
				buf_free(&out);
			}
			_exit(0);
		}
	}
	for (long k = 0; k < par; k++) {
		int st;

		while (waitpid(pids[k], &st, 0) < 0)
			if (errno != EINTR)
				die(EXIT_IO, "waitpid: %s", strerror(errno));
		if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
			rc = WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_IO;
	}
	return rc;
}

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fputs("usage: fcgi-req -s SOCKET -m METHOD -u RAW_URI [-H 'Name: value']...\n"
	      "                [-d BODY | -f FILE | -] [-p NAME=VALUE | -p NAME]... [-t SECONDS]\n"
	      "                [-n COUNT [-P PARALLEL]]\n",
	      stderr);
	exit(EXIT_USAGE);
}

int main(int argc, char **argv)
{
	const char *sock = NULL, *method = NULL, *uri = NULL, *file = NULL, *data = NULL;
	const char *headers[256], *overrides[256];
	size_t nheaders = 0, noverrides = 0;
	bool from_stdin = false, have_body = false;
	long timeout = 30, count = 0, par = 1;
	struct buf body = { 0 }, req = { 0 }, pbuf = { 0 }, out = { 0 };
	int c;

	while ((c = getopt(argc, argv, "s:m:u:H:d:f:p:t:n:P:h")) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'm': method = optarg; break;
		case 'u': uri = optarg; break;
		case 'H':
			if (nheaders == SBX_ARRAY_LEN(headers))
				die(EXIT_USAGE, "too many headers");
			headers[nheaders++] = optarg;
			break;
		case 'd': data = optarg; have_body = true; break;
		case 'f': file = optarg; have_body = true; break;
		case 'p':
			if (noverrides == SBX_ARRAY_LEN(overrides))
				die(EXIT_USAGE, "too many -p");
			overrides[noverrides++] = optarg;
			break;
		case 't': {
			char *end;

			timeout = strtol(optarg, &end, 10);
			if (*end || timeout < 1 || timeout > 86400)
				die(EXIT_USAGE, "bad timeout %s", optarg);
			break;
		}
		case 'n':
		case 'P': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v < 1 || v > (c == 'n' ? 100000 : 64))
				die(EXIT_USAGE, "bad -%c %s (1..%d)", c, optarg, c == 'n' ? 100000 : 64);
			if (c == 'n')
				count = v;
			else
				par = v;
			break;
		}
		default: usage();
		}
	}
	if (optind < argc) {
		if (optind + 1 != argc || strcmp(argv[optind], "-"))
			usage();
		from_stdin = have_body = true;
	}
	if (!sock || !method || !uri || (!!data + !!file + from_stdin) > 1)
		usage();

	int64_t deadline = sbx_now_ms() + timeout * 1000;

	if (data)
		buf_add(&body, data, strlen(data));
	else if (file) {
		cleanup_close int fd = open(file, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			die(EXIT_USAGE, "%s: %s", file, strerror(errno));
		read_all_fd(fd, &body, file);
	} else if (from_stdin)
		read_all_fd(STDIN_FILENO, &body, "standard input");

	/* What nginx's fastcgi_params send, with the raw request line. */
	const char *q = strchr(uri, '?');
	char lenbuf[32];

	snprintf(lenbuf, sizeof(lenbuf), "%zu", body.len);
	param_set("GATEWAY_INTERFACE", "CGI/1.1");
	param_set("SERVER_SOFTWARE", "fcgi-req");
	param_set("SERVER_PROTOCOL", "HTTP/1.1");
	param_set("SERVER_NAME", "127.0.0.1");
	param_set("SERVER_ADDR", "127.0.0.1");
	param_set("SERVER_PORT", "443");
	param_set("HTTPS", "on");
	param_set("REQUEST_SCHEME", "https");
	param_set("REMOTE_ADDR", "127.0.0.1");
	param_set("REMOTE_PORT", "40000");
	param_set("REQUEST_METHOD", method);
	param_set("REQUEST_URI", uri);
	/* nginx's fastcgi.conf sends an empty SCRIPT_NAME: routing is on REQUEST_URI. */
	param_set("SCRIPT_NAME", "");
	param_set("QUERY_STRING", q ? q + 1 : "");
	param_set("CONTENT_TYPE", "");
	param_set("CONTENT_LENGTH", have_body ? lenbuf : "");
	for (size_t i = 0; i < nheaders; i++) {
		const char *colon = strchr(headers[i], ':');
		char name[256] = "HTTP_";
		size_t nl, j;
		const char *v;

		if (!colon || colon == headers[i] || (size_t)(colon - headers[i]) > sizeof(name) - 6)
			die(EXIT_USAGE, "bad header '%s' (want 'Name: value')", headers[i]);
		nl = (size_t)(colon - headers[i]);
		for (j = 0; j < nl; j++) {
			unsigned char ch = (unsigned char)headers[i][j];

			name[5 + j] = ch == '-' ? '_' : (char)toupper(ch);
		}
		name[5 + nl] = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		param_set(name, v);
		/* nginx passes these two both as headers and as the CGI variables. */
		if (!strcmp(name, "HTTP_CONTENT_TYPE"))
			param_set("CONTENT_TYPE", v);
		else if (!strcmp(name, "HTTP_CONTENT_LENGTH"))
			param_set("CONTENT_LENGTH", v);
	}
	for (size_t i = 0; i < noverrides; i++) {
		cleanup_free char *name = strdup(overrides[i]);
		char *eq = name ? strchr(name, '=') : NULL;

		if (!name)
			die(EXIT_IO, "out of memory");
		if (eq)
			*eq = '\0';
		if (!*name)
			die(EXIT_USAGE, "bad -p '%s'", overrides[i]);
		param_set(name, eq ? eq + 1 : NULL);
	}

	/* The request: BEGIN_REQUEST (responder, connection closed after the
	 * answer), PARAMS, empty PARAMS, STDIN in chunks, empty STDIN. */
	{
		unsigned char begin[8] = { 0, FCGI_RESPONDER, 0, 0, 0, 0, 0, 0 };

		add_records(&req, FCGI_BEGIN_REQUEST, begin, sizeof(begin));
	}
	for (size_t i = 0; i < nparams; i++) {
		if (!params[i].value)
			continue;
		add_length(&pbuf, strlen(params[i].name));
		add_length(&pbuf, strlen(params[i].value));
		buf_add(&pbuf, params[i].name, strlen(params[i].name));
		buf_add(&pbuf, params[i].value, strlen(params[i].value));
	}
	if (pbuf.len)
		add_records(&req, FCGI_PARAMS, pbuf.p, pbuf.len);
	add_records(&req, FCGI_PARAMS, NULL, 0);
	if (body.len)
		add_records(&req, FCGI_STDIN, body.p, body.len);
	add_records(&req, FCGI_STDIN, NULL, 0);

	int rc = 0;

	if (count) {
		rc = burst(sock, &req, deadline, count, par < count ? par : count);
	} else {
		exchange(sock, &req, deadline, &out);

		size_t off = print_response_head(&out);

		fwrite(out.p + off, 1, out.len - off, stdout);
		if (fflush(stdout) == EOF)
			die(EXIT_IO, "writing the response: %s", strerror(errno));
	}
	buf_free(&body);
	buf_free(&req);
	buf_free(&pbuf);
	buf_free(&out);
	for (size_t i = 0; i < nparams; i++) {
		free(params[i].name);
		free(params[i].value);
	}
	return rc;
}
