"""Attribution methods, one per file, and their registry (:mod:`.registry`)."""
