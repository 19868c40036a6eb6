"""Prompts: the page workflows a person picks from a menu, and the completions of their arguments."""
