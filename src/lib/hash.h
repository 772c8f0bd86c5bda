/* FNV-1a, for the in-memory tables (prepared statements, rate buckets, a
 * node's sandbox slots, id sets): quick and well spread over short keys.
 * Not for anything an attacker may choose to collide against a secret. */
#ifndef SBX_HASH_H
#define SBX_HASH_H

#include <stddef.h>
#include <stdint.h>

#define SBX_FNV_BASIS 2166136261u
#define SBX_FNV_PRIME 16777619u

/* of the string s, up to its NUL */
static inline uint32_t sbx_hash_str(const char *s)
{
	uint32_t h = SBX_FNV_BASIS;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * SBX_FNV_PRIME;
	return h;
}

/* of the len bytes at s */
static inline uint32_t sbx_hash_mem(const char *s, size_t len)
{
	uint32_t h = SBX_FNV_BASIS;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * SBX_FNV_PRIME;
	return h;
}

#endif
