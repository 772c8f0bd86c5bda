sqldir = $(pkgdatadir)/sql
dist_sql_DATA = sql/001_init.sql
