# rules for src/cli
