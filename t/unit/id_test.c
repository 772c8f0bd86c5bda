/* Proves: object ids are 24 lowercase hex characters, distinct over many
 * draws, and the validators reject every other shape (upper case, 23 or 25
 * characters, non-hex, NULL); request ids accept 1..64 of [A-Za-z0-9._-]. */
#include "config.h"
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include "id.h"
#include "../tap.h"

#define MANY 10000

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

int main(void)
{
	char id[SBX_ID_LEN + 1];
	char (*ids)[SBX_ID_LEN + 1];
	char buf[128];
	int all_valid = 1, dup = 0;

	if (sodium_init() < 0)
		bail_out("sodium_init failed");

	sbx_id_new(id);
	is_int(strlen(id), 24, "a new id is 24 characters long");
	is_int(strspn(id, "0123456789abcdef"), 24, "a new id is lowercase hex only");
	ok(sbx_id_valid(id), "a new id passes sbx_id_valid");
	ok(sbx_id_valid_n(id, SBX_ID_LEN), "a new id passes sbx_id_valid_n with its length");

	ids = calloc(MANY, sizeof(*ids));
	if (!ids)
		bail_out("calloc");
	for (int i = 0; i < MANY; i++) {
		sbx_id_new(ids[i]);
		if (!sbx_id_valid(ids[i]))
			all_valid = 0;
	}
	qsort(ids, MANY, sizeof(*ids), cmp_id);
	for (int i = 1; i < MANY; i++)
		if (!strcmp(ids[i - 1], ids[i]))
			dup++;
	free(ids);
	ok(all_valid, "%d new ids are all valid", MANY);
	is_int(dup, 0, "%d new ids are all distinct", MANY);

	ok(sbx_id_valid("0123456789abcdef01234567"), "a fixed lowercase hex id is valid");
	ok(!sbx_id_valid("0123456789ABCDEF01234567"), "upper-case hex is rejected");
	ok(!sbx_id_valid("0123456789abcdeF01234567"), "a single upper-case letter is rejected");
	ok(!sbx_id_valid("0123456789abcdef0123456"), "23 characters are rejected");
	ok(!sbx_id_valid("0123456789abcdef012345678"), "25 characters are rejected");
	ok(!sbx_id_valid("0123456789abcdef0123456g"), "a non-hex letter is rejected");
	ok(!sbx_id_valid("0123456789abcdef0123456-"), "punctuation is rejected");
	ok(!sbx_id_valid("../../../../../../etc/pa"), "a path of the right length is rejected");
	ok(!sbx_id_valid(""), "the empty string is rejected");
	ok(!sbx_id_valid(NULL), "NULL is rejected");
	ok(!sbx_id_valid_n(NULL, 24), "sbx_id_valid_n rejects NULL");
	ok(sbx_id_valid_n("0123456789abcdef01234567/rest", 24),
	   "sbx_id_valid_n checks only the first n characters (path segments)");
	ok(!sbx_id_valid_n("0123456789abcdef01234567", 23), "sbx_id_valid_n rejects n != 24");
	memcpy(buf, "0123456789abcdef0123\0" "567", 24);
	ok(!sbx_id_valid_n(buf, 24), "an embedded NUL inside the id is rejected");

	ok(sbx_request_id_valid("a"), "a 1-character request id is kept");
	ok(sbx_request_id_valid("Req-1.2_3"), "request id with [A-Za-z0-9._-] is kept");
	memset(buf, 'x', 64);
	buf[64] = 0;
	ok(sbx_request_id_valid(buf), "a 64-character request id is kept");
	buf[64] = 'x';
	buf[65] = 0;
	ok(!sbx_request_id_valid(buf), "a 65-character request id is refused");
	ok(!sbx_request_id_valid(""), "an empty request id is refused");
	ok(!sbx_request_id_valid(NULL), "a NULL request id is refused");
	ok(!sbx_request_id_valid("a b"), "a space in a request id is refused");
	ok(!sbx_request_id_valid("a\nb"), "a newline in a request id is refused (log injection)");
	ok(!sbx_request_id_valid("a/b"), "a slash in a request id is refused");
	ok(!sbx_request_id_valid("\xc3\xa9"), "non-ASCII bytes in a request id are refused");

	{
		const unsigned char in[] = { 0x00, 0x0f, 0xa0, 0xff };
		char hex[9];
		sbx_hex(in, sizeof(in), hex);
		is_str(hex, "000fa0ff", "sbx_hex writes lowercase hex, two digits a byte, NUL-terminated");
	}
	return done_testing();
}
