#include "config.h"
#include <sodium.h>
#include <string.h>
#include "id.h"

void sbx_hex(const unsigned char *in, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[in[i] >> 4];
		out[2 * i + 1] = hx[in[i] & 15];
	}
	out[2 * n] = 0;
}

void sbx_id_new(char out[SBX_ID_LEN + 1])
{
	unsigned char b[SBX_ID_LEN / 2];

	randombytes_buf(b, sizeof(b));
	sbx_hex(b, sizeof(b), out);
}

bool sbx_id_valid_n(const char *s, size_t n)
{
	if (!s || n != SBX_ID_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

bool sbx_id_valid(const char *s)
{
	return s && sbx_id_valid_n(s, strlen(s));
}

bool sbx_request_id_valid(const char *s)
{
	size_t n;

	if (!s)
		return false;
	n = strlen(s);
	if (n < 1 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}
