/* Proves what workers/docker.c makes of the Docker Engine API's answers: a
 * pause or unpause that Docker did (204) or had done already (409 "already
 * paused" / "not paused") succeeds; a missing container is a 404, a
 * container that does not run a 409, a daemon that is not there a 503, each
 * with Docker's own message; a bad name or a host that is not unix:///PATH
 * sends nothing. exec creates the command (its Cmd sent as JSON), starts it
 * detached and waits until it ends: exit 0 succeeds, another code fails.
 * The writable layer is overlay2's UpperDir (another storage driver is
 * refused), read with the image from one inspect of the container; the
 * image is named by the RepoDigest of the given registry only
 * (not of another, not of a registry whose name merely begins the same); an
 * answer over 256 kB is refused. The container's pid is its State.Pid while
 * it runs (a stopped one is a 409); the cgroup of a process is read from
 * /proc/PID/cgroup's text: v1's memory hierarchy (also among joined
 * controllers, and before v2's line on a hybrid host), else v2's, never
 * the root nor a path with "..". The far end is a child process answering
 * as dockerd does on a unix socket, one request per connection. */
#include "config.h"
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <curl/curl.h>
#include "docker.h"
#include "docker_answer.h"
#include "../tap.h"

#define IMG "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define DIG "sha256:2222222222222222222222222222222222222222222222222222222222222222"

static char sock_path[108], host[128], log_path[128];

static void answer(int fd, int status, const char *body)
{
	char head[256];
	const char *reason = status == 200 ? "OK" : status == 201 ? "Created" : status == 204 ? "No Content"
			     : status == 404			     ? "Not Found"
			     : status == 409			     ? "Conflict"
								     : "Error";
	size_t n = body ? strlen(body) : 0;
	int k = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, reason, n);

	if (write(fd, head, (size_t)k) < 0 || (n && write(fd, body, n) < 0))
		_exit(3);
}

/* dockerd's side: the request line and body of each request go to the log. */
static void fake_dockerd(int lfd)
{
	int polls = 0;
	FILE *log = fopen(log_path, "w");

	if (!log)
		_exit(2);
	setvbuf(log, NULL, _IOLBF, 0);
	for (;;) {
		char req[8192], method[16], path[512], *hdr_end, *cl;
		size_t got = 0;
		long want = -1;
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0)
			_exit(0);
		for (;;) {
			ssize_t r = read(fd, req + got, sizeof(req) - 1 - got);
			if (r <= 0)
				break;
			got += (size_t)r;
			req[got] = 0;
			if ((hdr_end = strstr(req, "\r\n\r\n"))) {
				cl = strcasestr(req, "Content-Length:");
				want = (long)(hdr_end + 4 - req) + (cl && cl < hdr_end ? atol(cl + 15) : 0);
				if ((long)got >= want)
					break;
			}
		}
		req[got] = 0;
		if (sscanf(req, "%15s %511s", method, path) != 2) {
			close(fd);
			continue;
		}
		hdr_end = strstr(req, "\r\n\r\n");
		fprintf(log, "%s %s %s\n", method, path, hdr_end ? hdr_end + 4 : "");
		if (!strcmp(path, "/containers/sandbox-a/pause") || !strcmp(path, "/containers/sandbox-a/unpause"))
			answer(fd, 204, NULL);
		else if (!strcmp(path, "/containers/sandbox-p/pause"))
			answer(fd, 409, "{\"message\":\"Container sandbox-p is already paused\"}");
		else if (!strcmp(path, "/containers/sandbox-r/unpause"))
			answer(fd, 409, "{\"message\":\"Container sandbox-r is not paused\"}");
		else if (!strcmp(path, "/containers/sandbox-x/pause"))
			answer(fd, 409, "{\"message\":\"Container sandbox-x is not running\"}");
		else if (!strcmp(path, "/containers/sandbox-a/exec"))
			answer(fd, 201, "{\"Id\":\"e1\"}");
		else if (!strcmp(path, "/containers/sandbox-f/exec"))
			answer(fd, 201, "{\"Id\":\"e2\"}");
		else if (!strcmp(path, "/exec/e1/start") || !strcmp(path, "/exec/e2/start"))
			answer(fd, 200, NULL);
		else if (!strcmp(path, "/exec/e1/json"))
			answer(fd, 200, ++polls < 3 ? "{\"Running\":true,\"ExitCode\":0}" : "{\"Running\":false,\"ExitCode\":0}");
		else if (!strcmp(path, "/exec/e2/json"))
			answer(fd, 200, "{\"Running\":false,\"ExitCode\":1}");
		else if (!strcmp(path, "/containers/sandbox-a/json"))
			answer(fd, 200, "{\"Image\":\"" IMG "\",\"State\":{\"Running\":true,\"Pid\":4242},"
					"\"GraphDriver\":{\"Name\":\"overlay2\",\"Data\":"
					"{\"LowerDir\":\"/l\",\"UpperDir\":\"/var/lib/docker/overlay2/abc/diff\"}}}");
		else if (!strcmp(path, "/containers/sandbox-x/json"))
			answer(fd, 200, "{\"Image\":\"" IMG "\",\"State\":{\"Running\":false,\"Pid\":0}}");
		else if (!strcmp(path, "/containers/sandbox-v/json"))
			answer(fd, 200, "{\"Image\":\"" IMG "\",\"GraphDriver\":{\"Name\":\"vfs\",\"Data\":null}}");
		else if (!strcmp(path, "/images/" IMG "/json"))
			answer(fd, 200, "{\"RepoDigests\":[\"docker.io/library/x@" DIG "\",\"127.0.0.1:25000/sbx/templates/"
					"debian-12@" DIG "\"]}");
		else if (!strcmp(path, "/containers/sandbox-big/json")) {
			size_t n = 300 * 1024;
			char *big = malloc(n + 32);
			if (!big)
				_exit(4);
			memset(big, ' ', n + 31);
			big[0] = '{';
			memcpy(big + n + 28, "{}}", 3);
			big[n + 31] = 0;
			answer(fd, 200, big);
			free(big);
		} else
			answer(fd, 404, "{\"message\":\"No such container: sandbox-gone\"}");
		close(fd);
	}
}

/* How many logged requests begin with line. */
static int count(const char *line)
{
	char buf[256];
	int n = 0;
	FILE *f = fopen(log_path, "r");

	while (f && fgets(buf, sizeof(buf), f))
		n += !strncmp(buf, line, strlen(line));
	if (f)
		fclose(f);
	return n;
}

static bool logged(const char *line)
{
	char buf[65536];
	FILE *f = fopen(log_path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = 0;
	return strstr(buf, line) != NULL;
}

int main(void)
{
	sbx_err err = SBX_ERR_INIT;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char out[256], base[256];
	const char *sync_argv[] = { "/bin/sync", NULL };
	int lfd, st;
	pid_t pid;

	plan(39);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(sock_path, sizeof(sock_path), "/tmp/sbx-docker-test.%d.sock", (int)getpid());
	snprintf(log_path, sizeof(log_path), "/tmp/sbx-docker-test.%d.log", (int)getpid());
	snprintf(host, sizeof(host), "unix://%s", sock_path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	unlink(sock_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 16) < 0)
		bail_out("cannot listen on a unix socket");
	pid = fork();
	if (pid == 0)
		fake_dockerd(lfd);
	close(lfd);

	ok(docker_pause(host, "sandbox-a", true, &err) == 0, "pause: 204 is done");
	ok(logged("POST /containers/sandbox-a/pause"), "...POST /containers/NAME/pause, no API version in the path");
	ok(docker_pause(host, "sandbox-a", false, &err) == 0 && logged("POST /containers/sandbox-a/unpause"),
	   "unpause: POST /containers/NAME/unpause, 204 is done");
	ok(docker_pause(host, "sandbox-p", true, &err) == 0, "pause of a paused container: 409 already paused is done");
	ok(docker_pause(host, "sandbox-r", false, &err) == 0,
	   "unpause of a running container: 409 not paused is done");
	err = (sbx_err)SBX_ERR_INIT;
	ok(docker_pause(host, "sandbox-gone", true, &err) < 0, "pause of a missing container fails");
	is_int(err.http, 404, "...404");
	like(err.msg, "No such container: sandbox-gone", "...with Docker's message");
	err = (sbx_err)SBX_ERR_INIT;
	ok(docker_pause(host, "sandbox-x", true, &err) < 0 && err.http == 409, "pause of a stopped container: 409");
	like(err.msg, "is not running", "...with Docker's message");
	err = (sbx_err)SBX_ERR_INIT;
	ok(docker_pause(host, "../../images", true, &err) < 0 && err.http == 400 && !logged("images"),
	   "a name with a slash is refused before any request");
	err = (sbx_err)SBX_ERR_INIT;
	ok(docker_pause("tcp://127.0.0.1:2375", "sandbox-a", true, &err) < 0 && err.http == 500,
	   "a Docker host that is not unix:///PATH is refused");
	err = (sbx_err)SBX_ERR_INIT;
	ok(docker_pause("unix:///nonexistent/docker.sock", "sandbox-a", true, &err) < 0 && err.http == 503,
	   "a daemon that is not there: 503");
	like(err.msg, "unavailable", "...saying so (%s)", err.msg);

	ok(docker_exec(host, "sandbox-a", sync_argv, 5000, &err) == 0, "exec: waits until it ends, exit 0 succeeds");
	ok(logged("POST /containers/sandbox-a/exec {\"Cmd\":[\"/bin/sync\"],\"AttachStdout\":false,\"AttachStderr\":false}"),
	   "...the command sent as Cmd, nothing attached");
	ok(logged("POST /exec/e1/start {\"Detach\":true,\"Tty\":false}") && logged("GET /exec/e1/json"),
	   "...started detached, then polled");
	err = (sbx_err)SBX_ERR_INIT;
	ok(docker_exec(host, "sandbox-f", sync_argv, 5000, &err) < 0, "an exec that exits 1 fails");
	like(err.msg, "exit 1", "...naming the code");
	err = (sbx_err)SBX_ERR_INIT;
	ok(docker_exec(host, "sandbox-gone", sync_argv, 5000, &err) < 0 && err.http == 404,
	   "an exec in a missing container: 404");

	ok(docker_layer(host, "sandbox-a", "127.0.0.1:25000", base, sizeof(base), out, sizeof(out), &err) == 0,
	   "the layer of an overlay2 container");
	is_str(out, "/var/lib/docker/overlay2/abc/diff", "...its UpperDir");
	err = (sbx_err)SBX_ERR_INIT;
	ok(docker_layer(host, "sandbox-v", "127.0.0.1:25000", base, sizeof(base), out, sizeof(out), &err) < 0 &&
		   strstr(err.msg, "vfs"),
	   "another storage driver is refused, named (%s)", err.msg);
	is_int(count("GET /containers/sandbox-a/json"), 1, "one inspect of the container gives both");
	is_str(base, "sbx/templates/debian-12@" DIG, "...the image by the registry's RepoDigest, without the registry");
	err = (sbx_err)SBX_ERR_INIT;
	ok(docker_layer(host, "sandbox-a", "127.0.0.1:2500", base, sizeof(base), out, sizeof(out), &err) < 0,
	   "a registry whose name only begins the same is not the image's");
	err = (sbx_err)SBX_ERR_INIT;
	ok(docker_layer(host, "sandbox-big", "127.0.0.1:25000", base, sizeof(base), out, sizeof(out), &err) < 0 &&
		   strstr(err.msg, "larger than"),
	   "an answer over 256 kB is refused (%s)", err.msg);

	{
		long p = 0;
		err = (sbx_err)SBX_ERR_INIT;
		ok(docker_pid(host, "sandbox-a", 5000, &p, &err) == 0 && p == 4242, "the pid of a running container: State.Pid");
		err = (sbx_err)SBX_ERR_INIT;
		ok(docker_pid(host, "sandbox-x", 5000, &p, &err) < 0 && err.http == 409 && p == -1,
		   "a stopped container has none: 409 (%s)", err.msg);
		err = (sbx_err)SBX_ERR_INIT;
		ok(docker_pid(host, "sandbox-gone", 5000, &p, &err) < 0 && err.http == 404, "a missing container: 404");
	}
	{
		char rel[128];
		ok(docker_cgroup_of("12:pids:/docker/c1\n9:memory:/docker/c1\n1:name=systemd:/docker/c1\n", rel,
				    sizeof(rel)) == 0,
		   "cgroup v1: the memory hierarchy's path");
		is_str(rel, "docker/c1", "...without the leading slash");
		ok(docker_cgroup_of("4:cpu,cpuacct:/x\n5:blkio,memory:/docker/c2\n", rel, sizeof(rel)) == 0 &&
			   !strcmp(rel, "docker/c2"),
		   "memory among joined controllers");
		ok(docker_cgroup_of("0::/system.slice/docker-c3.scope\n", rel, sizeof(rel)) == 0 &&
			   !strcmp(rel, "system.slice/docker-c3.scope"),
		   "cgroup v2: the one hierarchy's path");
		ok(docker_cgroup_of("0::/init.scope\n7:memory:/docker/c4", rel, sizeof(rel)) == 0 &&
			   !strcmp(rel, "docker/c4"),
		   "hybrid: v1's memory hierarchy, not v2's line");
		ok(docker_cgroup_of("0::/\n", rel, sizeof(rel)) < 0, "the root cgroup is refused");
		ok(docker_cgroup_of("7:memory:/docker/../../etc\n", rel, sizeof(rel)) < 0, "a path with .. is refused");
		ok(docker_cgroup_of("7:memory:/docker/c5/\n", rel, sizeof(rel)) < 0 &&
			   docker_cgroup_of("7:memory:/docker//c5\n", rel, sizeof(rel)) < 0 &&
			   docker_cgroup_of("7:memory:/docker/c 5\n", rel, sizeof(rel)) < 0,
		   "an empty part or an odd character is refused");
		ok(docker_cgroup_of("7:memory:/docker/c6\n", rel, 8) < 0, "a path longer than the buffer is refused");
	}

	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	unlink(sock_path);
	unlink(log_path);
	curl_global_cleanup();
	return done_testing();
}
