sbin_PROGRAMS += src/cli/sbx-admin
src_cli_sbx_admin_SOURCES = src/cli/admin.c
src_cli_sbx_admin_CPPFLAGS = $(AM_CPPFLAGS) -DSBX_SRCDIR='"$(abs_top_srcdir)"'
src_cli_sbx_admin_LDADD = $(SBX_LIBS)
