# rules for fuzz
