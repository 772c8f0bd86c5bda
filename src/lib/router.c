#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "page.h"
#include "router.h"

static const struct {
	const char *name;
	unsigned methods;
} route_info[SBX_R__COUNT] = {
	[SBX_R_NONE] = { "none", 0 },
	[SBX_R_HEALTHZ] = { "healthz", SBX_M_GET },
	[SBX_R_METRICS] = { "metrics", SBX_M_GET },
	[SBX_R_TEMPLATES] = { "templates", SBX_M_GET },
	[SBX_R_REGIONS] = { "regions", SBX_M_GET },
	[SBX_R_SANDBOXES] = { "sandboxes", SBX_M_GET | SBX_M_POST },
	[SBX_R_SANDBOX] = { "sandbox", SBX_M_GET | SBX_M_DELETE },
	[SBX_R_SANDBOX_WAIT] = { "sandbox_wait", SBX_M_GET },
	[SBX_R_SANDBOX_PAUSE] = { "sandbox_pause", SBX_M_POST },
	[SBX_R_SANDBOX_RESUME] = { "sandbox_resume", SBX_M_POST },
	[SBX_R_SANDBOX_TIMEOUT] = { "sandbox_timeout", SBX_M_POST },
	[SBX_R_SANDBOX_EGRESS] = { "sandbox_egress", SBX_M_PUT },
	[SBX_R_SANDBOX_STATS] = { "sandbox_stats", SBX_M_GET },
	[SBX_R_EXEC] = { "exec", SBX_M_POST },
	[SBX_R_CODE] = { "code", SBX_M_POST },
	[SBX_R_PROCESSES] = { "processes", SBX_M_GET },
	[SBX_R_PROCESS] = { "process", SBX_M_GET },
	[SBX_R_PROCESS_OUTPUT] = { "process_output", SBX_M_GET },
	[SBX_R_PROCESS_STDIN] = { "process_stdin", SBX_M_POST },
	[SBX_R_PROCESS_SIGNAL] = { "process_signal", SBX_M_POST },
	[SBX_R_PROCESS_RESIZE] = { "process_resize", SBX_M_POST },
	[SBX_R_FILES_BATCH] = { "files_batch", SBX_M_POST },
	[SBX_R_FILE] = { "file", SBX_M_GET | SBX_M_PUT | SBX_M_DELETE },
	[SBX_R_SANDBOX_SNAPSHOTS] = { "sandbox_snapshots", SBX_M_GET | SBX_M_POST },
	[SBX_R_SNAPSHOTS] = { "snapshots", SBX_M_GET },
	[SBX_R_SNAPSHOT] = { "snapshot", SBX_M_DELETE },
	[SBX_R_VOLUMES] = { "volumes", SBX_M_GET | SBX_M_POST },
	[SBX_R_VOLUME] = { "volume", SBX_M_GET | SBX_M_DELETE },
	[SBX_R_USAGE] = { "usage", SBX_M_GET },
};

const char *sbx_route_name(enum sbx_route r)
{
	return r < SBX_R__COUNT ? route_info[r].name : "?";
}

void sbx_route_allow_header(unsigned allowed, char *out, size_t outsz)
{
	static const struct { unsigned bit; const char *name; } m[] = {
		{ SBX_M_GET, "GET" }, { SBX_M_POST, "POST" }, { SBX_M_PUT, "PUT" },
		{ SBX_M_DELETE, "DELETE" }, { SBX_M_HEAD, "HEAD" },
	};
	size_t n = 0;

	if (!outsz)
		return;
	out[0] = 0;
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		if (!(allowed & m[i].bit))
			continue;
		int r = snprintf(out + n, outsz - n, "%s%s", n ? ", " : "", m[i].name);
		if (r < 0 || (size_t)r >= outsz - n)
			return;
		n += (size_t)r;
	}
}

static unsigned method_bit(const char *m)
{
	if (!m)
		return 0;
	if (!strcmp(m, "GET"))
		return SBX_M_GET;
	if (!strcmp(m, "POST"))
		return SBX_M_POST;
	if (!strcmp(m, "PUT"))
		return SBX_M_PUT;
	if (!strcmp(m, "DELETE"))
		return SBX_M_DELETE;
	if (!strcmp(m, "HEAD"))
		return SBX_M_HEAD;
	return 0;
}

/* Splits path (after the prefix) into at most `max` raw segments. */
struct seg {
	const char *p;
	size_t n;
};

static int seg_is(const struct seg *s, const char *word)
{
	return s->n == strlen(word) && memcmp(s->p, word, s->n) == 0;
}

static int take_id(const struct seg *s, const char *what, char out[SBX_ID_LEN + 1], sbx_err *err)
{
	if (!sbx_id_valid_n(s->p, s->n))
		return sbx_err_set(err, 400, "invalid_id", "Invalid %s id", what);
	memcpy(out, s->p, SBX_ID_LEN);
	out[SBX_ID_LEN] = 0;
	return 0;
}

static int take_pid(const struct seg *s, long *out, sbx_err *err)
{
	long v = 0;

	if (s->n == 0 || s->n > 10)
		return sbx_err_set(err, 400, "invalid_pid", "Invalid process id");
	for (size_t i = 0; i < s->n; i++) {
		if (s->p[i] < '0' || s->p[i] > '9')
			return sbx_err_set(err, 400, "invalid_pid", "Invalid process id");
		v = v * 10 + (s->p[i] - '0');
	}
	if (v < 1 || v > 2147483647L)
		return sbx_err_set(err, 400, "invalid_pid", "Invalid process id");
	*out = v;
	return 0;
}

/* The file path after ".../files": decoded, '/'-led, with empty segments
 * folded; encoded slashes, NUL and ".." are refused, never interpreted. */
static int take_file_path(const char *raw, size_t n, char *out, size_t outsz, sbx_err *err)
{
	size_t o = 0;

	for (size_t i = 0; i + 2 < n; i++)
		if (raw[i] == '%' && raw[i + 1] == '2' && (raw[i + 2] == 'F' || raw[i + 2] == 'f'))
			return sbx_err_set(err, 400, "invalid_path", "Encoded slash (%%2F) is not allowed in a path");
	{
		char *dec = malloc(n + 2);
		size_t d;
		if (!dec)
			return sbx_err_set(err, 500, "nomem", "out of memory");
		/* '+' is literal in paths: decode without turning it into a space */
		d = 0;
		for (size_t i = 0; i < n; i++) {
			if (raw[i] == '%') {
				char tmp[2];
				if (i + 2 >= n || sbx_url_decode(raw + i, 3, tmp, sizeof(tmp)) < 0) {
					free(dec);
					return sbx_err_set(err, 400, "invalid_path",
							   "Malformed percent-encoding (or NUL) in path");
				}
				dec[d++] = tmp[0];
				i += 2;
			} else {
				dec[d++] = raw[i];
			}
		}
		dec[d] = 0;
		out[o++] = '/';
		for (size_t i = 0; i < d;) {
			size_t j = i;
			while (j < d && dec[j] != '/')
				j++;
			if (j > i) {
				if ((j - i == 2 && dec[i] == '.' && dec[i + 1] == '.')) {
					free(dec);
					return sbx_err_set(err, 400, "invalid_path", "Path must not contain '..'");
				}
				if (!(j - i == 1 && dec[i] == '.')) {
					if (o > 1) {
						if (o + 1 >= outsz)
							goto toolong;
						out[o++] = '/';
					}
					if (o + (j - i) >= outsz)
						goto toolong;
					memcpy(out + o, dec + i, j - i);
					o += j - i;
				}
			}
			i = j + 1;
		}
		out[o] = 0;
		free(dec);
		return 0;
toolong:
		free(dec);
		return sbx_err_set(err, 400, "invalid_path", "Path is too long");
	}
}

int sbx_route_match(const char *method, const char *uri, struct sbx_route_match *m, sbx_err *err)
{
	struct seg s[8];
	const char *path, *q, *end;
	size_t plen;
	int ns = 0;
	enum sbx_route r = SBX_R_NONE;
	const char *files_raw = NULL;

	memset(m, 0, sizeof(*m));
	m->query = "";
	m->method = method_bit(method);
	if (!uri || uri[0] != '/')
		return sbx_err_set(err, 400, "invalid_path", "Invalid request path");
	q = strchr(uri, '?');
	end = q ? q : uri + strlen(uri);
	if (q)
		m->query = q + 1;
	path = uri;
	plen = (size_t)(end - uri);
	if (plen >= 3 && memcmp(path, "/v1", 3) == 0 && (plen == 3 || path[3] == '/')) {
		m->v1 = 1;
		path += 3;
		plen -= 3;
	}
	if (plen == 0)
		goto notfound;
	/* split; a single trailing slash is tolerated outside file paths */
	{
		const char *p = path + 1, *pe = path + plen;
		while (p <= pe && ns < 8) {
			const char *slash = memchr(p, '/', (size_t)(pe - p));
			const char *se = slash ? slash : pe;
			s[ns].p = p;
			s[ns].n = (size_t)(se - p);
			ns++;
			/* everything after sandboxes/{id}/files/ is one raw path */
			if (ns == 3 && seg_is(&s[0], "sandboxes") && seg_is(&s[2], "files")) {
				files_raw = slash ? slash + 1 : pe;
				break;
			}
			if (!slash)
				break;
			p = slash + 1;
		}
		if (!files_raw && ns == 8)
			goto notfound;
		if (!files_raw && ns > 1 && s[ns - 1].n == 0)
			ns--; /* trailing slash */
		for (int i = 0; i < ns; i++)
			if (s[i].n == 0 && !(files_raw && i == 2))
				goto notfound;
	}

	if (ns == 1 && seg_is(&s[0], "healthz"))
		r = SBX_R_HEALTHZ;
	else if (ns == 1 && seg_is(&s[0], "metrics"))
		r = SBX_R_METRICS;
	else if (ns == 1 && seg_is(&s[0], "usage"))
		r = SBX_R_USAGE;
	else if (ns == 2 && seg_is(&s[0], "sandbox") && seg_is(&s[1], "templates"))
		r = SBX_R_TEMPLATES;
	else if (ns == 1 && seg_is(&s[0], "volumes"))
		r = SBX_R_VOLUMES;
	else if (ns == 2 && seg_is(&s[0], "volumes")) {
		if (take_id(&s[1], "volume", m->id, err) < 0)
			return -1;
		r = SBX_R_VOLUME;
	} else if (ns >= 1 && seg_is(&s[0], "sandboxes")) {
		if (ns == 1)
			r = SBX_R_SANDBOXES;
		else if (ns == 2 && seg_is(&s[1], "regions"))
			r = SBX_R_REGIONS;
		else if (ns == 2 && seg_is(&s[1], "snapshots"))
			r = SBX_R_SNAPSHOTS;
		else if (ns == 3 && seg_is(&s[1], "snapshots")) {
			if (take_id(&s[2], "snapshot", m->id, err) < 0)
				return -1;
			r = SBX_R_SNAPSHOT;
		} else if (seg_is(&s[1], "regions") || seg_is(&s[1], "snapshots")) {
			goto notfound; /* words, not ids: a deeper path under them does not exist */
		} else {
			if (take_id(&s[1], "sandbox", m->id, err) < 0)
				return -1;
			if (ns == 2)
				r = SBX_R_SANDBOX;
			else if (files_raw) {
				size_t fl = (size_t)(path + plen - files_raw);
				if (fl == 5 && memcmp(files_raw, "batch", 5) == 0 && m->method == SBX_M_POST)
					r = SBX_R_FILES_BATCH;
				else {
					if (take_file_path(files_raw, fl, m->path, sizeof(m->path), err) < 0)
						return -1;
					r = SBX_R_FILE;
				}
			} else if (ns == 3) {
				static const struct { const char *w; enum sbx_route r; } sub[] = {
					{ "wait", SBX_R_SANDBOX_WAIT }, { "pause", SBX_R_SANDBOX_PAUSE },
					{ "resume", SBX_R_SANDBOX_RESUME }, { "timeout", SBX_R_SANDBOX_TIMEOUT },
					{ "egress", SBX_R_SANDBOX_EGRESS }, { "stats", SBX_R_SANDBOX_STATS },
					{ "exec", SBX_R_EXEC }, { "code", SBX_R_CODE },
					{ "processes", SBX_R_PROCESSES }, { "snapshots", SBX_R_SANDBOX_SNAPSHOTS },
				};
				for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++)
					if (seg_is(&s[2], sub[i].w))
						r = sub[i].r;
			} else if (ns >= 4 && ns <= 5 && seg_is(&s[2], "processes")) {
				if (take_pid(&s[3], &m->pid, err) < 0)
					return -1;
				if (ns == 4)
					r = SBX_R_PROCESS;
				else if (seg_is(&s[4], "output"))
					r = SBX_R_PROCESS_OUTPUT;
				else if (seg_is(&s[4], "stdin"))
					r = SBX_R_PROCESS_STDIN;
				else if (seg_is(&s[4], "signal"))
					r = SBX_R_PROCESS_SIGNAL;
				else if (seg_is(&s[4], "resize"))
					r = SBX_R_PROCESS_RESIZE;
			}
		}
	}
	if (r == SBX_R_NONE)
		goto notfound;
	m->route = r;
	m->allowed = route_info[r].methods;
	if (!(m->method & m->allowed)) {
		return sbx_err_set(err, 405, "method_not_allowed", "Method %s is not allowed here",
				   m->method ? method : "(unknown)");
	}
	return 0;
notfound:
	return sbx_err_set(err, 404, "not_found", "Not found");
}
