/* runsc_ids (workers/runsc.c): the containers runsc knows under the node's
 * --root, read from the names of runsc's state files without starting
 * runsc; a root that holds anything else is left to `runsc list` (here a
 * stand-in runsc, a script that prints what it was asked and two ids). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../tap.h"
#include "err.h"
#include "host.h"
#include "runsc.h"
#include "sandbox.h"

static char dir[64];

static void touch(const char *name)
{
	char p[300];
	FILE *f;

	snprintf(p, sizeof(p), "%s/runsc/%s", dir, name);
	f = fopen(p, "w");
	if (f)
		fclose(f);
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The ids sorted and joined by spaces ("" none); "error: MSG" on failure. */
static const char *ids_of(const struct sandbox_node_cfg *c)
{
	static char out[512];
	char **ids = NULL;
	size_t n = 0;
	sbx_err err = SBX_ERR_INIT;

	out[0] = 0;
	if (runsc_ids(c, &ids, &n, &err) < 0) {
		snprintf(out, sizeof(out), "error: %s", err.msg);
		return out;
	}
	if (n)
		qsort(ids, n, sizeof(*ids), cmp);
	for (size_t i = 0; i < n; i++)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? " " : "", ids[i]);
	host_strv_free(ids, n);
	return out;
}

int main(void)
{
	char p[300], fake[300];
	struct sandbox_node_cfg c = { 0 };
	FILE *f;

	plan(6);
	snprintf(dir, sizeof(dir), "/tmp/runsc-ids-test.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(fake, sizeof(fake), "%s/fake-runsc", dir);
	f = fopen(fake, "w");
	if (!f)
		return 1;
	/* proves it was asked: its arguments go to a file */
	fprintf(f, "#!/bin/sh\necho \"$*\" > %s/asked\nprintf 'fromlist1\\nfromlist2\\n'\n", dir);
	fclose(f);
	chmod(fake, 0755);
	c.state_dir = dir;
	c.runsc = fake;
	c.platform = "systrap";

	is_str(ids_of(&c), "", "no runsc root yet: no containers, no error");
	snprintf(p, sizeof(p), "%s/runsc", dir);
	mkdir(p, 0700);
	is_str(ids_of(&c), "", "an empty root: no containers");

	/* what runsc leaves there: a record (.state) and its lock per container,
	 * a lock that outlived its record, the sandbox's control socket */
	touch("0123456789abcdef01234567_sandbox:0123456789abcdef01234567.state");
	touch("0123456789abcdef01234567_sandbox:0123456789abcdef01234567.lock");
	touch("abcdefabcdefabcdefabcdef_sandbox:0123456789abcdef01234567.state");
	touch("fedcba9876543210fedcba98_sandbox:fedcba9876543210fedcba98.lock");
	touch("runsc-0123456789abcdef01234567.sock");
	is_str(ids_of(&c), "0123456789abcdef01234567 abcdefabcdefabcdefabcdef",
	       "the containers with a state file, by name; a lone lock and the socket are not containers");
	snprintf(p, sizeof(p), "%s/asked", dir);
	ok(access(p, F_OK) != 0, "runsc was not started for that");

	/* something of another layout: runsc list decides */
	touch("something-else");
	is_str(ids_of(&c), "fromlist1 fromlist2", "a root with other files: the ids runsc list prints");
	f = fopen(p, "r");
	{
		char line[512] = "";
		if (f) {
			if (!fgets(line, sizeof(line), f))
				line[0] = 0;
			fclose(f);
		}
		like(line, "list -quiet", "runsc list -quiet was asked, under the node's --root");
	}
	{
		char cmd[400];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			diag("could not remove %s", dir);
	}
	return done_testing();
}
