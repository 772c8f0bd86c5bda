/* One declarative table of settings (name, type, default, range, reloadable,
 * who reads it, doc). The same table parses the config file, checks it,
 * prints --help-config and the sample config. */
#ifndef SBX_SETTINGS_H
#define SBX_SETTINGS_H

#include <stdbool.h>
#include <stdio.h>
#include "err.h"

enum sbx_stype { SBX_ST_STR, SBX_ST_INT, SBX_ST_BOOL, SBX_ST_SECS, SBX_ST_BYTES };

#define SBX_FOR_API    0x1u
#define SBX_FOR_WORKER 0x2u
#define SBX_FOR_ADMIN  0x4u
#define SBX_FOR_ALL    0x7u

#define SBX_SF_RELOAD 0x1u /* takes effect on SIGHUP */
#define SBX_SF_SECRET 0x2u /* never printed */

struct sbx_setting {
	const char *name;
	enum sbx_stype type;
	const char *def;
	long long min, max; /* for numbers */
	unsigned flags;
	unsigned who;
	const char *doc;
};

typedef struct sbx_config sbx_config;

extern const struct sbx_setting sbx_settings[];
extern const size_t sbx_settings_count;

/* Parse a config file. Unknown names, bad values and duplicates are errors
 * that name the file and line. path == NULL gives the defaults. */
int sbx_config_load(const char *path, sbx_config **out, sbx_err *err);
int sbx_config_parse(const char *buf, size_t len, const char *origin, sbx_config **out,
		     sbx_err *err);
/* Set one value by name (command-line overrides, tests). */
int sbx_config_set(sbx_config *cfg, const char *name, const char *value, sbx_err *err);
void sbx_config_free(sbx_config *cfg);

const char *sbx_cfg_str(const sbx_config *cfg, const char *name);
long long sbx_cfg_int(const sbx_config *cfg, const char *name);
bool sbx_cfg_bool(const sbx_config *cfg, const char *name);

/* Fails when a required setting for `who` is empty (auth_secret for the API). */
int sbx_config_check(const sbx_config *cfg, unsigned who, sbx_err *err);
/* Names of non-reloadable settings that differ; logs each, returns the count. */
int sbx_config_diff_nonreloadable(const sbx_config *old, const sbx_config *nw, unsigned who);

void sbx_config_print_help(FILE *f, unsigned who);
void sbx_config_print_sample(FILE *f, unsigned who);
/* All settings (API and worker) as a Markdown table. */
void sbx_config_print_markdown(FILE *f);
void sbx_config_print_values(FILE *f, const sbx_config *cfg, unsigned who);

#endif
