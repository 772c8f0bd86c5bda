/* Proves: every route of the public API is matched at the root and under /v1,
 * with the right methods (405 names the allowed ones, 404 for unknown paths);
 * the query string is split off; bad sandbox/snapshot/volume ids are 400s
 * before any lookup; file paths are decoded with '+' kept literal, always
 * start with '/', and %2F, %00, bad escapes and '..' segments are refused
 * with 400; a single trailing slash is tolerated; process pids are parsed
 * and out-of-range pids refused. */
#include "config.h"
#include <string.h>
#include "router.h"
#include "../tap.h"

#define ID  "0123456789abcdef01234567"
#define ID2 "fedcba9876543210fedcba98"

static struct sbx_route_match m;
static sbx_err err;

static int match(const char *method, const char *uri)
{
	sbx_err_clear(&err);
	return sbx_route_match(method, uri, &m, &err);
}

/* method + uri match `want`, at the root and under /v1 */
static void route_ok(const char *method, const char *uri, enum sbx_route want)
{
	char v1[512];
	int r;

	r = match(method, uri);
	ok(r == 0 && m.route == want && !m.v1, "%s %s -> %s", method, uri, sbx_route_name(want));
	if (r != 0)
		diag("error %d: %s", err.http, err.msg);
	else if (m.route != want)
		diag("got route %s", sbx_route_name(m.route));
	snprintf(v1, sizeof(v1), "/v1%s", uri);
	r = match(method, v1);
	ok(r == 0 && m.route == want && m.v1 == 1, "%s %s -> %s (v1 set)", method, v1,
	   sbx_route_name(want));
}

static void route_err(const char *method, const char *uri, int http, const char *msg)
{
	int r = match(method, uri);

	ok(r == -1 && err.http == http && (!msg || strstr(err.msg, msg)), "%s %s -> %d%s%s", method, uri,
	   http, msg ? " " : "", msg ? msg : "");
	if (r == 0)
		diag("matched route %s path '%s'", sbx_route_name(m.route), m.path);
	else if (err.http != http || (msg && !strstr(err.msg, msg)))
		diag("got %d: %s", err.http, err.msg);
}

static void file_path(const char *method, const char *rest, const char *want)
{
	static char uri[8192]; /* m.query points into it after we return */
	int r;

	snprintf(uri, sizeof(uri), "/sandboxes/" ID "/files%s", rest);
	r = match(method, uri);
	ok(r == 0 && m.route == SBX_R_FILE && !strcmp(m.path, want), "%s .../files%s -> path '%s'",
	   method, rest, want);
	if (r != 0)
		diag("error %d: %s", err.http, err.msg);
	else if (strcmp(m.path, want))
		diag("got path '%s' route %s", m.path, sbx_route_name(m.route));
}

int main(void)
{
	char buf[8192];

	/* every route, at the root and under /v1 */
	route_ok("GET", "/healthz", SBX_R_HEALTHZ);
	route_ok("GET", "/metrics", SBX_R_METRICS);
	route_ok("GET", "/sandbox/templates", SBX_R_TEMPLATES);
	route_ok("GET", "/sandboxes/regions", SBX_R_REGIONS);
	route_ok("GET", "/sandboxes", SBX_R_SANDBOXES);
	route_ok("POST", "/sandboxes", SBX_R_SANDBOXES);
	route_ok("GET", "/sandboxes/" ID, SBX_R_SANDBOX);
	route_ok("DELETE", "/sandboxes/" ID, SBX_R_SANDBOX);
	route_ok("GET", "/sandboxes/" ID "/wait", SBX_R_SANDBOX_WAIT);
	route_ok("POST", "/sandboxes/" ID "/pause", SBX_R_SANDBOX_PAUSE);
	route_ok("POST", "/sandboxes/" ID "/resume", SBX_R_SANDBOX_RESUME);
	route_ok("POST", "/sandboxes/" ID "/timeout", SBX_R_SANDBOX_TIMEOUT);
	route_ok("PUT", "/sandboxes/" ID "/egress", SBX_R_SANDBOX_EGRESS);
	route_ok("GET", "/sandboxes/" ID "/stats", SBX_R_SANDBOX_STATS);
	route_ok("POST", "/sandboxes/" ID "/exec", SBX_R_EXEC);
	route_ok("POST", "/sandboxes/" ID "/code", SBX_R_CODE);
	route_ok("GET", "/sandboxes/" ID "/processes", SBX_R_PROCESSES);
	route_ok("GET", "/sandboxes/" ID "/processes/42", SBX_R_PROCESS);
	route_ok("GET", "/sandboxes/" ID "/processes/42/output", SBX_R_PROCESS_OUTPUT);
	route_ok("POST", "/sandboxes/" ID "/processes/42/stdin", SBX_R_PROCESS_STDIN);
	route_ok("POST", "/sandboxes/" ID "/processes/42/signal", SBX_R_PROCESS_SIGNAL);
	route_ok("POST", "/sandboxes/" ID "/files/batch", SBX_R_FILES_BATCH);
	route_ok("GET", "/sandboxes/" ID "/files/etc/hosts", SBX_R_FILE);
	route_ok("PUT", "/sandboxes/" ID "/files/etc/hosts", SBX_R_FILE);
	route_ok("DELETE", "/sandboxes/" ID "/files/etc/hosts", SBX_R_FILE);
	route_ok("GET", "/sandboxes/" ID "/snapshots", SBX_R_SANDBOX_SNAPSHOTS);
	route_ok("POST", "/sandboxes/" ID "/snapshots", SBX_R_SANDBOX_SNAPSHOTS);
	route_ok("GET", "/sandboxes/snapshots", SBX_R_SNAPSHOTS);
	route_ok("DELETE", "/sandboxes/snapshots/" ID2, SBX_R_SNAPSHOT);
	route_ok("GET", "/volumes", SBX_R_VOLUMES);
	route_ok("POST", "/volumes", SBX_R_VOLUMES);
	route_ok("GET", "/volumes/" ID2, SBX_R_VOLUME);
	route_ok("DELETE", "/volumes/" ID2, SBX_R_VOLUME);

	/* every enum value has a distinct name */
	{
		int named = 1, distinct = 1;
		for (int i = 0; i < SBX_R__COUNT; i++) {
			const char *n = sbx_route_name((enum sbx_route)i);
			if (!n || !*n || !strcmp(n, "?"))
				named = 0;
			for (int j = 0; j < i && n; j++)
				if (!strcmp(n, sbx_route_name((enum sbx_route)j)))
					distinct = 0;
		}
		ok(named, "every route has a name");
		ok(distinct, "route names are distinct");
		is_str(sbx_route_name(SBX_R__COUNT), "?", "an out-of-range route is named '?'");
	}

	/* ids and numbers land in the match */
	match("GET", "/sandboxes/" ID "/processes/123/output?follow=1");
	is_str(m.id, ID, "the sandbox id is copied into the match");
	is_int(m.pid, 123, "the pid is parsed");
	is_str(m.query, "follow=1", "the query string is split off");
	match("DELETE", "/sandboxes/snapshots/" ID2);
	is_str(m.id, ID2, "the snapshot id is copied into the match");
	match("GET", "/v1/volumes/" ID2 "?x=1");
	is_str(m.id, ID2, "the volume id is copied into the match");
	is_int(m.method, SBX_M_GET, "the request's method bit is set");
	is_int(m.allowed, SBX_M_GET | SBX_M_DELETE, "the allowed methods are set");

	/* query strings */
	is_int(match("GET", "/sandboxes?page=2&limit=5"), 0, "a query string does not change the route");
	is_str(m.query, "page=2&limit=5", "the query is the raw text after '?'");
	match("GET", "/sandboxes");
	is_str(m.query, "", "no query gives \"\"");
	match("GET", "/sandboxes?");
	is_str(m.query, "", "a bare '?' gives \"\"");
	is_int(match("GET", "/sandboxes/?a=/b/../c"), 0, "a '/' or '..' inside the query is not part of the path");
	is_int(m.route, SBX_R_SANDBOXES, "... and the route is still sandboxes");

	/* 405 with the allowed methods */
	route_err("DELETE", "/healthz", 405, NULL);
	is_int(m.allowed, SBX_M_GET, "405 on /healthz allows GET");
	route_err("PATCH", "/sandboxes", 405, NULL);
	is_int(m.allowed, SBX_M_GET | SBX_M_POST, "405 on /sandboxes allows GET and POST");
	sbx_route_allow_header(m.allowed, buf, sizeof(buf));
	is_str(buf, "GET, POST", "the Allow header lists GET, POST");
	route_err("GET", "/sandboxes/" ID "/exec", 405, NULL);
	route_err("POST", "/sandboxes/" ID, 405, NULL);
	route_err("PUT", "/volumes", 405, NULL);
	route_err("GET", "/sandboxes/snapshots/" ID2, 405, NULL);
	route_err(NULL, "/healthz", 405, NULL);
	route_err("get", "/healthz", 405, NULL);
	route_err("BREW\r\nX: y", "/healthz", 405, NULL);
	ok(!strstr(err.msg, "\r"), "an unknown method is not echoed into the message");
	sbx_route_allow_header(SBX_M_GET | SBX_M_PUT | SBX_M_DELETE, buf, sizeof(buf));
	is_str(buf, "GET, PUT, DELETE", "the Allow header keeps a fixed order");
	sbx_route_allow_header(SBX_M_GET | SBX_M_POST, buf, 5);
	ok(strlen(buf) < 5, "the Allow header never overflows a small buffer");
	sbx_route_allow_header(0, buf, sizeof(buf));
	is_str(buf, "", "no methods give an empty Allow header");

	/* 404 */
	route_err("GET", "/", 404, NULL);
	route_err("GET", "/v1", 404, NULL);
	route_err("GET", "/v1/", 404, NULL);
	route_err("GET", "/nope", 404, NULL);
	route_err("GET", "/v2/sandboxes", 404, NULL);
	route_err("GET", "/v1sandboxes", 404, NULL);
	route_err("GET", "/sandboxesx", 404, NULL);
	route_err("GET", "/HEALTHZ", 404, NULL);
	route_err("GET", "//sandboxes", 404, NULL);
	route_err("GET", "/sandboxes//", 404, NULL);
	route_err("GET", "/sandboxes/" ID "/nope", 404, NULL);
	route_err("GET", "/sandboxes/" ID "/processes/1/nope", 404, NULL);
	route_err("GET", "/sandboxes/" ID "/processes/1/output/x", 404, NULL);
	route_err("GET", "/sandboxes/" ID "/wait/x", 404, NULL);
	route_err("GET", "/a/b/c/d/e/f/g/h/i/j", 404, NULL);
	route_err("GET", "/v1/../healthz", 404, NULL);
	route_err("GET", "/sandbox", 404, NULL);
	route_err("GET", "/volumes/" ID "/x", 404, NULL);
	route_err("GET", "healthz", 400, NULL);
	route_err("GET", "", 400, NULL);
	route_err("GET", NULL, 400, NULL);

	/* trailing slash: one is tolerated outside file paths */
	route_ok("GET", "/sandboxes/", SBX_R_SANDBOXES);
	route_ok("GET", "/healthz/", SBX_R_HEALTHZ);
	route_ok("GET", "/sandboxes/" ID "/", SBX_R_SANDBOX);

	/* bad ids: 400 before any lookup */
	route_err("GET", "/sandboxes/0123456789ABCDEF01234567", 400, "Invalid sandbox id");
	route_err("GET", "/sandboxes/0123456789abcdef0123456", 400, "Invalid sandbox id");
	route_err("GET", "/sandboxes/0123456789abcdef012345678", 400, "Invalid sandbox id");
	route_err("GET", "/sandboxes/0123456789abcdef0123456g", 400, "Invalid sandbox id");
	route_err("POST", "/sandboxes/xyz/exec", 400, "Invalid sandbox id");
	route_err("GET", "/sandboxes/%30123456789abcdef01234567", 400, "Invalid sandbox id");
	route_err("GET", "/sandboxes/../healthz", 400, "Invalid sandbox id");
	route_err("GET", "/sandboxes/" ID "/files/../" ID2, 400, NULL);
	route_err("DELETE", "/sandboxes/snapshots/nope", 400, "Invalid snapshot id");
	route_err("DELETE", "/sandboxes/snapshots/0123456789ABCDEF01234567", 400, "Invalid snapshot id");
	route_err("GET", "/volumes/nope", 400, "Invalid volume id");
	route_err("DELETE", "/v1/volumes/0123456789abcdef0123456", 400, "Invalid volume id");

	/* file paths */
	file_path("GET", "/etc/hosts", "/etc/hosts");
	file_path("GET", "//etc/hosts", "/etc/hosts");
	file_path("GET", "/etc//hosts", "/etc/hosts");
	file_path("GET", "/./etc/./hosts", "/etc/hosts");
	file_path("GET", "/dir/", "/dir");
	file_path("GET", "", "/");
	file_path("GET", "/", "/");
	file_path("GET", "/a%20b", "/a b");
	file_path("GET", "/a+b", "/a+b");
	file_path("GET", "/%41%62c", "/Abc");
	file_path("GET", "/a%2B", "/a+");
	file_path("GET", "/%252F", "/%2F");
	file_path("GET", "/batch", "/batch");
	file_path("GET", "/x/..y/z..", "/x/..y/z..");
	file_path("GET", "/x/...", "/x/...");
	file_path("PUT", "/workspace/a.txt?mkdir=1", "/workspace/a.txt");
	is_str(m.query, "mkdir=1", "a file path's query string is split off");
	route_err("GET", "/sandboxes/" ID "/files/a%2Fb", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/files/a%2fb", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/files/%2F", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/files/a%00b", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/files/a%zzb", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/files/a%4", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/files/a%", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/files/..", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/files/../etc/passwd", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/files/a/../../etc/passwd", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/files/a/..", 400, NULL);
	route_err("PUT", "/sandboxes/" ID "/files/%2e%2e/etc/passwd", 400, NULL);
	route_err("PUT", "/sandboxes/" ID "/files/a/%2E./b", 400, NULL);
	route_err("POST", "/sandboxes/" ID "/files/etc/hosts", 405, NULL);
	route_err("GET", "/sandboxes/0123/files/etc/hosts", 400, "Invalid sandbox id");

	/* a long path is refused, never truncated */
	memcpy(buf, "/sandboxes/" ID "/files/", 42);
	memset(buf + 42, 'a', 5000);
	buf[5042] = 0;
	route_err("GET", buf, 400, NULL);
	memset(buf + 42, 'a', SBX_ROUTE_PATH_MAX - 2);
	buf[42 + SBX_ROUTE_PATH_MAX - 2] = 0;
	ok(match("GET", buf) == 0 && strlen(m.path) == SBX_ROUTE_PATH_MAX - 1,
	   "a path of exactly SBX_ROUTE_PATH_MAX-1 bytes fits");
	buf[42 + SBX_ROUTE_PATH_MAX - 2] = 'a';
	buf[42 + SBX_ROUTE_PATH_MAX - 1] = 0;
	route_err("GET", buf, 400, NULL);

	/* process pids */
	match("GET", "/sandboxes/" ID "/processes/1");
	is_int(m.pid, 1, "pid 1 is accepted");
	match("GET", "/sandboxes/" ID "/processes/2147483647");
	is_int(m.pid, 2147483647L, "pid 2147483647 is accepted");
	route_err("GET", "/sandboxes/" ID "/processes/0", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/processes/-1", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/processes/+1", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/processes/2147483648", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/processes/99999999999999999999", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/processes/12a", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/processes/%31", 400, NULL);
	route_err("GET", "/sandboxes/" ID "/processes/1%00", 400, NULL);

	return done_testing();
}
