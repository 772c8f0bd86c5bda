# hsess: the integration tests' HTTPS session for lib.sh's `req` (one
# libcurl connection kept between requests instead of a curl process per
# request; t/http/hsess.c). A noinst program so that a plain `make`
# (scripts/stack-up) builds it too.
noinst_PROGRAMS += t/http/hsess
t_http_hsess_SOURCES = t/http/hsess.c
t_http_hsess_CFLAGS = $(AM_CFLAGS) $(CURL_CFLAGS)
t_http_hsess_LDADD = $(CURL_LIBS)
