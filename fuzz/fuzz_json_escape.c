/* libFuzzer target: sbx_json_escape (src/lib/json.c), through which every
 * streamed byte of a sandbox's output goes as JSON text. The input's valid
 * UTF-8 (as jansson takes it) is escaped into a buffer of exactly 6 * n
 * bytes (ASan catches a write past it) and must equal jansson's compact
 * dump of the same string, quotes aside; an input jansson refuses (invalid
 * UTF-8) is escaped all the same and must stay within its 6 * n. */
#include "config.h"
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *out = malloc(6 * size + 1);
	json_t *j;
	size_t len;

	if (!out)
		return 0;
	len = sbx_json_escape(out, (const char *)data, size);
	require(len >= size && len <= 6 * size);
	j = json_stringn((const char *)data, size);
	if (j) {
		char *dump = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
		require(dump && strlen(dump) == len + 2 && memcmp(dump + 1, out, len) == 0);
		free(dump);
		json_decref(j);
	}
	free(out);
	return 0;
}
