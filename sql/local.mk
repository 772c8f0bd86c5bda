# rules for sql
