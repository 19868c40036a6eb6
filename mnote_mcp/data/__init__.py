"""Package data: the demo workspace a new default store is seeded with."""
