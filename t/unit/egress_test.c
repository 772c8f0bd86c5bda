/* Proves: egress allow entries parse as an address, a CIDR (host bits set
 * refused, prefix 0..32) or a hostname (lowercased; labels checked; a bare
 * word or an all-numeric last label refused), each with an optional port
 * 1..65535; a policy needs 1..50 entries with restricted and none with the
 * other modes; unknown modes and non-string entries are 400s. */
#include "config.h"
#include <string.h>
#include "egress_policy.h"
#include "../tap.h"

static sbx_err err;
static struct sbx_egress_entry e;

static void good(const char *s, unsigned net, int len, int port, const char *host)
{
	int r;

	sbx_err_clear(&err);
	r = sbx_egress_entry_parse(s, &e, &err);
	ok(r == 0 && e.net == net && e.len == len && e.port == port && !strcmp(e.host, host),
	   "'%s' -> %08x/%d port %d host '%s'", s, net, len, port, host);
	if (r)
		diag("error: %s", err.msg);
	else
		diag("got %08x/%d port %d host '%s'", e.net, e.len, e.port, e.host);
}

static void bad(const char *s)
{
	sbx_err_clear(&err);
	ok(sbx_egress_entry_parse(s, &e, &err) == -1 && err.http == 400, "'%s' is refused (400)", s);
}

static int policy(const char *mode, const char *allow_json)
{
	json_error_t jerr;
	json_t *a = allow_json ? json_loads(allow_json, 0, &jerr) : NULL;
	static struct sbx_egress p;
	int r;

	sbx_err_clear(&err);
	r = sbx_egress_parse(mode, a, &p, &err);
	json_decref(a);
	return r;
}

int main(void)
{
	char many[64 * 60];

	plan(31);
	good("192.0.2.10", 0xc000020a, 32, 0, "");
	good("198.51.100.0/24", 0xc6336400, 24, 0, "");
	good("0.0.0.0/0", 0, 0, 0, "");
	good("192.0.2.10:8080", 0xc000020a, 32, 8080, "");
	good("10.0.0.0/8:443", 0x0a000000, 8, 443, "");
	good("Api.Example.COM", 0, 0, 0, "api.example.com");
	good("a-b.example.org:53", 0, 0, 53, "a-b.example.org");
	bad("");
	bad("192.0.2.10/24");
	bad("192.0.2.0/33");
	bad("192.0.2.0/");
	bad("192.0.2.256");
	bad("192.0.2");
	bad("192.0.2.10:0");
	bad("192.0.2.10:65536");
	bad("192.0.2.10:");
	bad("192.0.2.10:-1");
	bad("localhost");
	bad("-a.example.com");
	bad("a-.example.com");
	bad("a..example.com");
	bad("example.com.");
	bad("exa_mple.com");
	bad("fd00::1");
	bad("1.2.3.4.5");

	ok(policy("open", NULL) == 0 && policy("deny_all", "[]") == 0, "open and deny_all without entries");
	ok(policy("restricted", "[]") == -1 && policy("restricted", NULL) == -1, "restricted needs entries");
	ok(policy("open", "[\"192.0.2.1\"]") == -1 && strstr(err.msg, "restricted"), "open with entries: 400");
	ok(policy("sideways", NULL) == -1 && strstr(err.msg, "mode"), "an unknown mode: 400");
	ok(policy("restricted", "[1]") == -1 && strstr(err.msg, "strings"), "a non-string entry: 400");
	strcpy(many, "[");
	for (int i = 0; i < 51; i++)
		sprintf(many + strlen(many), "%s\"192.0.2.%d\"", i ? "," : "", i);
	strcat(many, "]");
	ok(policy("restricted", many) == -1 && strstr(err.msg, "50"), "51 entries: 400 (at most 50)");
	return done_testing();
}
