/* Proves: the settings table gives documented defaults; a config file of
 * "name = value" lines parses with comments, quotes, blank lines and CRLF;
 * unknown names, duplicates, missing '=', bad or out-of-range numbers and a
 * NUL byte are refused naming file:line; durations (30s, 5m, 1h, 1d) and sizes
 * (1K, 16M, 1G) are converted; sbx_config_set overrides and keeps the old value
 * on error; sbx_config_check needs a 64-hex auth_secret for the API; help and
 * sample list the settings and never print a secret's value; the per-organisation
 * concurrency limits default to a share of the children, streams never above
 * requests. */
#include "config.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "settings.h"
#include "../tap.h"

#define SECRET "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static sbx_err err;

static sbx_config *parse(const char *text)
{
	sbx_config *cfg = NULL;

	sbx_err_clear(&err);
	if (sbx_config_parse(text, strlen(text), "test.conf", &cfg, &err) < 0)
		return NULL;
	return cfg;
}

/* text must fail with a message containing want */
static void bad(const char *text, const char *want, const char *what)
{
	sbx_config *cfg = parse(text);

	ok(!cfg && strstr(err.msg, want), "%s is refused ('%s')", what, want);
	if (cfg) {
		diag("accepted");
		sbx_config_free(cfg);
	} else if (!strstr(err.msg, want)) {
		diag("got: %s", err.msg);
	}
}

static void num_is(const char *text, const char *name, long long want, const char *what)
{
	sbx_config *cfg = parse(text);

	ok(cfg && sbx_cfg_int(cfg, name) == want, "%s: %s = %lld", what, name, want);
	if (!cfg)
		diag("error: %s", err.msg);
	else if (sbx_cfg_int(cfg, name) != want)
		diag("got %lld", sbx_cfg_int(cfg, name));
	sbx_config_free(cfg);
}

static char *print_to_string(void (*fn)(FILE *, unsigned), unsigned who)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		bail_out("open_memstream");
	fn(f, who);
	fclose(f);
	return buf;
}

int main(void)
{
	sbx_config *cfg = NULL;
	char *out;

	/* defaults */
	is_int(sbx_config_load(NULL, &cfg, &err), 0, "sbx_config_load(NULL) gives the defaults");
	if (!cfg)
		bail_out("no default config");
	is_int(sbx_cfg_int(cfg, "rpc_timeout"), 60, "default rpc_timeout is 60 s");
	is_int(sbx_cfg_int(cfg, "api_children"), 8, "default api_children is 8");
	is_int(sbx_cfg_int(cfg, "api_max_json_body"), 1048576, "default api_max_json_body is 1 MiB");
	is_int(sbx_cfg_int(cfg, "idle_timeout"), 1800, "default idle_timeout is 30 min");
	is_int(sbx_cfg_int(cfg, "exec_json_cap"), 16777216, "default exec_json_cap is 16 MiB");
	is_int(sbx_cfg_int(cfg, "file_max_bytes"), 52428800, "default file_max_bytes is 50 MB");
	is_str(sbx_cfg_str(cfg, "default_template"), "debian-12", "default template is debian-12");
	is_str(sbx_cfg_str(cfg, "default_egress"), "deny_all", "default egress is deny_all");
	is_int(sbx_cfg_int(cfg, "api_org_max_requests"), 4, "default api_org_max_requests is 4 (half the children)");
	is_int(sbx_cfg_int(cfg, "api_org_max_streams"), 2, "default api_org_max_streams is 2 (a quarter)");
	is_int(sbx_cfg_int(cfg, "api_body_min_rate"), 4096, "default api_body_min_rate is 4 KiB/s");
	is_int(sbx_cfg_int(cfg, "api_body_grace"), 10, "default api_body_grace is 10 s");
	is_int(sbx_cfg_int(cfg, "api_key_rate_per_s"), 0, "default api_key_rate_per_s is 0 (no limit per key)");
	is_int(sbx_cfg_int(cfg, "api_key_burst"), 0, "default api_key_burst is 0 (the rate)");
	is_int(sbx_cfg_int(cfg, "sandbox_max_execs"), 0, "default sandbox_max_execs is 0 (off: the organisation's streams bound it)");
	is_int(sbx_cfg_int(cfg, "price_volume_gb_hour_millicents"), 14, "default volume price is 14 m¢ per GB-hour");
	is_str(sbx_cfg_str(cfg, "auth_secret"), "", "auth_secret has no default");
	is_str(sbx_cfg_str(cfg, "log_file"), "", "log_file defaults to empty (stderr)");
	{
		int all = 1;
		for (size_t i = 0; i < sbx_settings_count; i++)
			if (!sbx_settings[i].doc || !sbx_settings[i].doc[0] || !sbx_settings[i].def ||
			    !sbx_settings[i].who)
				all = 0;
		ok(all, "every setting has a default, a doc string and a reader");
	}

	/* check */
	is_int(sbx_config_check(cfg, SBX_FOR_API, &err), -1, "the API refuses an empty auth_secret");
	like(err.msg, "auth_secret", "... naming auth_secret");
	is_int(sbx_config_check(cfg, SBX_FOR_ADMIN, &err), -1, "sbx-admin refuses an empty auth_secret");
	is_int(sbx_config_check(cfg, SBX_FOR_WORKER, &err), 0, "the worker does not need auth_secret");
	is_int(sbx_config_set(cfg, "auth_secret", SECRET, &err), 0, "sbx_config_set sets auth_secret");
	is_int(sbx_config_check(cfg, SBX_FOR_API, &err), 0, "the API accepts a 64-hex auth_secret");
	sbx_config_set(cfg, "auth_secret", SECRET "0", &err);
	is_int(sbx_config_check(cfg, SBX_FOR_API, &err), -1, "65 hex digits are refused");
	sbx_config_set(cfg, "auth_secret", "0011223344556677889900112233445566778899aabbccddeeff00112233445z", &err);
	is_int(sbx_config_check(cfg, SBX_FOR_API, &err), -1, "a non-hex auth_secret is refused");
	sbx_config_set(cfg, "auth_secret", SECRET, &err);
	sbx_config_set(cfg, "default_egress", "allow_some", &err);
	is_int(sbx_config_check(cfg, SBX_FOR_API, &err), -1, "an unknown default_egress is refused");
	sbx_config_set(cfg, "default_egress", "open", &err);
	sbx_config_set(cfg, "exec_timeout", "200", &err);
	sbx_config_set(cfg, "exec_timeout_max", "100", &err);
	is_int(sbx_config_check(cfg, SBX_FOR_API, &err), -1, "exec_timeout above exec_timeout_max is refused");
	sbx_config_set(cfg, "exec_timeout", "30", &err);
	sbx_config_set(cfg, "api_org_max_streams", "5", &err);
	is_int(sbx_config_check(cfg, SBX_FOR_API, &err), -1, "api_org_max_streams above api_org_max_requests is refused");
	like(err.msg, "api_org_max_streams", "... naming it");
	sbx_config_set(cfg, "api_org_max_streams", "2", &err);
	is_int(sbx_config_set(cfg, "api_org_max_requests", "0", &err), -1, "api_org_max_requests 0 is out of range");
	sbx_config_set(cfg, "worker_restart_min_ms", "5000", &err);
	sbx_config_set(cfg, "worker_restart_max_ms", "1000", &err);
	is_int(sbx_config_check(cfg, SBX_FOR_WORKER, &err), -1, "restart min above max is refused");

	/* set */
	is_int(sbx_config_set(cfg, "api_children", "16", &err), 0, "sbx_config_set takes a valid number");
	is_int(sbx_cfg_int(cfg, "api_children"), 16, "... and it is read back");
	is_int(sbx_config_set(cfg, "api_children", "0", &err), -1, "sbx_config_set refuses out of range");
	is_int(sbx_cfg_int(cfg, "api_children"), 16, "... and keeps the old value");
	is_int(sbx_config_set(cfg, "no_such", "1", &err), -1, "sbx_config_set refuses an unknown name");
	like(err.msg, "no_such", "... naming it");
	is_int(sbx_config_set(cfg, "log_level", "loud", &err), -1, "an unknown log level is refused");
	is_int(sbx_config_set(cfg, "log_level", "debug", &err), 0, "log level debug is accepted");

	/* print */
	out = print_to_string(sbx_config_print_help, SBX_FOR_API);
	like(out, "rpc_timeout", "--help-config for the API lists rpc_timeout");
	like(out, "seconds the API waits", "... with its doc string");
	like(out, "reloadable", "... and says which settings are reloadable");
	ok(!strstr(out, "reaper_interval"), "--help-config for the API omits worker-only settings");
	free(out);
	out = print_to_string(sbx_config_print_help, SBX_FOR_WORKER);
	like(out, "reaper_interval", "--help-config for the worker lists reaper_interval");
	free(out);
	out = print_to_string(sbx_config_print_sample, SBX_FOR_ALL);
	like(out, "#default_template = debian-12", "the sample config shows defaults commented out");
	free(out);
	{
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		sbx_config_print_values(f, cfg, SBX_FOR_ALL);
		fclose(f);
		ok(!strstr(buf, SECRET), "print_values never prints the secret's value");
		like(buf, "auth_secret = (secret)", "... it shows (secret) instead");
		like(buf, "api_children = 16", "print_values shows current values");
		free(buf);
	}
	sbx_config_free(cfg);
	cfg = NULL;

	/* parse a good file */
	cfg = parse("# a comment\n"
		    "; another comment\n"
		    "\n"
		    "   \t\n"
		    "db_url = host=/tmp port=55432 dbname=sbx user=sbx\n"
		    "auth_secret = " SECRET "\n"
		    "  api_children=4  \n"
		    "rpc_timeout = 45s\r\nstart_timeout = 30\r\n"
		    "idle_timeout = 5m\n"
		    "max_lifetime = 1h\n"
		    "paused_limit = 1d\n"
		    "exec_json_cap = 16M\n"
		    "api_max_json_body = 1K\n"
		    "file_max_bytes = 1G\n"
		    "region_name = \"My Region\"\n"
		    "region_country = \"\"\n"
		    "log_file =\n"
		    "default_template = \"debian-12\n");
	ok(cfg != NULL, "a good config file parses");
	if (!cfg)
		bail_out(err.msg);
	is_str(sbx_cfg_str(cfg, "db_url"), "host=/tmp port=55432 dbname=sbx user=sbx",
	       "a value keeps its inner '=' and spaces");
	is_str(sbx_cfg_str(cfg, "auth_secret"), SECRET, "auth_secret is read");
	is_int(sbx_cfg_int(cfg, "api_children"), 4, "no spaces around '=' and surrounding blanks are fine");
	is_int(sbx_cfg_int(cfg, "rpc_timeout"), 45, "45s is 45 seconds (CRLF line ending)");
	is_int(sbx_cfg_int(cfg, "idle_timeout"), 300, "5m is 300 seconds");
	is_int(sbx_cfg_int(cfg, "max_lifetime"), 3600, "1h is 3600 seconds");
	is_int(sbx_cfg_int(cfg, "paused_limit"), 86400, "1d is 86400 seconds");
	is_int(sbx_cfg_int(cfg, "exec_json_cap"), 16 * 1024 * 1024, "16M is 16 MiB");
	is_int(sbx_cfg_int(cfg, "api_max_json_body"), 1024, "1K is 1024 bytes");
	is_int(sbx_cfg_int(cfg, "file_max_bytes"), 1024LL * 1024 * 1024, "1G is 1 GiB");
	is_str(sbx_cfg_str(cfg, "region_name"), "My Region", "double quotes are stripped");
	is_str(sbx_cfg_str(cfg, "region_country"), "", "\"\" is the empty string");
	is_str(sbx_cfg_str(cfg, "region_id"), "000000000000000000000001", "the default region id is an id");
	is_str(sbx_cfg_str(cfg, "log_file"), "", "an empty value is allowed for a string");
	is_str(sbx_cfg_str(cfg, "default_template"), "\"debian-12", "an unbalanced quote is kept");
	is_int(sbx_cfg_int(cfg, "reaper_interval"), 10, "unset settings keep their defaults");
	is_int(sbx_config_check(cfg, SBX_FOR_ALL, &err), 0, "the parsed file passes the check");
	{
		sbx_config *c2 = parse("api_socket = /tmp/other.sock\nrpc_timeout = 10\n");
		if (c2) {
			/* db_url, auth_secret, api_children and api_socket differ and
			 * need a restart; rpc_timeout is reloadable and not counted */
			is_int(sbx_config_diff_nonreloadable(cfg, c2, SBX_FOR_API), 4,
			       "diff counts exactly the changed non-reloadable settings");
			is_int(sbx_config_diff_nonreloadable(cfg, cfg, SBX_FOR_ALL), 0,
			       "a config does not differ from itself");
			sbx_config_free(c2);
		} else {
			ok(0, "diff: second config parses");
		}
	}
	sbx_config_free(cfg);

	num_is("rpc_timeout = 30s", "rpc_timeout", 30, "a duration in seconds");
	num_is("rpc_timeout = 30", "rpc_timeout", 30, "a bare number is seconds");
	num_is("rpc_timeout = 10m", "rpc_timeout", 600, "a duration in minutes at the maximum");
	num_is("api_max_json_body = 16M", "api_max_json_body", 16777216, "a size in MiB");
	num_is("api_max_json_body = 2048", "api_max_json_body", 2048, "a bare size is bytes");
	num_is("api_max_json_body = 4KiB", "api_max_json_body", 4096, "KiB is accepted");
	num_is("", "api_children", 8, "an empty file gives defaults");

	/* errors name the file and line */
	bad("api_children = 4\nnope = 1\n", "test.conf:2: unknown setting 'nope'", "an unknown name");
	bad("api_children = 4\n\napi_children = 5\n", "test.conf:3: 'api_children' is set twice",
	    "a duplicate");
	bad("api_children 4\n", "test.conf:1: expected 'name = value'", "a line without '='");
	bad("api_children = abc\n", "test.conf:1", "a non-numeric integer");
	bad("api_children = abc\n", "not a number", "a non-numeric integer");
	bad("api_children = -1\n", "not a number", "a negative integer");
	bad("api_children = 4x\n", "not a number", "trailing junk after a number");
	bad("api_children = 4 # four\n", "not a number", "a trailing comment after a number");
	bad("api_children = 0x10\n", "not a number", "a hex number");
	bad("api_children =\n", "not a number", "an empty number");
	bad("api_children = 0\n", "outside 1..512", "a number below its minimum");
	bad("api_children = 513\n", "outside 1..512", "a number above its maximum");
	bad("api_children = 99999999999999999999999\n", "out of range", "an overflowing number");
	bad("file_max_bytes = 9223372036854775807G\n", "out of range", "an overflowing size");
	bad("rpc_timeout = 1h\n", "outside 5..600", "a duration above its maximum");
	bad("rpc_timeout = 0s\n", "outside", "a duration below its minimum");
	bad("rpc_timeout = 5x\n", "bad duration", "an unknown duration unit");
	bad("rpc_timeout = 5 m\n", "bad duration", "a space before the unit");
	bad("rpc_timeout = 5M\n", "bad duration", "an upper-case minute unit");
	bad("api_max_json_body = 16Q\n", "bad size", "an unknown size unit");
	bad("api_max_json_body = 16m\n", "bad size", "a lower-case size unit");
	bad("api_max_json_body = 1\n", "outside 1024..", "a size below its minimum");
	bad("log_level = loud\n", "test.conf:1", "an unknown log level");
	bad("region_id = local\n", "not 24 lowercase hex", "a region id that is not an id");
	bad("region_id = 00000000000000000000000A\n", "not 24 lowercase hex", "a region id in upper case");
	bad("= 4\n", "test.conf:1: unknown setting", "an empty name");
	bad("API_CHILDREN = 4\n", "unknown setting", "an upper-case name");
	{
		const char text[] = "api_children = 4\0\nx";
		sbx_config *c = NULL;
		ok(sbx_config_parse(text, sizeof(text) - 1, "nul.conf", &c, &err) < 0 && strstr(err.msg, "NUL"),
		   "a NUL byte in the file is refused");
		sbx_config_free(c);
	}

	/* load from a file */
	{
		char path[] = "/tmp/sbx-settings-test-XXXXXX";
		int fd = mkostemp(path, O_CLOEXEC);
		const char *text = "api_children = 3\nbogus = 1\n";
		if (fd < 0)
			bail_out("mkostemp");
		if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
			bail_out("write");
		close(fd);
		cfg = NULL;
		is_int(sbx_config_load(path, &cfg, &err), -1, "sbx_config_load refuses a bad file");
		ok(strstr(err.msg, path) && strstr(err.msg, ":2:"), "... naming the path and line 2 (%s)", err.msg);
		fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		if (fd < 0 || write(fd, "api_children = 3\n", 17) != 17)
			bail_out("rewrite");
		close(fd);
		is_int(sbx_config_load(path, &cfg, &err), 0, "sbx_config_load reads a good file");
		is_int(cfg ? sbx_cfg_int(cfg, "api_children") : -1, 3, "... and its values");
		sbx_config_free(cfg);
		unlink(path);
		cfg = NULL;
		is_int(sbx_config_load("/nonexistent/sbx.conf", &cfg, &err), -1, "a missing file is an error");
		like(err.msg, "/nonexistent/sbx.conf", "... naming the path");
	}
	return done_testing();
}
