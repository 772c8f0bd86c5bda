# fcgi-req: a FastCGI client of its own (no libfcgi) with which the integration
# tests drive sbx-api directly, so nginx's normalisation cannot hide a bug.
# A noinst program so that a plain `make` (scripts/stack-up) builds it too.
noinst_PROGRAMS += t/fcgi/fcgi-req
t_fcgi_fcgi_req_SOURCES = t/fcgi/fcgi-req.c
t_fcgi_fcgi_req_LDADD = $(top_builddir)/src/lib/libsbx.a
