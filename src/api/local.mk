# rules for src/api
