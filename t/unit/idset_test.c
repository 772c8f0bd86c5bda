/* Proves: host_idset keeps each valid id once however often it is added
 * (as the orphan pass adds a sandbox's directory, container, mounts and
 * loop device), refuses what is not an id, compares only the id's length
 * of a longer name (a mount's path after the id), and hands the ids over
 * sorted; a few thousand of them (its hash grows) lose none. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "host.h"
#include "../tap.h"

static void idn(unsigned k, char out[25])
{
	snprintf(out, 25, "%024x", k * 2654435761u);
}

int main(void)
{
	struct host_idset s = { 0 };
	char **v = NULL, id[25], path[64];
	size_t n = 0;
	bool sorted = true;

	plan(6);
	for (int round = 0; round < 4; round++)
		for (unsigned k = 0; k < 3000; k++) {
			idn(k, id);
			if (round < 3) {
				host_idset_add(&s, id, strlen(id));
			} else {
				snprintf(path, sizeof(path), "%s/rootfs", id);
				host_idset_add(&s, path, 24);
			}
		}
	host_idset_add(&s, "not-an-id", 9);
	host_idset_add(&s, "ABCDEF0123456789abcdef01", 24);
	ok(host_idset_take(&s, &v, &n) == 0, "3,000 ids added four times each are handed over");
	is_int((int)n, 3000, "...each once");
	for (size_t i = 1; i < n; i++)
		if (strcmp(v[i - 1], v[i]) >= 0)
			sorted = false;
	ok(sorted, "...sorted, no two alike");
	{
		size_t found = 0;
		for (unsigned k = 0; k < 3000; k++) {
			idn(k, id);
			for (size_t i = 0; i < n; i++)
				if (!strcmp(v[i], id)) {
					found++;
					break;
				}
		}
		is_int((int)found, 3000, "...every one of them");
	}
	ok(s.v == NULL && s.n == 0 && s.h == NULL, "the set is empty after the hand-over");
	host_strv_free(v, n);
	host_idset_add(&s, "0123456789abcdef01234567", 24);
	host_idset_add(&s, "0123456789abcdef01234567", 24);
	is_int((int)s.n, 1, "a set used again dedups again");
	host_idset_free(&s);
	return done_testing();
}
