#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include "log.h"

static char log_prog[32] = "sbx";
static char log_path[512];
static int log_fd = 2;
static int log_min = SBX_LOG_INFO;
static char req_id[72];

int sbx_log_parse_level(const char *s)
{
	static const char *names[] = { "debug", "info", "warn", "error" };

	for (int i = 0; i < 4; i++)
		if (s && strcasecmp(s, names[i]) == 0)
			return i;
	return -1;
}

int sbx_log_init(const char *prog, const char *path, const char *level)
{
	int lv = sbx_log_parse_level(level ? level : "info");

	if (lv < 0)
		return -1;
	log_min = lv;
	snprintf(log_prog, sizeof(log_prog), "%s", prog);
	snprintf(log_path, sizeof(log_path), "%s", path ? path : "");
	sbx_log_reopen();
	return log_fd == -1 ? -1 : 0;
}

void sbx_log_reopen(void)
{
	int fd;

	if (!log_path[0]) {
		log_fd = 2;
		return;
	}
	fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		/* keep whatever we had: losing logs is better than dying */
		if (log_fd == -1)
			log_fd = 2;
		return;
	}
	if (log_fd > 2)
		close(log_fd);
	log_fd = fd;
}

void sbx_log_set_request_id(const char *id)
{
	snprintf(req_id, sizeof(req_id), "%s", id ? id : "");
}

const char *sbx_log_request_id(void)
{
	return req_id;
}

static void vlog(int level, int with_errno, const char *fmt, va_list ap)
{
	static const char *tags[] = { "debug", "info", "warn", "error" };
	char line[2048];
	int saved = errno;
	struct timespec ts;
	struct tm tm;
	size_t n;
	int r;

	if (level < log_min)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	r = snprintf(line + n, sizeof(line) - n, ".%03ldZ %s[%d] %s%s%s: ",
		     ts.tv_nsec / 1000000, log_prog, (int)getpid(), tags[level],
		     req_id[0] ? " req=" : "", req_id);
	if (r > 0 && (size_t)r < sizeof(line) - n)
		n += r;
	r = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	if (r > 0)
		n = (size_t)r < sizeof(line) - n ? n + r : sizeof(line) - 1;
	if (with_errno && n < sizeof(line) - 1) {
		r = snprintf(line + n, sizeof(line) - n, ": %s", strerror(saved));
		if (r > 0)
			n = (size_t)r < sizeof(line) - n ? n + r : sizeof(line) - 1;
	}
	/* one write per line, so lines from many processes never interleave */
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(log_fd, line, n) < 0) {
		/* nothing sensible to do */
	}
	errno = saved;
}

/* The printf-style entry points: level, whether errno's text is added,
 * and what follows the line (fatal and fatalx exit). */
#define LOGFN(name, lvl, en, then)               \
	void name(const char *fmt, ...)          \
	{                                        \
		va_list ap;                      \
		va_start(ap, fmt);               \
		vlog(lvl, en, fmt, ap);          \
		va_end(ap);                      \
		then;                            \
	}
LOGFN(log_debug, SBX_LOG_DEBUG, 0, (void)0)
LOGFN(log_info, SBX_LOG_INFO, 0, (void)0)
LOGFN(log_warn, SBX_LOG_WARN, 1, (void)0)
LOGFN(log_warnx, SBX_LOG_WARN, 0, (void)0)
LOGFN(log_error, SBX_LOG_ERROR, 0, (void)0)
LOGFN(fatal, SBX_LOG_ERROR, 1, exit(1))
LOGFN(fatalx, SBX_LOG_ERROR, 0, exit(1))
