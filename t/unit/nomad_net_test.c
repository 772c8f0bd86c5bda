/* The sbx CNI network's two ends without root (nothing here wires a
 * namespace): the node agent's request handling (nomad_net_serve) refuses
 * what it must before touching the network and answers CNI's error codes;
 * the plugin (workers/sbx-cni) speaks CNI's protocol (VERSION, an error
 * object with code and msg on stdout, DEL of what is not ours succeeds)
 * and relays the agent's answers over the socket. */
#include "config.h"
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../tap.h"
#include "net.h"
#include "nomad_net.h"

static const char *SB = "0123456789abcdef01234567";

/* The answer's code (0 for ok), -1 when it is not one. */
static int code_of(char *rep)
{
	json_t *v = rep ? json_loads(rep, 0, NULL) : NULL;
	int code = -1;

	if (json_is_true(json_object_get(v, "ok")))
		code = 0;
	else if (json_is_integer(json_object_get(v, "code")) && json_is_string(json_object_get(v, "msg")))
		code = (int)json_integer_value(json_object_get(v, "code"));
	json_decref(v);
	free(rep);
	return code;
}

static char out[8192];

/* Runs the plugin with env (NAME=VALUE\n...) and stdin; its stdout in out. */
static int plugin(const char *env, const char *in)
{
	char cmd[8192], inf[] = "/tmp/sbx-cni-in.XXXXXX";
	int fd = mkstemp(inf), st;
	FILE *p;
	size_t n;

	if (fd < 0 || write(fd, in, strlen(in)) != (ssize_t)strlen(in))
		return -1;
	close(fd);
	snprintf(cmd, sizeof(cmd), "env -i %s ./workers/sbx-cni < %s", env, inf);
	p = popen(cmd, "r");
	n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
	out[n] = 0;
	st = p ? pclose(p) : -1;
	unlink(inf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int out_code(void)
{
	json_t *v = json_loads(out, 0, NULL);
	int c = json_is_integer(json_object_get(v, "code")) && json_is_string(json_object_get(v, "msg")) &&
			json_is_string(json_object_get(v, "cniVersion"))
		? (int)json_integer_value(json_object_get(v, "code"))
		: -1;
	json_decref(v);
	return c;
}

/* A stand-in for the node agent's socket: serves n requests with
 * nomad_net_serve, in a child. */
static pid_t serve(const char *path, const struct sandbox_node_cfg *c, int n)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	pid_t pid;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < n; i++) {
			char req[4096];
			size_t len = 0;
			ssize_t r;
			int cfd = accept(fd, NULL, NULL);
			while (cfd >= 0 && len < sizeof(req) - 1 && (r = read(cfd, req + len, sizeof(req) - 1 - len)) > 0)
				len += (size_t)r;
			req[len] = 0;
			char *rep = nomad_net_serve(c, req);
			if (cfd >= 0 && rep && write(cfd, rep, strlen(rep)) < 0)
				_exit(1);
			free(rep);
			close(cfd);
		}
		_exit(0);
	}
	close(fd);
	return pid;
}

int main(void)
{
	char dir[] = "/tmp/sbx-nomad-net.XXXXXX", sock[200], env[1000], conf[400];
	struct net_config nc = { .bridge = "sbx0", .subnet = "10.213.0.0/16" };
	struct sandbox_node_cfg c = { .net = &nc };
	char req[600];
	pid_t pid;

	plan(22);
	if (!mkdtemp(dir))
		bail_out("mkdtemp");
	c.state_dir = dir;

	/* ---- the agent's side ---- */
	ok(code_of(nomad_net_serve(&c, "{not json")) == 6, "a request that is not JSON: code 6 (decoding failure)");
	ok(code_of(nomad_net_serve(&c, "{\"command\":\"ADD\",\"sandbox_id\":\"x\",\"extra\":1}")) == 6,
	   "a request with an unknown field: code 6 (strict)");
	ok(code_of(nomad_net_serve(&c, "{\"command\":\"ADD\",\"sandbox_id\":\"../etc\"}")) == 4,
	   "a sandbox id that is not one: code 4");
	snprintf(req, sizeof(req),
		 "{\"command\":\"ADD\",\"sandbox_id\":\"%s\",\"alloc_id\":\"a;rm\",\"netns\":\"/proc/1/ns/net\"}", SB);
	ok(code_of(nomad_net_serve(&c, req)) == 4, "an allocation id that is not a UUID: code 4");
	snprintf(req, sizeof(req), "{\"command\":\"ADD\",\"sandbox_id\":\"%s\",\"alloc_id\":\"0a1b2c3d-0000\"}", SB);
	ok(code_of(nomad_net_serve(&c, req)) == 4, "ADD without a network namespace: code 4");
	snprintf(req, sizeof(req),
		 "{\"command\":\"ADD\",\"sandbox_id\":\"%s\",\"alloc_id\":\"0a1b2c3d-0000\",\"netns\":\"/proc/1/ns/net\","
		 "\"ifname\":\"eth1\"}",
		 SB);
	ok(code_of(nomad_net_serve(&c, req)) == 4, "ADD for an interface other than eth0: code 4");
	ok(!nomad_net_wired(&c, SB), "...and nothing was noted");
	snprintf(req, sizeof(req), "{\"command\":\"DEL\",\"sandbox_id\":\"%s\",\"alloc_id\":\"0a1b2c3d-0000\"}", SB);
	ok(code_of(nomad_net_serve(&c, req)) == 0, "DEL of a sandbox never wired succeeds");
	snprintf(req, sizeof(req), "{\"command\":\"CHECK\",\"sandbox_id\":\"%s\",\"alloc_id\":\"0a1b2c3d-0000\"}", SB);
	ok(code_of(nomad_net_serve(&c, req)) == 3, "CHECK of a sandbox never wired: code 3 (unknown container)");
	snprintf(req, sizeof(req), "{\"command\":\"GC\",\"sandbox_id\":\"%s\"}", SB);
	ok(code_of(nomad_net_serve(&c, req)) == 4, "an unknown command: code 4");
	ok(!nomad_net_pending(&c, SB, 60000), "nothing pending");

	/* ---- the plugin ---- */
	ok(plugin("CNI_COMMAND=VERSION", "{}") == 0 && strstr(out, "\"supportedVersions\"") && strstr(out, "\"1.0.0\""),
	   "VERSION: the versions it speaks");
	ok(plugin("", "{}") == 1 && out_code() == 4, "no CNI_COMMAND: exit 1, an error object with code 4");
	ok(plugin("CNI_COMMAND=ADD", "[]") == 1 && out_code() == 6, "a config that is not an object: code 6");
	ok(plugin("CNI_COMMAND=ADD CNI_CONTAINERID=x", "{\"cniVersion\":\"9.9.9\",\"name\":\"sbx\"}") == 1 &&
		   out_code() == 1,
	   "a cniVersion it does not speak: code 1");
	ok(plugin("CNI_COMMAND=DEL CNI_CONTAINERID=x 'CNI_ARGS=IgnoreUnknown=true;NOMAD_JOB_ID=web'",
		  "{\"cniVersion\":\"1.0.0\",\"name\":\"sbx\"}") == 0 &&
		   !out[0],
	   "DEL for a job that is not a sandbox's: success, nothing printed");
	ok(plugin("CNI_COMMAND=ADD CNI_CONTAINERID=x CNI_NETNS=/proc/1/ns/net CNI_IFNAME=eth0 "
		  "'CNI_ARGS=NOMAD_JOB_ID=web'",
		  "{\"cniVersion\":\"1.0.0\",\"name\":\"sbx\"}") == 1 &&
		   out_code() == 4,
	   "ADD for a job that is not a sandbox's: code 4");
	snprintf(sock, sizeof(sock), "%s/cni.sock", dir);
	snprintf(conf, sizeof(conf), "{\"cniVersion\":\"1.0.0\",\"name\":\"sbx\",\"type\":\"sbx-cni\",\"socket\":\"%s\"}",
		 sock);
	snprintf(env, sizeof(env),
		 "CNI_COMMAND=ADD CNI_CONTAINERID=0a1b2c3d-0000 CNI_NETNS=/proc/1/ns/net CNI_IFNAME=eth0 "
		 "'CNI_ARGS=IgnoreUnknown=true;NOMAD_JOB_ID=sbx-%s;NOMAD_ALLOC_ID=0a1b2c3d-0000'",
		 SB);
	ok(plugin(env, conf) == 1 && out_code() == 11 && strstr(out, "does not answer"),
	   "ADD with no node agent on the socket: code 11 (try again later)");
	pid = serve(sock, &c, 3);
	ok(pid > 0, "a stand-in agent serves the socket");
	snprintf(env, sizeof(env),
		 "CNI_COMMAND=ADD CNI_CONTAINERID=0a1b2c3d-0000 CNI_NETNS=/proc/1/ns/net CNI_IFNAME=eth1 "
		 "'CNI_ARGS=IgnoreUnknown=true;NOMAD_JOB_ID=sbx-%s;NOMAD_ALLOC_ID=0a1b2c3d-0000'",
		 SB);
	ok(plugin(env, conf) == 1 && out_code() == 4 && strstr(out, "eth0"),
	   "the agent's refusal comes back as the plugin's error (code 4, its message)");
	snprintf(env, sizeof(env),
		 "CNI_COMMAND=CHECK CNI_CONTAINERID=0a1b2c3d-0000 CNI_NETNS=/proc/1/ns/net CNI_IFNAME=eth0 "
		 "'CNI_ARGS=NOMAD_JOB_ID=sbx-%s;NOMAD_ALLOC_ID=0a1b2c3d-0000'",
		 SB);
	ok(plugin(env, conf) == 1 && out_code() == 3, "CHECK of what the agent did not wire: code 3");
	snprintf(env, sizeof(env),
		 "CNI_COMMAND=DEL CNI_CONTAINERID=0a1b2c3d-0000 'CNI_ARGS=NOMAD_JOB_ID=sbx-%s;NOMAD_ALLOC_ID=0a1b2c3d-0000'",
		 SB);
	ok(plugin(env, conf) == 0 && !out[0], "DEL through the agent: success, nothing printed");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(sock);
	rmdir(dir);
	return done_testing();
}
