/* libFuzzer target: the parsers of Nomad's answers (workers/nomad_job.c),
 * outside input to the provisioner and the reaper. Byte 0 picks one:
 * allocations (newest, or a named one), an evaluation, a register answer,
 * the job list and the variable list, an error body. Whatever parses leaves NUL-terminated,
 * printable text in the fixed buffers, and a reason for every dead
 * allocation or failed evaluation. */
#include "config.h"
#include <stdint.h>
#include <string.h>
#include "nomad_job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

static void printable(const char *s, size_t sz)
{
	size_t n = strnlen(s, sz);
	require(n < sz);
	for (size_t i = 0; i < n; i++)
		require(s[i] >= 0x20 && s[i] <= 0x7e);
}

static void count(const char *id, void *arg)
{
	require(id != NULL);
	(*(int *)arg)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sbx_err err = SBX_ERR_INIT;
	const char *body = (const char *)data + 1;
	size_t len = size ? size - 1 : 0;

	if (size < 1)
		return 0;
	switch (data[0] % 5) {
	case 0:
	case 1: {
		struct nomad_alloc a;
		if (nomad_allocs_parse(body, len, data[0] % 5 ? "a1" : NULL, &a, &err) == 0) {
			printable(a.id, sizeof(a.id));
			printable(a.node_name, sizeof(a.node_name));
			printable(a.reason, sizeof(a.reason));
			require(a.phase != NOMAD_ALLOC_DEAD || a.reason[0]);
		} else
			require(err.http == 503);
		break;
	}
	case 2: {
		struct nomad_eval e;
		if (nomad_eval_parse(body, len, &e, &err) == 0) {
			printable(e.reason, sizeof(e.reason));
			require(e.phase != NOMAD_EVAL_FAILED || e.reason[0]);
		} else
			require(err.http == 503);
		break;
	}
	case 3: {
		char eval[64];
		int n = 0, r;
		if (nomad_register_parse(body, len, eval, sizeof(eval), &err) == 0)
			printable(eval, sizeof(eval));
		r = nomad_jobs_parse(body, len, count, &n, &err);
		require(r < 0 || r == n);
		n = 0;
		r = nomad_vars_parse(body, len, count, &n, &err);
		require(r < 0 || r == n);
		break;
	}
	default: {
		char line[128];
		nomad_error_text(body, len, line, sizeof(line));
		printable(line, sizeof(line));
		require(line[0]);
		break;
	}
	}
	return 0;
}
