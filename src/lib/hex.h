/* One hex digit's value (header-only: sbx-init compiles it in too). */
#ifndef SBX_HEX_H
#define SBX_HEX_H

/* 0-15, or -1 when c is not a hex digit */
static inline int sbx_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
