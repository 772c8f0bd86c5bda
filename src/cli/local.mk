sbin_PROGRAMS += src/cli/sbx-admin
src_cli_sbx_admin_SOURCES = src/cli/admin.c
src_cli_sbx_admin_CPPFLAGS = $(AM_CPPFLAGS) -DSBX_SRCDIR='"$(abs_top_srcdir)"'
src_cli_sbx_admin_LDADD = $(SBX_LIBS)

# sbx: the command line for people (doc/sbx.1); only the public API.
bin_PROGRAMS += src/cli/sbx
src_cli_sbx_SOURCES = src/cli/sbx.c src/cli/sbx.h src/cli/sbx_cmds.c src/cli/sbx_cp.c src/cli/sbx_shell.c \
	src/lib/fdio.c src/lib/fdio.h
src_cli_sbx_LDADD = $(JANSSON_LIBS) $(CURL_LIBS) $(SODIUM_LIBS)
dist_man1_MANS = doc/sbx.1
