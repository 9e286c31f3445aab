"""Decoding: search (greedy, beam), the Translator, decode settings and length-penalty tuning.

This package's __init__ imports nothing: the CTranslate2 engine reads decoding.settings without torch."""
