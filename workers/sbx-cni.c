/* sbx-cni: the CNI plugin of the sbx network on a Nomad client
 * (doc/nomad.md "The CNI network"). Nomad's client runs it from its
 * cni_path, as CNI's execution protocol says: CNI_COMMAND (ADD, DEL, CHECK,
 * VERSION), CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS and CNI_PATH in
 * the environment, the network's configuration on stdin, the result (or an
 * error object with code and msg) on stdout.
 *
 * It does no networking itself: the node agent wires a sandbox's network
 * namespace (net.c), so a Nomad sandbox gets exactly what a local one gets
 * (veth on the node's bridge, an address of its pool, the per-sandbox nft
 * chains, the DNS forwarder on the gateway), and the agent's records of
 * what it made are the only ones. This program only carries one request to
 * the agent's socket (the config's "socket", default /run/sbx/cni.sock)
 * and its answer back. The sandbox is named by Nomad's CNI_ARGS:
 * NOMAD_JOB_ID is "sbx-<sandbox id>" (driver_nomad.c), NOMAD_ALLOC_ID the
 * allocation (else CNI_CONTAINERID, which Nomad sets to it).
 *
 * A small C program rather than a script: it runs as root on every client,
 * with no interpreter or socat to install, and parses its JSON strictly. */
#include "config.h"
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "cni.h"

#define DEFAULT_SOCKET "/run/sbx/cni.sock"
#define CONF_MAX (1 << 20)
#define REP_MAX 65536
#define SUPPORTED "[\"0.3.0\", \"0.3.1\", \"0.4.0\", \"1.0.0\"]"

static const char *version = "1.0.0"; /* the config's cniVersion, once read */

/* What the plugin holds, released at exit by every way out (die() too), so
 * LeakSanitizer and valgrind see a clean exit; version points into conf. */
static json_t *conf, *req, *rep, *res;
static char *text, *buf;

static void release(void)
{
	json_decref(res);
	json_decref(rep);
	json_decref(req);
	json_decref(conf);
	free(text);
	free(buf);
}

/* CNI's error object on stdout, and a non-zero exit. */
static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	char msg[1000];
	va_list ap;
	json_t *e;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e = json_pack("{s:s, s:i, s:s}", "cniVersion", version, "code", code, "msg", msg);
	if (e)
		json_dumpf(e, stdout, JSON_INDENT(1));
	putchar('\n');
	json_decref(e);
	exit(1);
}

static const char *env(const char *name, int required)
{
	const char *v = getenv(name);

	if (required && (!v || !*v))
		die(4, "%s is not set", name);
	return v ? v : "";
}

/* One request to the node agent, its answer parsed. */
static json_t *ask(const char *sock, const json_t *q)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 30 };
	size_t len = 0, off = 0, tl;
	ssize_t n;
	json_error_t jerr;
	json_t *r;
	int fd;

	text = json_dumps(q, JSON_COMPACT);
	buf = malloc(REP_MAX + 1);

	if (!text || !buf)
		die(5, "out of memory");
	if (strlen(sock) >= sizeof(a.sun_path))
		die(7, "socket path too long: %s", sock);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die(11, "the sbx node agent does not answer at %s: %s", sock, strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	tl = strlen(text);
	while (off < tl && (n = write(fd, text + off, tl - off)) > 0)
		off += (size_t)n;
	if (off < tl)
		die(5, "writing to %s: %s", sock, strerror(errno));
	shutdown(fd, SHUT_WR);
	while (len < REP_MAX && (n = read(fd, buf + len, REP_MAX - len)) > 0)
		len += (size_t)n;
	buf[len] = 0;
	close(fd);
	r = json_loads(buf, 0, &jerr);
	if (!r || !json_is_boolean(json_object_get(r, "ok"))) {
		json_decref(r);
		die(5, "the sbx node agent's answer is malformed (%zu bytes): %s", len, jerr.text);
	}
	return r;
}

int main(void)
{
	const char *cmd = env("CNI_COMMAND", 1), *sock = DEFAULT_SOCKET;
	char job[200], alloc[200], id[25];
	json_error_t jerr;
	int old;

	atexit(release);
	if (!strcmp(cmd, "VERSION")) {
		/* VERSION reads the config too, but needs nothing of it */
		printf("{\"cniVersion\": \"1.0.0\", \"supportedVersions\": " SUPPORTED "}\n");
		return 0;
	}
	conf = json_loadf(stdin, JSON_DISABLE_EOF_CHECK, &jerr);
	if (!conf || !json_is_object(conf))
		die(6, "the network configuration on stdin is not a JSON object: %s", jerr.text);
	if (json_is_string(json_object_get(conf, "cniVersion")))
		version = json_string_value(json_object_get(conf, "cniVersion"));
	if (!strstr(SUPPORTED, version) || strlen(version) < 5)
		die(1, "cniVersion %s is not supported (%s)", version, SUPPORTED);
	old = version[0] == '0';
	if (json_object_get(conf, "socket")) {
		if (!json_is_string(json_object_get(conf, "socket")))
			die(7, "\"socket\" must be a string");
		sock = json_string_value(json_object_get(conf, "socket"));
	}
	cni_arg(env("CNI_ARGS", 0), "NOMAD_JOB_ID", job, sizeof(job));
	cni_arg(env("CNI_ARGS", 0), "NOMAD_ALLOC_ID", alloc, sizeof(alloc));
	if (!alloc[0])
		snprintf(alloc, sizeof(alloc), "%s", env("CNI_CONTAINERID", 1));
	if (!cni_sandbox_of(job, id)) {
		/* DEL of something that was never ours succeeds, as CNI wants */
		if (!strcmp(cmd, "DEL"))
			return 0;
		die(4, "CNI_ARGS has no NOMAD_JOB_ID of an sbx sandbox (sbx-<id>): '%.60s'", job);
	}
	if (strcmp(cmd, "ADD") && strcmp(cmd, "DEL") && strcmp(cmd, "CHECK"))
		die(4, "CNI_COMMAND %s is not one of ADD, DEL, CHECK, VERSION", cmd);
	req = json_pack("{s:s, s:s, s:s, s:s, s:s}", "command", cmd, "sandbox_id", id, "alloc_id", alloc, "netns",
			env("CNI_NETNS", !strcmp(cmd, "ADD")), "ifname", env("CNI_IFNAME", !strcmp(cmd, "ADD")));
	if (!req)
		die(5, "out of memory");
	rep = ask(sock, req);
	if (!json_is_true(json_object_get(rep, "ok"))) {
		json_t *code = json_object_get(rep, "code"), *msg = json_object_get(rep, "msg");
		die(json_is_integer(code) ? (int)json_integer_value(code) : 5, "%s",
		    json_is_string(msg) ? json_string_value(msg) : "the sbx node agent refused");
	}
	if (strcmp(cmd, "ADD") != 0)
		return 0; /* DEL and CHECK print nothing on success */
	{
		const char *ip = json_string_value(json_object_get(rep, "ip")),
			   *gw = json_string_value(json_object_get(rep, "gw")),
			   *mac = json_string_value(json_object_get(rep, "mac"));
		char cidr[64];
		json_int_t prefix = json_integer_value(json_object_get(rep, "prefix"));

		if (!ip || !gw || !mac || prefix < 1 || prefix > 32)
			die(5, "the sbx node agent's answer lacks the address");
		snprintf(cidr, sizeof(cidr), "%s/%d", ip, (int)prefix);
		res = json_pack("{s:s, s:[{s:s, s:s, s:s}], s:[{s:s, s:s, s:i}], s:[{s:s, s:s}], s:{s:[s]}}",
				"cniVersion", version, "interfaces", "name", env("CNI_IFNAME", 1), "mac", mac, "sandbox",
				env("CNI_NETNS", 1), "ips", "address", cidr, "gateway", gw, "interface", 0, "routes",
				"dst", "0.0.0.0/0", "gw", gw, "dns", "nameservers", gw);
		if (!res)
			die(5, "out of memory");
		if (old) /* before 1.0.0 each address said its family */
			json_object_set_new(json_array_get(json_object_get(res, "ips"), 0), "version", json_string("4"));
		json_dumpf(res, stdout, JSON_INDENT(1));
		putchar('\n');
	}
	return 0;
}
