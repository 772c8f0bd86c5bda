/* Logging in the OpenBSD daemons' manner. Every line carries the program,
 * pid and the current request id (set per request, carried across RabbitMQ). */
#ifndef SBX_LOG_H
#define SBX_LOG_H

#include <stdarg.h>

enum sbx_log_level { SBX_LOG_DEBUG, SBX_LOG_INFO, SBX_LOG_WARN, SBX_LOG_ERROR };

/* prog: program name; path: NULL or "" for stderr, else appended to (O_APPEND). */
int sbx_log_init(const char *prog, const char *path, const char *level);
void sbx_log_reopen(void);
void sbx_log_set_request_id(const char *id);
const char *sbx_log_request_id(void);
int sbx_log_parse_level(const char *s);

void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* + strerror(errno) */
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
